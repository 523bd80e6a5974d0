"""Benchmark: the bench against its oracle misbehaving one known way at a time (oracle.Quirks).

For each schedule: the figure's error against the truth, or "withheld: reason" where the bench
withheld it, or the refusal; then the sweep's aggregate tok/s error at 0, 10 and 30 ms of /metrics
exposition (which holds every stream up meanwhile, as vLLM's API loop does). Each oracle runs in
its own process. Usage:
    .venv/bin/python tests/benchmarks/oracle_quirks.py
"""

import os
import tempfile
from pathlib import Path

from seatkit.bench import oracle, run, selftest, sweep
from seatkit.bench.target import Options, Target
from seatkit.bench.workload import Prompt
from seatkit.errors import SeatError

K = 7
# name, quirks, tokens per step, step ms, output tokens
SCHEDULES = [
    ("plain, 512 tokens", {}, 5.25, 10.0, 512),
    ("plain, 2048 tokens", {}, 5.25, 10.0, 2048),
    ("ngram, no inter-token histogram", {"ngram": True, "hide": ["inter_token_latency"]}, 1.5, 5.0, 512),
    ("ngram, with the histogram", {"ngram": True}, 1.5, 5.0, 512),
    ("spec counters on a 1 s period", {"spec_period_s": 1.0}, 3.0, 5.0, 512),
    ("spec counters on a 200 ms period", {"spec_period_s": 0.2}, 3.0, 5.0, 512),
    ("final usage +7, counter agrees", {"usage_extra": 7, "generation_extra": 7}, 3.0, 5.0, 512),
    ("final usage +7, honest counter", {"usage_extra": 7}, 3.0, 5.0, 512),
    (
        "first token held, client clock",
        {"hold_first": True, "hide": ["request_decode_time", "time_to_first_token"]},
        3.0,
        5.0,
        512,
    ),
    ("a busy second model", {"other_model": True}, 3.0, 5.0, 512),
    ("prefix cache (TTFT)", {"prefix_cache": True}, 3.0, 5.0, 512),
]
FIGURES = ("decode_tok_s", "tokens_per_step", "ms_per_step")


def schedule(quirks: dict, tps: float, step_ms: float, max_tokens: int) -> dict:
    proc, url = selftest.start_oracle(tps, step_ms, quirks=quirks, k=K)
    prompt = Prompt("q", "q", "code", "measure me " * 32, "oracle", max_tokens)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            summary = run.bench(
                Target(url, oracle.MODEL, k=K),
                [prompt],
                Options(warmups=1, repeats=3),
                run.RunDir(Path(tmp), "q"),
            )
    except SeatError as exc:
        return {"refused": exc.message}
    finally:
        proc.terminate()
        proc.wait()
    return summary["suites"]["q"]


def cell(s: dict, name: str, true: float) -> str:
    if s[name]:
        return f"{s[name]['median'] / true - 1:+.2%}"
    why = s["withheld"].get(name)
    return f"withheld ({why.split(': ', 1)[0]}: {why.split(': ', 1)[1][:90]}...)" if why else "n/a"


def main() -> None:
    print(f"host: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    for name, quirks, tps, step_ms, max_tokens in SCHEDULES:
        s = schedule(quirks, tps, step_ms, max_tokens)
        if "refused" in s:
            print(f"- {name}: refused: {s['refused']}")
            continue
        true = oracle.truth(max_tokens, tps, step_ms)
        line = "; ".join(f"{f} {cell(s, f, true[f])}" for f in FIGURES)
        if quirks.get("prefix_cache"):
            line += (
                f"; TTFT cold {s['ttft_ms']['median']:.1f} ms, warm "
                f"{s['warm_ttft_ms']['median']:.1f} ms (cold truth 20 + {step_ms:g} ms)"
            )
        print(f"- {name}: {line}")
    print("\nsweep, 4 streams, 3 tokens/step, 20 ms steps: aggregate tok/s error")
    for exposition in (0.0, 10.0, 30.0):
        proc, url = selftest.start_oracle(3.0, 20.0, quirks={"exposition_ms": exposition}, k=K)
        try:
            with tempfile.TemporaryDirectory() as tmp:
                prompt = Prompt("q", "q", "code", "measure me " * 32, "oracle", 301)
                summary = sweep.sweep(
                    Target(url, oracle.MODEL, k=K),
                    [prompt],
                    Options(warmups=1),
                    [4],
                    run.RunDir(Path(tmp), "s"),
                )
        finally:
            proc.terminate()
            proc.wait()
        row = summary["suites"]["q"]["levels"][0]
        print(
            f"- exposition {exposition:.0f} ms: {row['aggregate_tok_s'] / (4 * 3 / 0.020) - 1:+.2%} "
            f"(scrapes {row['window']['scrape_ms'][0]:.1f} / {row['window']['scrape_ms'][1]:.1f} ms)"
        )


if __name__ == "__main__":
    main()
