"""A real cpu-smoke seat: `seat up` reaches /health and streams, `seat down` leaves nothing; the
rendered script's preflight refuses a busy port (that it execs the server: test_fleet_on_seats)."""

import os
import subprocess

import pytest
import requests
from conftest import BIN, REPO, descendants_alive, free_port

from seatkit.serve import client, launch


def test_seat_up_streams_and_down_leaves_no_process(vllm_runtime):
    port = free_port()
    env = {**os.environ, "SEAT_PORT": str(port)}
    seat = str(BIN / "seat")
    up = subprocess.run([seat, "up", "cpu-smoke"], env=env, capture_output=True, text=True, timeout=900)
    assert up.returncode == 0, up.stderr
    assert f"http://127.0.0.1:{port}" in up.stdout and "tiny" in up.stdout
    run = launch.recorded("cpu-smoke")
    pid = int(run.ident)
    try:
        assert requests.get(f"{run.url}/health", timeout=5).status_code == 200
        done = client.stream(run.url, "tiny", "def add(a, b):\n    return", 64)
        assert done.completion_tokens == 64 and done.finish_reason == "length"
        assert done.chunks < done.completion_tokens  # several tokens per step: speculation
        status = subprocess.run(
            [seat, "status", "cpu-smoke", "--json"], env=env, capture_output=True, text=True
        )
        assert '"state": "running"' in status.stdout and '"health": 200' in status.stdout
        again = subprocess.run([seat, "up", "cpu-smoke"], env=env, capture_output=True, text=True)
        assert again.returncode == 1 and "already up" in again.stderr
    finally:
        down = subprocess.run([seat, "down", "cpu-smoke"], env=env, capture_output=True, text=True)
    assert down.returncode == 0, down.stderr
    assert not os.path.exists(f"/proc/{pid}") or "Z" in open(f"/proc/{pid}/stat").read().split()[2]
    assert descendants_alive(pid) == []
    with pytest.raises(requests.ConnectionError):
        requests.get(f"{run.url}/health", timeout=2)


def test_script_preflight_refuses_a_busy_port(vllm_runtime):
    with __import__("socket").socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = subprocess.run(
            ["bash", str(REPO / "serve" / "cpu-smoke.sh")],
            capture_output=True,
            text=True,
            env={**os.environ, "SEAT_PORT": str(port)},
            timeout=60,
        )
    assert done.returncode == 1
    assert f"something already listens on 127.0.0.1:{port}" in done.stderr
