"""`seat bench selftest`: the bench measured against the ground-truth oracle.

For each point of a grid (about 200 to 2,000 tok/s, 1 to 7 tokens per step) an oracle process
streams on a known schedule and the real bench measures it; the table gives measured against true
tok/s, tokens/step and ms/step (from the server's counters, as the bench reports them), the
client-timed tok/s beside them, and the client's CPU cost per token.
"""

from __future__ import annotations

import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

import requests

from seatkit.bench import oracle, run
from seatkit.bench.workload import Prompt
from seatkit.errors import SeatError

GOAL = 0.005
# (tokens per step, decode tok/s): the step time follows.
GRID = [(1.0, 200.0), (2.0, 500.0), (3.5, 900.0), (5.25, 1400.0), (7.0, 2000.0)]
PROMPT = Prompt("selftest", "oracle-prompt", "code", "measure me " * 32, "oracle", 0)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _start_oracle(tokens_per_step: float, step_ms: float) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "seatkit.bench.oracle", "--port", str(port),
                             "--tokens-per-step", str(tokens_per_step), "--step-ms", str(step_ms)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            if requests.get(f"{url}/health", timeout=1).ok:
                return proc, url
        except requests.RequestException:
            time.sleep(0.1)
    proc.kill()
    raise SeatError(f"the oracle did not start: {proc.stderr.read().decode()[-500:]}")


def point(tokens_per_step: float, rate: float, decode_s: float, repeats: int) -> dict:
    """Measure one schedule; the output length gives about `decode_s` of decode."""
    step_ms = tokens_per_step / rate * 1000
    max_tokens = 1 + round(rate * decode_s)
    true = oracle.truth(max_tokens, tokens_per_step, step_ms)
    proc, url = _start_oracle(tokens_per_step, step_ms)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            out = run.RunDir(Path(tmp), "selftest")
            prompt = Prompt(**{**PROMPT.__dict__, "max_tokens": max_tokens})
            summary = run.bench(run.Target(url, oracle.MODEL, k=7), [prompt],
                                run.Options(warmups=1, repeats=repeats), out)
            records = [json.loads(line) for line in
                       (out.path / "requests.jsonl").read_text().splitlines()]
    finally:
        proc.terminate()
        proc.wait()
    s = summary["suites"]["selftest"]
    measured = {name: s[name]["median"] for name in ("decode_tok_s", "tokens_per_step", "ms_per_step")}
    client = statistics.median(r["factors"]["client_decode_tok_s"] for r in records)
    return {"true": true, "measured": measured,
            "error": {name: abs(measured[name] / true[name] - 1) for name in measured},
            "client_decode_tok_s": client,
            "client_error": abs(client / true["decode_tok_s"] - 1),
            "client_cpu_us_per_token": statistics.median(r["client_cpu_us_per_token"] for r in records),
            "max_tokens": max_tokens}


def selftest(decode_s: float = 1.0, repeats: int = 3,
             progress: Callable[[str], None] = lambda m: None) -> dict:
    points = []
    for tokens_per_step, rate in GRID:
        progress(f"oracle at {rate:.0f} tok/s, {tokens_per_step} tokens/step")
        points.append(point(tokens_per_step, rate, decode_s, repeats))
    worst = max(max(p["error"].values()) for p in points)
    return {"points": points, "worst_error": worst, "goal": GOAL, "met": worst <= GOAL}
