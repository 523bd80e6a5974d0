"""`seat bench advise`: tokens/step, ms/step and tok/s by draft length, predicted from runs and cards,
checked against the oracle's known per-position schedule and step-time law, and the deepspark card."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from contextlib import contextmanager
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest
from conftest import BIN, run_dir

from seatkit.bench import advise, advise_verdict, compare, oracle, oracle_server, report, run, workload
from seatkit.bench.target import Options, Target
from seatkit.errors import SeatError

# Code keeps its draft far and prose hardly at all: their best fixed k differ.
CODE = (0.97, 0.96, 0.95, 0.94, 0.02, 0.01)
PROSE = (0.3, 0.02)
STEP_MS, DRAFT_MS = 5.0, 0.5  # each step: 5 ms, and 0.5 ms per drafted token


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
        prompts = workload.suites([suite], 128)[:1]
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
    assert advice["line"]["slope"] == pytest.approx(DRAFT_MS, abs=0.25)
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
    assert advice["best"]["code"]["k"] != advice["best"]["prose"]["k"]
    assert advice["ceiling"]["gains"]["prose"]["value"] > 0 or advice["ceiling"]["gains"]["code"]["value"] > 0


def test_the_deepspark_card_gives_2_87_tokens_per_step_at_gamma_5():
    column = advise.advise(["deepspark-readme"])["columns"]["deepspark-readme D6-D11-ctx0"]
    tokens = {c["k"]: c["predicted"]["tokens_per_step"]["value"] for c in column["cells"]}
    assert round(tokens[5], 2) == 2.87
    assert [round(tokens[k], 3) for k in range(1, 6)] == [1.74, 2.244, 2.566, 2.76, 2.869]
    assert column["cells"][5]["from"] == "extrapolated"


def test_a_drafter_whose_positions_move_with_k_gets_no_prediction(two_lengths, tmp_path):
    """Its first positions are kept less often at k=6 than at k=2: the sums would not hold."""
    other = bench(tmp_path, "code", 6, (0.7, 0.6, 0.5, 0.4, 0.3, 0.2))
    advice = advise_verdict.judge(advise.advise([two_lengths[0], other]))
    column = advice["columns"]["code"]
    assert column["check"]["status"] == "fails"
    assert "position 1 is kept on" in column["check"]["text"] and "depend on k" in column["check"]["text"]
    assert {c["k"] for c in column["cells"]} == {2, 6} and all(
        c["from"] == "measured" for c in column["cells"]
    )
    best = advice["best"]["code"]  # of the measured lengths only (the faster: timing's), and says why
    assert best["k"] in (2, 6) and "of the lengths measured" in best["text"] and "depend on k" in best["text"]


def test_one_draft_length_gives_tokens_per_step_only_and_asks_for_a_second(two_lengths):
    advice = advise_verdict.judge(advise.advise(two_lengths[2:3]))  # code at k=6 alone
    assert advice["line"] is None
    cells = advice["columns"]["code"]["cells"]
    assert all(c["predicted"]["ms_per_step"] is None for c in cells if c["from"] != "measured")
    assert [c["k"] for c in cells if advise.shown(c, "decode_tok_s")] == [6]
    assert "step-time slope is unknown" in advice["best"]["code"]["text"]
    assert advice["next"][0].startswith("run the same suites at k=1")


def test_the_papers_card_gives_its_measured_points_and_says_what_it_lacks():
    advice = advise_verdict.judge(advise.advise(["paper-pt-r-2026-042"]))
    code = advice["columns"]["paper-pt-r-2026-042 S12-S14-code"]
    assert [c["from"] for c in code["cells"]] == ["measured"]  # k=7, adaptive: nothing predicted
    assert "lacks acceptance by draft position (tokens/step at any other k)" in code["notes"]
    assert "lacks ms/step at a second draft length (the step-time slope)" in code["notes"]
    assert code["adaptive"] and "adaptive" in advice["best"]["paper-pt-r-2026-042 S12-S14-code"]["text"]


def test_the_advice_command_prints_its_table_in_80_columns_and_writes_json_and_figure(two_lengths, tmp_path):
    done = subprocess.run(
        [str(BIN / "seat"), "bench", "advise", *two_lengths, "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "80"},
    )
    assert done.returncode == 0, done.stderr
    # Every line fits 80 columns but the two paths, each whole on its own line so that it pastes.
    lines = done.stdout.splitlines()
    assert max(len(line) for line in lines if not line.startswith(("advice: ", "figure: "))) <= 80
    assert [line.split(": ")[0] for line in lines[-2:]] == ["advice", "figure"]
    assert "measured" in done.stdout and "extrapolated" in done.stdout
    (folder,) = tmp_path.iterdir()
    advice = json.loads((folder / "advice.json").read_text())
    said = " ".join(done.stdout.split())
    assert all(" ".join(b["text"].split()) in said for b in advice["best"].values())  # as the figures give
    assert advice["best"]["prose"]["k"] is not None
    assert (folder / "advice.png").read_bytes()[:4] == b"\x89PNG"


def test_the_bench_table_and_compare_show_acceptance_by_position(two_lengths):
    summary = json.loads((Path(two_lengths[0]) / "summary.json").read_text())
    (row,) = report.rows(summary)
    assert row[report.HEADER.index("accepted by position %")] == report.positions(
        summary["suites"]["code"]["acceptance_by_position"]
    )
    result = compare.compare(two_lengths[0], "deepspark-readme#D6-D11-ctx0", force=True)
    assert compare.under_table(result)[-1].endswith("/ 74 50 32 19 11")


def test_a_run_without_its_requests_or_of_another_seat_is_refused_with_the_reason(two_lengths, tmp_path):
    with pytest.raises(SeatError, match="requests.jsonl cannot be read"):
        advise.advise([run_dir(tmp_path, "summary-only", "oracle", 100.0, 2.0, 20.0)])
    other = Path(shutil.copytree(two_lengths[0], tmp_path / "other"))
    summary = json.loads((other / "summary.json").read_text())
    for key, value in (("model", "another"), ("host_settings", "IOMMU off")):
        (other / "summary.json").write_text(
            json.dumps({**summary, "conditions": {**summary["conditions"], key: value}})
        )
        with pytest.raises(SeatError, match=f"the runs differ in {key}"):
            advise.advise([two_lengths[1], str(other)])


def test_a_run_whose_drafts_were_not_k_long_is_a_policy_and_gets_no_prediction(two_lengths, tmp_path):
    """The bench's drafted-length alarm (not ngram): a policy chose each draft's length."""
    folder = Path(shutil.copytree(two_lengths[2], tmp_path / "adaptive"))
    records = [json.loads(line) for line in (folder / "requests.jsonl").read_text().splitlines()]
    for record in records:
        record["alarms"]["drafted-length"] = "drafted length 3.10 differs from k=6"
    (folder / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    column = advise.advise([str(folder)])["columns"]["code"]
    assert column["adaptive"] and [c["from"] for c in column["cells"]] == ["measured"]
