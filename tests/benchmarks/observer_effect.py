"""Benchmark: what polling /metrics while a request streams does to the stream.

Requests alternate, one with the gauge sampler off (how `seat bench` runs now) and one with it on
(the old default scraped at 2 Hz; the issue saw the damage at 4-20 Hz), on the same seat in one run,
so drift hits both alike. Per mode: the client's TTFT, the server's TTFT (its histogram), the
server's decode time, and bursts (client-timed decode against the server's; the `client-bursts`
alarm). Usage:
    .venv/bin/python tests/benchmarks/observer_effect.py [PAIRS] [HZ] [--url URL --model NAME]
Without --url it starts the cpu-smoke seat on a free port and stops it afterwards.
"""

import argparse
import os
import statistics

from seatkit.bench import request, workload
from seatkit.bench.target import Options, Target
from seatkit.ports import free_loopback_port
from seatkit.seat import profiles
from seatkit.serve import launch
from seatkit.serve import spec as specs


def figures(records: list[dict]) -> dict:
    f = [r["factors"] for r in records]
    return {
        "client TTFT ms": [x["client_ttft_ms"] for x in f],
        "server TTFT ms": [x["ttft_ms"] for x in f if x["ttft_source"] == "server"],
        # What reaching the client added to the first token: load moves both TTFTs, not this.
        "client - server TTFT ms": [
            x["client_ttft_ms"] - x["ttft_ms"] for x in f if x["ttft_source"] == "server"
        ],
        "server decode ms": [x["decode_ms"] for x in f],
        "client/server decode tok/s": [x["client_vs_server"] for x in f if x["client_vs_server"]],
        "client-bursts alarms": [1.0 if "client-bursts" in r["alarms"] else 0.0 for r in records],
    }


def measure(target: Target, pairs: int, hz: float) -> None:
    prompt = workload.suites(["code"], max_tokens=256)[0]
    for _ in range(2):  # warm-ups
        request.measure(target, prompt, Options())
    modes = {"off": [], "on": []}
    for i in range(pairs):
        for mode in ("off", "on") if i % 2 == 0 else ("on", "off"):
            record = request.measure(target, prompt, Options(sample_hz=hz if mode == "on" else 0.0))
            modes[mode].append(record)
    print(f"{pairs} requests per mode, sampler at {hz:g} Hz when on; 256 tokens, code prompt")
    print(f"{'figure':<28}{'off: median (min-max)':>26}{'on: median (min-max)':>26}")
    off, on = figures(modes["off"]), figures(modes["on"])
    for name in off:
        cells = []
        for values in (off[name], on[name]):
            if name.endswith("alarms"):
                cells.append(f"{sum(values):.0f} of {len(values)}")
            elif values:
                cells.append(f"{statistics.median(values):.3g} ({min(values):.3g}-{max(values):.3g})")
            else:
                cells.append("n/a")
        print(f"{name:<28}{cells[0]:>26}{cells[1]:>26}")
    print(
        "scrapes while streaming, on:",
        sum(r["gauges"]["samples"] for r in modes["on"]),
        "off:",
        sum(r["gauges"]["samples"] for r in modes["off"]),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pairs", nargs="?", type=int, default=8)
    parser.add_argument("hz", nargs="?", type=float, default=10.0)
    parser.add_argument("--url")
    parser.add_argument("--model", default="tiny")
    args = parser.parse_args()
    if args.url:
        measure(Target(args.url, args.model), args.pairs, args.hz)
        return
    os.environ["SEAT_PORT"] = str(free_loopback_port())
    running, _ = launch.up(specs.build(profiles.load("cpu-smoke")))
    try:
        measure(Target(running.url, running.model, launch.headers(running)), args.pairs, args.hz)
    finally:
        launch.stop(running, grace=30)


if __name__ == "__main__":
    main()
