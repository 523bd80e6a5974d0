"""Test runs that share a machine: each run has a docker engine of its own and never touches another's."""

import os
import subprocess
import uuid
from pathlib import Path

import docker
from conftest import NO_ENGINE, private_engine


def docker_cli(host, *args, stdin=None):
    return subprocess.run(
        ["docker", *args],
        input=stdin,
        capture_output=True,
        timeout=120,
        env={**os.environ, "DOCKER_HOST": host},
    )


def tiny_image(host, tag):
    """A one-file image: busybox, imported (no registry)."""
    tar = subprocess.run(["tar", "-C", "/", "-c", "bin/busybox"], capture_output=True, check=True).stdout
    done = docker_cli(host, "import", "-", tag, stdin=tar)
    assert done.returncode == 0, done.stderr


def test_two_engines_side_by_side_do_not_touch_each_other():
    tag = f"seatkit-test/side-{uuid.uuid4().hex[:8]}:1"
    with private_engine("a") as a:
        tiny_image(a, tag)
        ran = docker_cli(
            a, "run", "-d", "--network", "none", "--entrypoint", "/bin/busybox", tag, "sleep", "600"
        )
        assert ran.returncode == 0, ran.stderr
        ours = ran.stdout.decode().strip()
        with private_engine("b") as b:
            assert a != b and Path(b.removeprefix("unix://")).exists()
            # B sees none of A's images or containers, and what B removes under the same tag is B's own.
            assert docker_cli(b, "image", "inspect", tag).returncode != 0
            assert docker_cli(b, "ps", "-aq").stdout.strip() == b""
            tiny_image(b, tag)
            assert docker_cli(b, "image", "rm", "-f", tag).returncode == 0
            assert docker_cli(b, "system", "prune", "-af").returncode == 0
        # B stopped (its run ended): A's engine, image and running container are all still there.
        assert docker_cli(a, "image", "inspect", tag).returncode == 0
        state = docker_cli(a, "inspect", "-f", "{{.State.Running}}", ours)
        assert state.stdout.strip() == b"true", state.stderr
        pidfile = Path(a.removeprefix("unix://")).parent / "dockerd.pid"
        pid = int(pidfile.read_text())
        assert Path(f"/proc/{pid}").exists()
    # A's run ended: its engine is gone, with its folder.
    assert not Path(f"/proc/{pid}").exists() or "dockerd" not in Path(f"/proc/{pid}/cmdline").read_text()
    assert not pidfile.parent.exists()


def test_the_sdk_the_cli_and_compose_reach_this_runs_engine(docker_engine, busybox_image, compose, tmp_path):
    """Every client the kit and the tests use goes to the run's own engine (DOCKER_HOST)."""
    assert (
        docker_engine.startswith("unix:///tmp/seat-engine-run-")
        and os.environ["DOCKER_HOST"] == docker_engine
    )
    project = f"seatkit-test-{uuid.uuid4().hex[:8]}"
    (tmp_path / "docker-compose.yml").write_text(
        f"services:\n  idle:\n    image: {busybox_image}\n    command: [sleep, '600']\n    network_mode: none\n"
    )
    up = subprocess.run(
        [*compose, "-p", project, "-f", str(tmp_path / "docker-compose.yml"), "up", "-d"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert up.returncode == 0, up.stderr
    try:
        listed = docker.from_env().containers.list(filters={"label": f"com.docker.compose.project={project}"})
        assert len(listed) == 1
        seen = docker_cli(docker_engine, "ps", "-q", "--no-trunc").stdout.decode().split()
        assert listed[0].id in seen
    finally:
        subprocess.run(
            [*compose, "-p", project, "-f", str(tmp_path / "docker-compose.yml"), "down", "-t", "0"],
            capture_output=True,
            timeout=120,
        )


def test_a_test_that_asks_for_no_engine_reaches_none():
    """Outside docker_engine, docker calls reach no engine at all, not the one on the default socket,
    even after this run's engine started for the test above (pytest runs a file in order)."""
    assert os.environ["DOCKER_HOST"] == NO_ENGINE
    done = subprocess.run(["docker", "info"], capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "nonexistent" in done.stderr
