"""Benchmark: how long `seat` takes to start, against the interpreter's own start (`python -c pass`).

Not a test (it asserts nothing about speed); it prints the median of each command over ROUNDS runs,
alternated so that both see the same machine, and the ratio of each to the bare interpreter. The
machine's load average is printed with them: on a busy machine every figure grows. Usage:
    .venv/bin/python tests/benchmarks/start_time.py [ROUNDS]
"""

import os
import statistics
import subprocess
import sys
import tempfile
import time

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 10
SEAT = os.path.join(os.path.dirname(sys.executable), "seat")
COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "seat --help": [SEAT, "--help"],
    "seat status cpu-smoke": [SEAT, "status", "cpu-smoke"],
    "seat render --check": [SEAT, "render", "--check"],
}


def seconds(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True, env=env)
    return time.perf_counter() - start


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="seat-home-") as home:  # status reads an empty SEAT_HOME
        env = {**os.environ, "SEAT_HOME": home}
        times: dict[str, list[float]] = {name: [] for name in COMMANDS}
        for _ in range(ROUNDS):
            for name, argv in COMMANDS.items():
                times[name].append(seconds(argv, env))
    bare = statistics.median(times["python -c pass"])
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}, {ROUNDS} rounds, medians:")
    for name, found in times.items():
        median = statistics.median(found)
        print(f"  {name:24} {median:6.3f} s  {median / bare:5.1f}x python -c pass")


if __name__ == "__main__":
    main()
