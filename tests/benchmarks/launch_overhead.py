"""Benchmark: time from `seat up cpu-smoke` to ready, against the same `vllm serve` started bare.

Not a test (it asserts nothing about speed); it prints figures measured in one run, alternating
the two ways of starting so both see the same warm caches. "Bare" is the server's own process
started directly (no CLI, no preflight, no state file), waited for the same way. Usage:
    .venv/bin/python tests/benchmarks/launch_overhead.py [ROUNDS]
"""

import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

from seatkit.errors import SeatError
from seatkit.seat import profiles
from seatkit.serve import launch, runtime
from seatkit.serve import spec as specs
from seatkit.serve.backends.native import process_start, spawn

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 3
SEAT = os.path.join(os.path.dirname(sys.executable), "seat")


def port_taken(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1.0).close()
        return True
    except OSError:
        return False


def by_kit(port: int) -> float:
    env = {**os.environ, "SEAT_PORT": str(port)}
    start = time.monotonic()
    subprocess.run([SEAT, "up", "cpu-smoke"], env=env, check=True, capture_output=True)
    took = time.monotonic() - start
    subprocess.run([SEAT, "down", "cpu-smoke"], env=env, check=True, capture_output=True)
    return took


def bare(port: int, log: str) -> float:
    spec = specs.build(profiles.load("cpu-smoke"))
    values = {**spec.values(), "SEAT_PORT": str(port)}
    start = time.monotonic()
    pid = spawn(spec, values, Path(log), {})
    run = launch.Running(
        "cpu-smoke",
        "native",
        pid,
        f"http://127.0.0.1:{port}",
        "tiny",
        log,
        start,
        since=process_start(int(pid)),
    )
    try:
        launch.wait_ready(run, 900, lambda stage, t: None)
        return time.monotonic() - start
    finally:
        launch.stop(run, grace=30)


if __name__ == "__main__":
    runtime.setup(profiles.load("cpu-smoke"), say=lambda m: None)
    kit, hand = [], []
    for i in range(ROUNDS):
        ports = (18700 + i, 18800 + i)
        if any(map(port_taken, ports)):
            raise SeatError(f"a port of {ports} is taken: the figures would be wrong")
        kit.append(by_kit(ports[0]))
        hand.append(bare(ports[1], f"/tmp/seatkit-bench-bare-{i}.log"))
        print(f"round {i + 1}: seat up {kit[-1]:.1f} s, bare {hand[-1]:.1f} s", flush=True)
    k, h = statistics.median(kit), statistics.median(hand)
    print(
        f"median over {ROUNDS}: seat up {k:.1f} s to ready (/health and /v1/models, CLI start "
        f"included), bare {h:.1f} s; kit overhead {k - h:+.1f} s, ratio {k / h:.3f}"
    )
