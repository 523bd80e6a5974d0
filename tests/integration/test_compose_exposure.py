"""The rendered compose file of a seat without an API key, run by a real compose on a real engine: a
non-loopback SEAT_HOST is refused in the seat's own image before the seat starts, as the script
refuses it (tests/unit/test_launch_forms.py checks the three forms against one another)."""

import os
import subprocess
import uuid

import docker

from seatkit import paths
from seatkit.serve import keys
from seatkit.serve.compose import EXPOSURE_CHECK


def test_compose_up_refuses_a_keyless_seat_beyond_loopback_before_it_starts(
    docker_engine, busybox_image, compose, tmp_path
):
    file = paths.REPO / "docker-compose.yml"  # the default seat: no key
    project = ["-p", f"seatkit-test-{uuid.uuid4().hex[:8]}", "-f", str(file)]
    seat = f"seatkit-test-seat-{uuid.uuid4().hex[:8]}"
    folders = {k: str(tmp_path) for k in ("SEAT_MODEL_BASE_DIR", "SEAT_MODEL_DRAFT_DIR", "SEAT_CACHE_DIR")}
    env = {
        **os.environ,
        **folders,
        "SEAT_IMAGE": busybox_image,
        "SEAT_CONTAINER": seat,
        "SEAT_HOST": "0.0.0.0",
    }
    try:
        up = subprocess.run(
            [*compose, *project, "up", "-d"], env=env, capture_output=True, text=True, timeout=180
        )
        assert up.returncode != 0 and EXPOSURE_CHECK in up.stderr, up.stderr
        logs = subprocess.run(
            [*compose, *project, "logs", EXPOSURE_CHECK],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert keys.REFUSAL.format(host="0.0.0.0") in logs.stdout + logs.stderr
        made = docker.from_env().containers.list(all=True, filters={"name": seat})
        assert [c.status for c in made] in ([], ["created"])  # never started
        told = {**env, keys.EXPOSE_WITHOUT_KEY: "1"}
        check = [*compose, *project, "run", "--rm", EXPOSURE_CHECK]
        assert subprocess.run(check, env=told, capture_output=True, timeout=120).returncode == 0
    finally:
        subprocess.run([*compose, *project, "down", "-t", "0"], env=env, capture_output=True, timeout=120)
