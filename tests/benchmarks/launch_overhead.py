"""Benchmark: time from `seat up cpu-smoke` to healthy, against the same `vllm serve` by hand.

Not a test (it asserts nothing about speed); it prints figures measured in one run, alternating
the two ways of starting so both see the same warm caches. Usage:
    .venv/bin/python tests/benchmarks/launch_overhead.py [ROUNDS]
"""

import os
import signal
import statistics
import subprocess
import sys
import time

import requests

from seatkit.serve import profile as profiles, runtime, spec as specs

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 3
SEAT = os.path.join(os.path.dirname(sys.executable), "seat")


def by_kit(port: int) -> float:
    env = {**os.environ, "SEAT_PORT": str(port)}
    start = time.monotonic()
    subprocess.run([SEAT, "up", "cpu-smoke"], env=env, check=True, capture_output=True)
    took = time.monotonic() - start
    subprocess.run([SEAT, "down", "cpu-smoke"], env=env, check=True, capture_output=True)
    return took


def _serves(url: str) -> bool:
    """The same readiness as `seat up`: /health, then the model listed by /v1/models."""
    try:
        return (requests.get(f"{url}/health", timeout=2).ok
                and requests.get(f"{url}/v1/models", timeout=5).ok)
    except requests.RequestException:
        return False


def by_hand(port: int) -> float:
    spec = specs.build(profiles.load("cpu-smoke"))
    values = {**spec.values(), "SEAT_PORT": str(port)}
    venv = specs.resolve(spec.venv, values)
    env = {**os.environ, **spec.env, "LD_PRELOAD": f"{venv}/lib/libiomp5.so"}
    start = time.monotonic()
    proc = subprocess.Popen([specs.resolve(w, values) for w in spec.command], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    while not _serves(f"http://127.0.0.1:{port}"):
        time.sleep(0.5)
    took = time.monotonic() - start
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait()
    return took


if __name__ == "__main__":
    runtime.setup(profiles.load("cpu-smoke"), say=lambda m: None)
    kit, hand = [], []
    for i in range(ROUNDS):
        kit.append(by_kit(18700 + i))
        hand.append(by_hand(18800 + i))
        print(f"round {i + 1}: seat up {kit[-1]:.1f} s, by hand {hand[-1]:.1f} s", flush=True)
    k, h = statistics.median(kit), statistics.median(hand)
    print(f"median: seat up {k:.1f} s to healthy (incl. /v1/models and CLI start), by hand {h:.1f} s;"
          f" kit overhead {k - h:+.1f} s, ratio {k / h:.3f}")
