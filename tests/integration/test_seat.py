"""A real cpu-smoke seat: `seat up` reaches /health and streams, `seat down` leaves nothing;
the rendered script launches the same server with bash alone and execs it."""

import os
import signal
import subprocess
import time

import pytest
import requests
from conftest import BIN, REPO, descendants_alive, free_port

from seatkit.serve import client, launch
from seatkit.serve.backends.native import process_start


def wait_health(port, proc, log):
    """The kit's own readiness wait, on a server the kit did not start."""
    url = f"http://127.0.0.1:{port}"
    run = launch.Running(
        "cpu-smoke", "native", str(proc.pid), url, "tiny", log, 0, since=process_start(proc.pid)
    )
    launch.wait_ready(run, 600, lambda stage, t: None)


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


def test_rendered_script_execs_the_server(vllm_runtime, tmp_path):
    port = free_port()
    log = tmp_path / "serve.log"
    proc = subprocess.Popen(
        ["bash", str(REPO / "serve" / "cpu-smoke.sh")],
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env={**os.environ, "SEAT_PORT": str(port)},
    )
    try:
        # exec: after its preflight, the PID bash had becomes the server itself, so signals
        # reach the server directly.
        for _ in range(300):
            argv = open(f"/proc/{proc.pid}/cmdline", "rb").read().split(b"\0")
            if b"vllm" in b" ".join(argv) or proc.poll() is not None:
                break
            time.sleep(0.1)
        assert not argv[0].endswith(b"bash") and b"vllm" in b" ".join(argv), argv
        wait_health(port, proc, str(log))
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) is not None
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


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
