"""`seat bench advise`: tokens/step, ms/step and tok/s by draft length, predicted from runs and cards,
checked against the oracle's known per-position schedule and step-time law, and the deepspark card."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from http.server import ThreadingHTTPServer

import pytest

from seatkit.bench import advise, advise_verdict, oracle, oracle_server, run, workload
from seatkit.bench.target import Options, Target

# Code keeps its draft far and prose hardly at all: their best fixed k differ.
CODE = (0.95, 0.93, 0.91, 0.9, 0.15, 0.05)
PROSE = (0.5, 0.1, 0.02)
STEP_MS, DRAFT_MS = 10.0, 5.0  # each step: 10 ms, and 5 ms per drafted token


def true_tok_s(acceptance: tuple[float, ...], k: int) -> float:
    return 1000 * (1 + sum(acceptance[:k])) / (STEP_MS + DRAFT_MS * k)


@contextmanager
def oracle_at(k: int, acceptance: tuple[float, ...]):
    engine = oracle.Oracle(1.0, STEP_MS, k, prefill_ms=1.0, acceptance=acceptance, draft_ms=DRAFT_MS)
    http = ThreadingHTTPServer(("127.0.0.1", 0), oracle_server.handler_for(engine))
    threading.Thread(target=http.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{http.server_address[1]}"
    finally:
        http.shutdown()
        http.server_close()


def bench(tmp_path, suite: str, k: int, acceptance: tuple[float, ...], repeats: int = 4) -> str:
    """A batch-1 run of one prompt of the suite on an oracle drafting k with this schedule."""
    with oracle_at(k, acceptance) as url:
        folder = run.RunDir(tmp_path, f"{suite}-k{k}")
        prompts = workload.suites([suite], 96)[:1]
        run.bench(Target(url, oracle.MODEL, k=k), prompts, Options(0, repeats), folder)
    return str(folder.path)


@pytest.fixture(scope="module")
def two_lengths(tmp_path_factory):
    """Code and prose, each at k=2 and k=6."""
    tmp = tmp_path_factory.mktemp("runs")
    return [
        bench(tmp, suite, k, schedule)
        for k in (2, 6)
        for suite, schedule in (("code", CODE), ("prose", PROSE))
    ]


def test_the_oracle_recovers_each_suites_best_k_and_its_tok_s_within_the_intervals(two_lengths):
    advice = advise_verdict.judge(advise.advise(two_lengths))
    assert advice["line"]["slope"] == pytest.approx(DRAFT_MS, rel=0.15)
    for suite, schedule in (("code", CODE), ("prose", PROSE)):
        column = advice["columns"][suite]
        assert column["check"]["status"] == "holds", column["check"]
        for cell in column["cells"]:
            if cell["k"] > len(schedule) or cell["from"] == "extrapolated":
                continue
            predicted = cell["predicted"]["decode_tok_s"]
            assert predicted["low"] <= true_tok_s(schedule, cell["k"]) <= predicted["high"], (suite, cell)
        truth = max(range(1, 7), key=lambda k: true_tok_s(schedule, k))
        best = advice["best"][suite]
        assert truth == best["k"] or truth in best["ties"], best
    assert advice["best"]["code"]["k"] == 4 and advice["best"]["prose"]["k"] == 1
    assert advice["ceiling"]["gains"]["prose"]["value"] > 0 or advice["ceiling"]["gains"]["code"]["value"] > 0


def test_the_deepspark_card_gives_2_87_tokens_per_step_at_gamma_5():
    column = advise.advise(["deepspark-readme"])["columns"]["deepspark-readme D6-D11-ctx0"]
    tokens = {c["k"]: c["predicted"]["tokens_per_step"]["value"] for c in column["cells"]}
    assert round(tokens[5], 2) == 2.87
    assert [round(tokens[k], 3) for k in range(1, 6)] == [1.74, 2.244, 2.566, 2.76, 2.869]
    assert column["cells"][5]["from"] == "extrapolated"
