"""`seat bench advise` on real CPU seats: the run's shared cpu-smoke pair (ngram k=3 and k=5,
real vLLM counters) benched on code and prose predicts k=4; a run on a third seat at k=4 lands
inside the predicted interval for tokens/step and tok/s, per suite."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from conftest import BIN, free_port

from seatkit.bench import advise, workload
from seatkit.bench import run as bench_run
from seatkit.bench.target import Options
from seatkit.doctor import targets
from seatkit.seat import profiles
from seatkit.serve import client, launch
from seatkit.serve import spec as specs

MEASURED, HELD_OUT = (3, 5), 4
ROUNDS = 2  # the lengths benched in turn, so that a busy host slows each alike
MAX_TOKENS = 48
SUITES = ["demo-code", "demo-prose"]


@pytest.fixture
def seats(cpu_seats, tmp_path):
    """The shared seats at k=3 and k=5, and cpu-smoke at k=4 beside them, stopped by its record."""
    held_out = tmp_path / f"cpu-smoke-k{HELD_OUT}.yaml"
    held_out.write_text(
        f"extends: cpu-smoke\nserver: {{port: {free_port()}}}\n"
        f"speculative: {{num_speculative_tokens: {HELD_OUT}}}\n"
    )
    with cpu_seats.recorded():
        started, _ = launch.up(specs.build(profiles.load(str(held_out))))
        try:
            yield {3: "cpu-smoke-k3", 5: "cpu-smoke", HELD_OUT: str(held_out)}
        finally:
            launch.stop(started, grace=30)


def test_advice_from_two_lengths_predicts_a_held_out_third_on_the_real_seat(seats, tmp_path):
    prompts = workload.suites(SUITES, MAX_TOKENS)
    for path in seats.values():  # one warm-up a seat: its first request is slower than the rest
        target = targets.of_profile(path)
        client.stream(target.url, target.model, prompts[0].text, MAX_TOKENS, target.headers)
    runs: dict[int, list[str]] = {k: [] for k in seats}
    for i in range(ROUNDS):
        for k, path in seats.items():
            out = bench_run.RunDir(tmp_path / "runs", f"k{k}-round{i}")
            bench_run.bench(targets.of_profile(path), prompts, Options(0, 1), out)
            runs[k].append(str(out.path))
    given = [r for k in MEASURED for r in runs[k]]
    done = subprocess.run(
        [str(BIN / "seat"), "bench", "advise", *given, "--out", str(tmp_path / "advice")],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "80"},
    )
    assert done.returncode == 0, done.stderr
    print(done.stdout)
    (folder,) = (tmp_path / "advice").iterdir()
    predicted = json.loads((folder / "advice.json").read_text())
    assert (folder / "advice.png").read_bytes()[:4] == b"\x89PNG"
    measured = advise.advise(runs[HELD_OUT])["columns"]
    for suite in ("demo-code", "demo-prose"):
        column = predicted["columns"][suite]
        assert column["check"]["status"] == "holds", column["check"]["text"]
        (cell,) = [c for c in column["cells"] if c["k"] == HELD_OUT]
        (there,) = [c["measured"] for c in measured[suite]["cells"] if c["k"] == HELD_OUT]
        for factor in ("tokens_per_step", "decode_tok_s"):
            guess, got = cell["predicted"][factor], there[factor]
            print(f"{suite} k={HELD_OUT} {factor}: predicted {guess}, measured {got}")
            if guess is None:  # step time fell as drafts grew: load, and the advice says so
                assert factor == "decode_tok_s" and predicted["line"]["falls"], (suite, predicted["line"])
                assert "load on the host" in done.stdout
                continue
            if guess["low"] is None:  # every request alike: a point, its spread unknown
                assert got["value"] == pytest.approx(guess["value"], rel=0.05), (suite, factor, guess, got)
                continue
            assert guess["low"] <= got["value"] <= guess["high"], (suite, factor, guess, got)
    # Acceptance by position needs no fit: the code suite's tokens/step is always predicted with an
    # interval, and the measured one lands in it (checked above).
    (code,) = [c for c in predicted["columns"]["demo-code"]["cells"] if c["k"] == HELD_OUT]
    assert code["predicted"]["tokens_per_step"]["low"] is not None
