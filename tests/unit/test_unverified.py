"""An experiment profile's seat is marked UNVERIFIED wherever one of its numbers goes: the bench's
summary.json and report.md, `seat bench compare`, the fleet table and `seat doctor`."""

import json
import os
import shutil

import pytest
import yaml
from conftest import Server, prose

from seatkit import paths
from seatkit.bench import compare, fleet, oracle, report, run
from seatkit.bench.target import Options
from seatkit.doctor import image as doctor_image
from seatkit.doctor import targets
from seatkit.seat import profiles, what_runs
from seatkit.serve import bound, launch
from seatkit.serve.backends.native import process_start

REASON = "PYTHONPATH onto a patched scheduler"


@pytest.fixture
def experiment_seat(tmp_path, monkeypatch):
    """An experiment profile in a profiles/ of its own, "up" as this very process (a native seat's
    record names a PID and its start time; ours are alive for the whole test)."""
    kit = tmp_path / "profiles"
    kit.mkdir()
    shutil.copy(paths.PROFILES / "cpu-smoke.yaml", kit)
    (kit / "exp.yaml").write_text(
        yaml.safe_dump(
            {
                "extends": "cpu-smoke",
                "env": {"VLLM_CPU_KVCACHE_SPACE": "2"},
                "experiment": {"unverified": True, "reason": REASON},
            }
        )
    )
    monkeypatch.setattr(paths, "PROFILES", kit)
    monkeypatch.setenv("SEAT_HOME", str(tmp_path / "home"))
    server = Server()
    pid = os.getpid()
    record = launch.Running(
        "exp",
        "native",
        str(pid),
        server.url,
        oracle.MODEL,
        str(tmp_path / "log"),
        0.0,
        since=process_start(pid),
        provenance={
            "differs": [REASON],
            "profile_sha256": profiles.load("exp").sha256,
        },  # as `seat up` records it
    )
    launch._record(record)
    yield server
    server.close()


def test_the_bench_marks_summary_and_report_of_an_experiment_seat(experiment_seat, tmp_path):
    target = targets.of_profile("exp")
    assert what_runs.mark(target.conditions) == REASON
    target.verify = None  # the seat's identity check wants a session leader; this test is none
    out = run.RunDir(tmp_path / "runs", "exp")
    summary = run.bench(target, prose(), Options(0, 1), out)
    written = json.loads((out.path / "summary.json").read_text())
    assert written["conditions"]["provenance"]["differs"] == [REASON]  # the record, in the run folder
    assert what_runs.mark(written["conditions"]) == REASON == what_runs.mark(summary["conditions"])
    text = (out.path / "report.md").read_text()
    assert text.splitlines()[0].endswith(f"UNVERIFIED ({REASON})")
    assert "| prose UNVERIFIED | prose |" in text
    assert report.rows(summary)[0][0] == "prose UNVERIFIED"


def test_a_url_bench_of_a_local_experiment_seat_is_marked_too(experiment_seat):
    """A fleet benches by URL: a seat `seat up` started here is known by its record."""
    assert what_runs.mark(targets.of_url(experiment_seat.url, oracle.MODEL, None, None).conditions) == REASON
    # A server no record names is marked too: nothing checked what it runs.
    unknown = what_runs.mark(targets.of_url("http://127.0.0.1:9", oracle.MODEL, None, None).conditions)
    assert unknown == targets.NO_RECORD and "nothing checked what it runs" in unknown


def test_a_verified_seat_carries_no_mark(tmp_path, monkeypatch):
    monkeypatch.setenv("SEAT_HOME", str(tmp_path))
    assert what_runs.differs(profiles.load("cpu-smoke")) == []
    assert what_runs.mark({"profile": "cpu-smoke", "provenance": {"differs": []}}) is None
    assert what_runs.marked("x", None) == "x"


def run_dir(tmp_path, name, unverified=None):
    folder = tmp_path / name
    folder.mkdir()
    stats = lambda v: {"median": v, "min": v, "max": v, "cv": 0.01, "n": 5}  # noqa: E731
    conditions = {"model": "m", "k": 5, "sampling": {"temperature": 0.0}}
    if unverified:
        conditions["provenance"] = {"differs": [unverified]}
    (folder / "summary.json").write_text(
        json.dumps(
            {
                "conditions": conditions,
                "suites": {
                    "code": {
                        "content": "code",
                        "context": 0,
                        "decode_tok_s": stats(600),
                        "tokens_per_step": stats(5.5),
                        "ms_per_step": stats(9.2),
                    }
                },
            }
        )
    )
    return str(folder)


def test_compare_marks_the_experiment_side(tmp_path):
    result = compare.compare(run_dir(tmp_path, "a", REASON), run_dir(tmp_path, "b"))
    assert result.rows[0]["a"] == "code UNVERIFIED" and result.rows[0]["b"] == "code"
    assert "| code UNVERIFIED | code |" in compare.markdown(result)


def test_the_fleet_table_marks_the_experiment_seat():
    figures = {
        f: {"median": v, "cv": 0.01}
        for f, v in (("decode_tok_s", 600), ("tokens_per_step", 5.5), ("ms_per_step", 9.2))
    }
    seats = [{"seat": i, "url": f"s{i}", "figures": {"code": figures}} for i in (1, 2, 3)]
    seats[1]["unverified"] = REASON
    result = {"seats": seats, "verdicts": fleet.judge(seats)}
    flags = {row[0]: row[-1] for row in fleet.rows(result)}
    assert flags == {"1 s1": "ok", "2 s2": "ok UNVERIFIED", "3 s3": "ok"}
    assert f"- seat 2: its results are UNVERIFIED ({REASON})" in fleet.markdown(result)


def test_doctor_says_so_first(experiment_seat):
    exp = profiles.load("exp")
    for running in (None, bound.seat_of(exp)):  # the profile before `seat up`; the seat's record after
        rows = doctor_image.rows(exp, None, running)
        assert rows[0].check == "verified" and rows[0].status == "WARN"
        assert f"UNVERIFIED ({REASON})" in rows[0].evidence
    assert all(r.check != "verified" for r in doctor_image.rows(profiles.load("cpu-smoke"), None, None))
