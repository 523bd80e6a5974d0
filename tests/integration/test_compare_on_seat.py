"""`seat bench compare` and `seat bench parity` on real cpu-smoke runs (k=5, then k=3)."""

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import BIN

from seatkit.bench import aggregate

SEAT = str(BIN / "seat")


def seat(*args, env=None, check=True):
    done = subprocess.run(
        [SEAT, *args],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "COLUMNS": "250", **(env or {})},
    )
    if check:
        assert done.returncode == 0, done.stdout + done.stderr
    return done


def newest(folder, prefix=""):
    return str(sorted(p for p in folder.iterdir() if p.name.split("-", 1)[1].startswith(prefix))[-1])


def halves(run, out):
    """Two runs from one: its alternate requests, so drift on a busy host hits both alike."""
    records = [json.loads(line) for line in (Path(run) / "requests.jsonl").read_text().splitlines()]
    summary = json.loads((Path(run) / "summary.json").read_text())
    made = []
    for half in ("even", "odd"):
        kept = [r for r in records if r["repeat"] % 2 == (half == "odd")]
        folder = out / f"{Path(run).name}-{half}"
        folder.mkdir()
        (folder / "summary.json").write_text(json.dumps({**summary, "suites": aggregate.summarize(kept)}))
        made.append(str(folder))
    return made


@contextlib.contextmanager
def cpu_hog():
    """A process that spins on one core while the block runs: the host gets busy mid-comparison."""
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield hog
    finally:
        hog.kill()
        hog.wait()


@pytest.fixture(scope="module")
def runs(cpu_seats, tmp_path_factory):
    """On the run's shared seats: a code bench of 8 repeats on k=5 (after a discarded one that warms
    the seat), split into its even and odd requests; one on k=3 while a CPU hog runs; two parity
    records on k=5."""
    out = tmp_path_factory.mktemp("runs")
    env = {"SEAT_HOME": str(cpu_seats.home)}
    made = {}

    def code_bench(profile: str, repeats: int, into, *named: str) -> None:
        seat(
            "bench",
            profile,
            "--suite",
            "code",
            "--warmups",
            "1",
            "--repeats",
            str(repeats),
            "--max-tokens",
            "384",
            "--out",
            str(into),
            *named,
            env=env,
        )

    for profile, repeats in (("cpu-smoke", 8), ("cpu-smoke-k3", 4)):
        code_bench(profile, 1, tmp_path_factory.mktemp("warm"))
        with cpu_hog() if profile == "cpu-smoke-k3" else contextlib.nullcontext():
            code_bench(profile, repeats, out, "--name", f"{profile}-0")
        made[f"{profile}-0"] = newest(out, profile)
        for i in range(2 if profile == "cpu-smoke" else 0):
            seat("bench", "parity", profile, "--max-tokens", "128", "--out", str(out), env=env)
            made[f"parity-{profile}-{i}"] = newest(out, f"parity-{profile}")
    made["cpu-smoke-even"], made["cpu-smoke-odd"] = halves(made["cpu-smoke-0"], out)
    return made


def test_two_runs_of_the_same_seat_compare_as_within_noise(runs):
    done = seat("bench", "compare", runs["cpu-smoke-even"], runs["cpu-smoke-odd"], "--format", "markdown")
    assert "conditions that differ" in done.stdout.lower() and "- none" in done.stdout
    assert "within noise" in done.stdout


def test_another_draft_length_names_the_factor_that_moved(runs):
    """k=3 against k=5, the k=3 bench under a CPU hog: step time may move too (then both are
    named); tokens per step, deterministic here, must be named whatever step time did."""
    done = seat("bench", "compare", runs["cpu-smoke-k3-0"], runs["cpu-smoke-0"], "--format", "markdown")
    assert "- k: 3 vs 5 (differs)" in done.stdout and "- k: 3 vs 5" in done.stdout
    assert "tokens per step moved: " in done.stdout and "lower on A" in done.stdout
    assert "drafting policy and k" in done.stdout
    verdict = json.loads(
        seat("bench", "compare", runs["cpu-smoke-k3-0"], runs["cpu-smoke-0"], "--format", "json").stdout
    )["rows"][0]["verdict"]
    assert "tokens_per_step" in verdict["moved"]
    assert ("both factors moved" in verdict["text"]) == (len(verdict["moved"]) == 2)


def test_greedy_parity_of_two_runs_is_byte_identical(runs):
    done = seat("bench", "parity-diff", runs["parity-cpu-smoke-0"], runs["parity-cpu-smoke-1"])
    assert "all byte-identical" in done.stdout and "diverges" not in done.stdout


def test_a_run_against_a_reference_card_lists_every_mismatch(runs):
    refused = seat("bench", "compare", runs["cpu-smoke-0"], "paper-pt-r-2026-042", check=False)
    assert refused.returncode == 2 and "different models" in refused.stderr
    forced = seat("bench", "compare", runs["cpu-smoke-0"], "paper-pt-r-2026-042", "--force")
    for condition in ("model:", "draft:", "k: 5 vs 7", "draft policy:", "host settings:", "statistic:"):
        assert condition in forced.stdout, condition
    assert "S12-S14-code" in forced.stdout and "seat bench compare" in forced.stdout
