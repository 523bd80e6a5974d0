"""`seat bench selftest`: the bench measured against the ground-truth oracle.

For each point of a grid (about 200 to 2,000 tok/s, 1 to 7 tokens per step) an oracle process
streams on a known schedule and the real bench measures it; the table gives measured against true
tok/s, tokens/step and ms/step (from the server's counters, as the bench reports them), the
client-timed tok/s beside them, and the client's CPU cost per token.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import requests

from seatkit import safe_yaml
from seatkit.bench import oracle, run, sweep
from seatkit.bench.target import Options, Target
from seatkit.bench.workload import Prompt
from seatkit.errors import SeatError
from seatkit.ports import free_loopback_port
from seatkit.serve import client

GOAL = 0.005
IDENTITY = 1e-9  # tok/s against tokens/step / s/step, per request: rounding only
# (tokens per step, decode tok/s, output tokens or None for about `decode_s` of decode): the step
# time follows. Most points end on a step that max_tokens cuts; the last is k=7 at 512 tokens.
GRID = [
    (1.0, 200.0, None),
    (2.0, 500.0, None),
    (3.5, 900.0, None),
    (5.25, 1400.0, None),
    (7.0, 2000.0, None),
    (6.5, 600.0, 512),
]
FIGURES = ("decode_tok_s", "tokens_per_step", "ms_per_step", "drafter_tokens_per_step")
PROMPT = Prompt("oracle", "oracle-prompt", "code", "measure me " * 32, "oracle", 0)


def start_oracle(
    tokens_per_step: float, step_ms: float, batch_ms: float = 0.0, quirks: dict | None = None, k: int = 7
) -> tuple[subprocess.Popen, str]:
    port = free_loopback_port()
    given = dict(port=port, tokens_per_step=tokens_per_step, step_ms=step_ms, batch_ms=batch_ms, k=k)
    flags = [x for name, v in given.items() for x in (f"--{name.replace('_', '-')}", str(v))]
    argv = [sys.executable, "-m", "seatkit.bench.oracle_server", *flags, "--quirks", json.dumps(quirks or {})]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            if client.fetch("GET", f"{url}/health", 1).ok:
                return proc, url
        except (requests.RequestException, SeatError):
            time.sleep(0.1)
    proc.kill()
    said = proc.stderr.read().decode() if proc.stderr else ""
    raise SeatError(f"the oracle did not start: {said[-500:]}")


def identity_error(f: dict) -> float:
    """How far tok/s is from tokens/step / s/step in one request's figures."""
    return abs(f["tokens_per_step"] / (f["ms_per_step"] / 1000) / f["decode_tok_s"] - 1)


def point(tokens_per_step: float, rate: float, max_tokens: int | None, decode_s: float, repeats: int) -> dict:
    """Measure one schedule; without max_tokens the output gives about `decode_s` of decode."""
    step_ms = tokens_per_step / rate * 1000
    max_tokens = max_tokens or 1 + round(rate * decode_s)
    true = oracle.truth(max_tokens, tokens_per_step, step_ms)
    proc, url = start_oracle(tokens_per_step, step_ms)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            out = run.RunDir(Path(tmp), "selftest")
            prompt = Prompt(**{**PROMPT.__dict__, "max_tokens": max_tokens})
            summary = run.bench(
                Target(url, oracle.MODEL, k=7), [prompt], Options(warmups=1, repeats=repeats), out
            )
            lines = safe_yaml.read_text(out.path / "requests.jsonl", "the selftest's requests").splitlines()
            records = [json.loads(line) for line in lines]
    finally:
        proc.terminate()
        proc.wait()
    s = summary["suites"][PROMPT.suite]
    measured = {name: s[name]["median"] for name in FIGURES}
    client = statistics.median(r["factors"]["client_decode_tok_s"] for r in records)
    return {
        "true": true,
        "measured": measured,
        "k": 7,
        "identity_error": max(identity_error(r["factors"]) for r in records),
        "error": {name: abs(measured[name] / true[name] - 1) for name in measured},
        "client_decode_tok_s": client,
        "client_error": abs(client / true["decode_tok_s"] - 1),
        "client_cpu_us_per_token": statistics.median(r["client_cpu_us_per_token"] for r in records),
        "max_tokens": max_tokens,
    }


@dataclass(frozen=True)
class Schedule:
    """What the batched oracle serves a sweep: tokens per step, step time and its batch cost."""

    tokens_per_step: float
    step_ms: float
    batch_ms: float
    max_tokens: int
    levels: list[int]


# The sweep's oracle: 3.5 tokens per step; a step of 6 ms plus 1 ms per extra running request;
# 1,401 tokens (400 whole steps, none cut) so every window's tokens/step is the schedule's.
SWEEP = Schedule(tokens_per_step=3.5, step_ms=6.0, batch_ms=1.0, max_tokens=1401, levels=[1, 2, 4, 8, 16])
SWEEP_FIGURES = ("aggregate_tok_s", "tokens_per_step", "ms_per_step")


def sweep_truth(n: int) -> dict:
    step_ms = SWEEP.step_ms + SWEEP.batch_ms * (n - 1)
    return {
        "aggregate_tok_s": n * SWEEP.tokens_per_step / step_ms * 1000,
        "tokens_per_step": SWEEP.tokens_per_step,
        "ms_per_step": step_ms,
    }


def sweep_points(progress: Callable[[str], None] = lambda m: None) -> list[dict]:
    """The sweep at each level against the batched oracle: true and measured, and the error."""
    proc, url = start_oracle(SWEEP.tokens_per_step, SWEEP.step_ms, SWEEP.batch_ms)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            prompt = Prompt(**{**PROMPT.__dict__, "max_tokens": SWEEP.max_tokens})
            summary = sweep.sweep(
                Target(url, oracle.MODEL, k=7),
                [prompt],
                Options(warmups=1),
                SWEEP.levels,
                run.RunDir(Path(tmp), "sweep"),
                lambda m: progress(f"concurrency sweep, {m}"),
            )
    finally:
        proc.terminate()
        proc.wait()
    points = []
    for row in summary["suites"][PROMPT.suite]["levels"]:
        true = sweep_truth(row["concurrency"])
        measured = {name: row.get(name) for name in SWEEP_FIGURES}
        points.append(
            {
                "concurrency": row["concurrency"],
                "true": true,
                "measured": measured,
                "error": {k: abs(measured[k] / true[k] - 1) if measured[k] else 1.0 for k in SWEEP_FIGURES},
                "counters_tok_s": row.get("counters_tok_s"),
                "alarms": row["alarms"],
                "client_cpu_us_per_token": row["client_cpu_us_per_token"],
            }
        )
    return points


def selftest(
    decode_s: float = 1.0, repeats: int = 3, progress: Callable[[str], None] = lambda m: None
) -> dict:
    points = []
    for i, (tokens_per_step, rate, max_tokens) in enumerate(GRID, 1):
        progress(
            f"batch 1, point {i} of {len(GRID)}: oracle at {rate:.0f} tok/s, {tokens_per_step} tokens/step"
        )
        points.append(point(tokens_per_step, rate, max_tokens, decode_s, repeats))
    levels = sweep_points(progress)
    worst = max(max(p["error"].values()) for p in points + levels)
    identity = max(p["identity_error"] for p in points)
    return {
        "points": points,
        "sweep": levels,
        "worst_error": worst,
        "goal": GOAL,
        "identity_error": identity,
        "met": worst <= GOAL and identity <= IDENTITY,
    }
