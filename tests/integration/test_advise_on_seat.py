"""`seat bench advise` on the real CPU seat: SmolLM2-135M from the pinned wheel with its ngram
drafter, code and prose benched at k=2 and k=5, predicts k=3; a run at k=3 lands inside the
predicted interval for tokens/step and tok/s, per suite."""

from __future__ import annotations

import json
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import BIN, free_port, unavailable

from seatkit.bench import advise, workload
from seatkit.bench import run as bench_run
from seatkit.bench.target import Options
from seatkit.doctor import targets
from seatkit.errors import SeatError
from seatkit.seat import profiles
from seatkit.serve import client, launch, runtime
from seatkit.serve import spec as specs

MEASURED, HELD_OUT = (2, 5), 3
ROUNDS = 2  # the lengths benched in turn, so that a busy host slows each alike
MAX_TOKENS = 48
SUITES = ["demo-code", "demo-prose"]


def variant(folder: Path, k: int) -> str:
    """cpu-smollm2 drafting k tokens, on a port of its own: the three seats are up at once."""
    path = folder / f"cpu-smollm2-k{k}.yaml"
    path.write_text(
        f"extends: cpu-smollm2\nserver: {{port: {free_port()}}}\nspeculative: {{num_speculative_tokens: {k}}}\n"
    )
    return str(path)


@pytest.fixture
def seats(tmp_path, monkeypatch):
    """The real model's seat at each length, started together, stopped by their records."""
    monkeypatch.delenv("SEAT_PORT", raising=False)
    try:
        runtime.setup(profiles.load("cpu-smollm2"), say=lambda m: print(f"setup: {m}"))
    except SeatError as exc:
        unavailable(f"could not build cpu-smollm2's model: {exc}")
    paths = {k: variant(tmp_path, k) for k in (*MEASURED, HELD_OUT)}
    with ThreadPoolExecutor(len(paths)) as pool:
        starts = [pool.submit(launch.up, specs.build(profiles.load(p))) for p in paths.values()]
    started = [s.result()[0] for s in starts if s.exception() is None]
    try:
        for s in starts:
            s.result()  # a seat that did not start fails the test, once the others are stopped
        yield paths
    finally:
        for seat in started:
            launch.stop(seat, grace=30)


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
