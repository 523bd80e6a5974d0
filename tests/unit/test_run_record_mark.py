"""The run record binds the profile `seat up` launched: its hash and its verified/unverified mark.
Everything that reports on the running seat (doctor, the bench's conditions, summary, report,
compare, fleet) takes the mark from the record; a profile edited since `seat up` is refused, so an
experiment seat cannot be reported as verified by switching its flag off in the file."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

import pytest
import yaml
from conftest import Server, installed_stand_in, prose, seat_cli, stand_in_server

from seatkit import paths
from seatkit.bench import compare, fleet, oracle, report, run
from seatkit.bench import nsys as bench_nsys
from seatkit.bench.target import Options
from seatkit.doctor import diagnose, server, targets
from seatkit.doctor import image as doctor_image
from seatkit.errors import SeatError
from seatkit.models import lock, verify
from seatkit.seat import layout, profiles, what_runs
from seatkit.serve import bound, launch, provenance
from seatkit.serve import spec as specs
from seatkit.serve.backends.native import process_start
from seatkit.serve.running import UNKNOWN

REASON = "PYTHONPATH onto a patched scheduler"
EXPERIMENT = {
    "extends": "base",
    "env": {"VLLM_CPU_KVCACHE_SPACE": "2"},
    "experiment": {"unverified": True, "reason": REASON},
}


@pytest.fixture
def kit(tmp_path, monkeypatch):
    """profiles/ of its own: cpu-smoke, a variant `base` of it, an experiment `exp` and a verified
    `plain` extending base (so an edit of the file extended counts as an edit too)."""
    folder = tmp_path / "profiles"
    folder.mkdir()
    shutil.copy(paths.PROFILES / "cpu-smoke.yaml", folder)
    (folder / "base.yaml").write_text("extends: cpu-smoke\ndescription: a variant\n")
    (folder / "exp.yaml").write_text(yaml.safe_dump(EXPERIMENT))
    (folder / "plain.yaml").write_text("extends: base\n")
    monkeypatch.setattr(paths, "PROFILES", folder)
    monkeypatch.setenv("SEAT_HOME", str(tmp_path / "home"))
    return folder


def up_as_this_process(name: str, url: str, **fields) -> launch.Running:
    """A native seat's record naming this very process (alive for the whole test) at url; the
    profile's and the model locks' hashes go where `up` records them, in the provenance."""
    pid = os.getpid()
    launched = {part: fields.pop(part) for part in ("profile_sha256", "model_locks") if part in fields}
    if launched:
        fields["provenance"] = {**fields.get("provenance", {}), **launched}
    record = launch.Running(name, "native", str(pid), url, oracle.MODEL, "", 0.0, since=process_start(pid))
    record = replace(record, **fields)
    launch._record(record)
    return record


def vouched_for(path: Path) -> None:
    """The profile's own lock of home's stand-in model, and a full verify of it: else its weights,
    other bytes than cpu-smoke's lock, mark the seat (test_model_marks)."""
    profile = profiles.load(str(path))
    lock.write(profile, lock.make(profile))
    assert verify.verify(profile, full=True)["ok"]


def older_kit_record(name: str, url: str) -> None:
    """A record as the kit wrote it before it recorded the profile and the mark."""
    record = asdict(up_as_this_process(name, url))
    del record["provenance"]
    layout.run_record(name).write_text(json.dumps(record))


@pytest.fixture
def seat():
    server = Server()
    yield server
    server.close()


# 1. The record binds the profile as launched; an older record reads as unverified.


def test_seat_up_records_the_profile_hash_and_the_mark(home, monkeypatch):
    """The real start of a native seat (a stand-in server that sleeps, in a venv as setup installs
    it) writes both fields."""
    stand_in_server(home, "exec sleep 300")
    installed_stand_in(home)
    monkeypatch.setattr(provenance, "launch_differs", lambda spec, sha256: None)
    (home / "exp.yaml").write_text(yaml.safe_dump({**EXPERIMENT, "extends": "cpu-smoke"}))
    (home / "plain.yaml").write_text("extends: cpu-smoke\n")
    for name, mark in (("exp", REASON), ("plain", None)):
        vouched_for(home / f"{name}.yaml")
        profile = profiles.load(str(home / f"{name}.yaml"))
        started = launch._start(specs.build(profile), dict(os.environ))
        try:
            record = launch.recorded(name)
            assert record.provenance["profile_sha256"] == profile.sha256
            assert what_runs.mark(record.conditions()) == mark  # the launch's record is test_provenance's
            assert record.provenance["model_locks"] == lock.hashes(profile) and lock.hashes(profile)
        finally:
            launch.stop(started, grace=5)


def test_an_older_record_reads_as_unverified_everywhere(kit, seat, tmp_path):
    older_kit_record("plain", seat.url)
    record = launch.recorded("plain")
    assert record.provenance is None
    assert what_runs.mark(record.conditions()) == UNKNOWN == "unknown: recorded before the kit recorded it"
    target = targets.of_profile("plain")  # not refused: nothing recorded to compare with
    assert what_runs.mark(target.conditions) == UNKNOWN and target.conditions["profile_sha256"] is None
    assert target.conditions["model_locks"] is None  # not known: never the lock as it reads now
    assert what_runs.mark(targets.of_url(seat.url, oracle.MODEL, None, None).conditions) == UNKNOWN
    (row,) = doctor_image.experiment(profiles.load("plain"), bound.seat_of(profiles.load("plain")))
    assert row.status == "WARN" and f"UNVERIFIED ({UNKNOWN})" in row.evidence
    assert row.fix == "mend what each difference names, then seat down plain && seat up plain"


def test_a_deleted_profile_leaves_the_mark_with_the_seat(kit, seat):
    """The record alone marks a URL bench of the seat: its profile need not be there any more."""
    up_as_this_process(
        "exp", seat.url, profile_sha256=profiles.load("exp").sha256, provenance={"differs": [REASON]}
    )
    (kit / "exp.yaml").unlink()
    mark = what_runs.mark(targets.of_url(seat.url, oracle.MODEL, None, None).conditions)
    assert mark.startswith(f"{REASON}; benched by URL, and exp's profile cannot judge its seat: no profile")


# 2. The mark comes from the record, never from the profile as it reads now.


def test_the_mark_reaches_summary_report_compare_and_fleet_from_the_record(kit, seat, tmp_path, monkeypatch):
    """plain's profile declares no experiment; its record says the seat ran as one: the record wins."""
    monkeypatch.setattr(verify, "unvouched_models", lambda p, environ: None)  # test_model_marks's business
    said = "what the record says"
    up_as_this_process(
        "plain", seat.url, profile_sha256=profiles.load("plain").sha256, provenance={"differs": [said]}
    )
    target = targets.of_profile("plain")
    assert what_runs.mark(target.conditions) == said
    target.verify = None  # the seat's identity check wants a session leader; this test is none
    out = run.RunDir(tmp_path / "runs", "plain")
    summary = run.bench(target, prose(), Options(0, 1), out)
    written = json.loads((out.path / "summary.json").read_text())
    assert what_runs.mark(written["conditions"]) == said == what_runs.mark(summary["conditions"])
    text = (out.path / "report.md").read_text()
    assert text.splitlines()[0].endswith(f"UNVERIFIED ({said})")
    assert report.rows(summary)[0][0] == "prose UNVERIFIED"

    # A verified seat's run beside it: compare marks the experiment side only.
    launch._record(replace(launch.recorded("plain"), provenance={"differs": []}))
    clean = targets.of_profile("plain")
    assert what_runs.mark(clean.conditions) is None
    clean.verify = None
    other = run.RunDir(tmp_path / "runs", "clean")
    run.bench(clean, prose(), Options(0, 1), other)
    result = compare.compare(str(out.path), str(other.path))
    assert result.rows[0]["a"] == "prose UNVERIFIED" and result.rows[0]["b"] == "prose"

    # The fleet benches by URL: the local seat's record marks its row.
    launch._record(replace(launch.recorded("plain"), provenance={"differs": [said]}))
    by_url = targets.of_url(seat.url, oracle.MODEL, None, None)
    assert by_url.verify is not None  # held to who answers, as a bench of the profile is
    by_url.verify = None  # (the identity check wants a session leader; this test is none)
    fleet_result, _ = fleet.bench_fleet([by_url], None, prose(), Options(0, 1), tmp_path / "fleet")
    assert fleet_result["seats"][0]["unverified"] == said
    assert fleet.rows(fleet_result)[0][-1].endswith("UNVERIFIED")
    assert f"- seat 1: its results are UNVERIFIED ({said})" in fleet.markdown(fleet_result)


def test_doctor_takes_the_mark_from_the_record(kit, seat):
    plain = profiles.load("plain")
    up_as_this_process(
        "plain", seat.url, profile_sha256=plain.sha256, provenance={"differs": ["recorded at up"]}
    )
    (row,) = doctor_image.experiment(plain, bound.seat_of(plain))
    assert row.status == "WARN" and "UNVERIFIED (recorded at up)" in row.evidence
    assert doctor_image.experiment(plain, None) == []  # no seat: the profile alone, which is verified


def test_the_weights_a_result_names_are_those_locked_when_the_seat_started(kit, seat):
    """Re-locked after `seat up` (weights swapped on disk, `seat model lock` run, the server never
    restarted), the results named weights the seat never loaded (review3 #14)."""
    shutil.copy(paths.REPO / "profiles" / "cpu-smoke.models.lock", kit)  # the kit fixture moved PROFILES
    plain = profiles.load("plain")
    at_up = lock.hashes(plain)
    assert at_up  # plain keeps cpu-smoke's models, so cpu-smoke's lock pins them
    up_as_this_process(
        "plain",
        seat.url,
        profile_sha256=plain.sha256,
        profile_source=plain.source,
        provenance={"differs": []},
        model_locks=at_up,
    )
    base = lock.read(plain)["base"]
    other = [replace(base.files[0], sha256="f" * 64), *base.files[1:]]  # other weights, hashed
    lock.write(
        plain, {"base": lock.ModelLock(base.repository, base.revision, other)}
    )  # seat model lock plain
    assert lock.hashes(plain) != at_up
    assert targets.of_profile("plain").conditions["model_locks"] == at_up


# 3. A profile edited since `seat up` is refused, naming it, wherever it resolves to its seat.


@pytest.mark.parametrize(
    "edit",
    [
        # the experiment switched off, and what it allowed taken out: the file now reads verified
        lambda kit: (kit / "exp.yaml").write_text("extends: base\n"),
        # the env changed, the flag kept
        lambda kit: (kit / "exp.yaml").write_text(
            yaml.safe_dump({**EXPERIMENT, "env": {"VLLM_CPU_KVCACHE_SPACE": "3"}})
        ),
        # the file it extends changed
        lambda kit: (kit / "base.yaml").write_text("extends: cpu-smoke\ndescription: edited\n"),
    ],
)
def test_an_edited_profile_is_refused(kit, seat, tmp_path, edit):
    exp = profiles.load("exp")
    up_as_this_process("exp", seat.url, profile_sha256=exp.sha256, provenance={"differs": [REASON]})
    edit(kit)
    with pytest.raises(SeatError, match="reads otherwise now") as caught:
        targets.of_profile("exp")
    assert caught.value.hint == "seat down exp && seat up exp"
    with pytest.raises(SeatError, match="reads otherwise now"):
        bench_nsys.session_of("exp")
    result = diagnose.diagnose("exp", runs=tmp_path, readings={"error": "no driver"})
    (row,) = [r for r in result["rows"] if r["layer"] == "server"]  # nothing judged by the edited file
    assert (row["check"], row["status"]) == ("run record", "FAIL") and result["exit_code"] == 1
    assert "reads otherwise now" in row["evidence"] and row["fix"] == "seat down exp && seat up exp"
    # The mark is not lost by the edit: a URL bench of the seat still carries the record's, and why
    # nothing else of it could be checked.
    mark = what_runs.mark(targets.of_url(seat.url, oracle.MODEL, None, None).conditions)
    assert mark.startswith(f"{REASON}; benched by URL, and exp's profile") and "reads otherwise now" in mark


def test_a_seat_launched_from_another_file_of_that_name_is_judged_by_its_fields(kit, seat, tmp_path):
    """`seat up ./elsewhere/exp.yaml`, then `seat bench exp`: profiles/exp.yaml is another file. The
    same fields are the same profile; other fields are refused, as an edit is."""
    elsewhere = tmp_path / "elsewhere" / "exp.yaml"
    elsewhere.parent.mkdir()
    shutil.copy(kit / "exp.yaml", elsewhere)
    launched = profiles.load(str(elsewhere))
    up_as_this_process(
        "exp",
        seat.url,
        profile_sha256=launched.sha256,
        profile_source=str(elsewhere),
        provenance={"differs": [REASON]},
    )
    assert what_runs.mark(targets.of_profile("exp").conditions) == REASON
    (kit / "exp.yaml").write_text(yaml.safe_dump({**EXPERIMENT, "env": {"VLLM_CPU_KVCACHE_SPACE": "3"}}))
    with pytest.raises(SeatError, match="reads otherwise now"):
        targets.of_profile("exp")
    assert what_runs.mark(targets.of_profile(str(elsewhere)).conditions) == REASON


def test_a_torn_record_is_a_fail_row_and_the_rest_of_the_diagnosis_goes_on(kit, tmp_path):
    layout.run_record("exp").parent.mkdir(parents=True)
    layout.run_record("exp").write_text('{"profile": "exp", "unverified": nu')
    result = diagnose.diagnose("exp", runs=tmp_path, readings={"error": "no driver"})
    (row,) = [r for r in result["rows"] if r["layer"] == "server"]
    assert (row["check"], row["status"]) == ("run record", "FAIL") and "unreadable" in row["evidence"]
    assert {r["layer"] for r in result["rows"]} >= {"gpu", "image", "models", "bench"}


def test_an_edit_that_changes_no_field_is_the_same_profile(kit, seat):
    """The hash is of the resolved fields, not the bytes: a comment or a reordering changes nothing."""
    exp = profiles.load("exp")
    up_as_this_process("exp", seat.url, profile_sha256=exp.sha256, provenance={"differs": [REASON]})
    (kit / "exp.yaml").write_text(
        "# a note\n" + yaml.safe_dump(dict(reversed(EXPERIMENT.items())), sort_keys=False)
    )
    assert what_runs.mark(targets.of_profile("exp").conditions) == REASON
    assert not isinstance(server.seat(profiles.load("exp")), list)


def test_a_stopped_seat_leaves_the_profile_free_to_edit(kit, seat):
    """Only a running seat binds its profile: a record of one that exited refuses nothing."""
    up_as_this_process("exp", seat.url, profile_sha256="0" * 64, provenance={"differs": [REASON]}, since="1")
    assert bound.seat_of(profiles.load("exp")) is None
    with pytest.raises(SeatError, match="exp is not up"):
        targets.of_profile("exp")


def test_the_cli_refuses_to_judge_a_seat_by_its_edited_profile(home):
    """`seat up` for real (a native stand-in server that never gets ready, so `up` waits and its
    record stays), then the experiment switched off in the file: `seat bench` refuses, `seat
    doctor` fails the row, each naming the restart, none with a traceback."""
    stand_in_server(home, "exec sleep 300")
    installed_stand_in(home)
    path = home / "exp.yaml"
    path.write_text(yaml.safe_dump({**EXPERIMENT, "extends": "cpu-smoke"}))
    vouched_for(path)
    up = subprocess.Popen(
        [str(Path(sys.executable).parent / "seat"), "up", str(path)],
        env={**os.environ, "SEAT_HOME": str(home)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while (record := launch.recorded("exp")) is None or not record.ident:
            assert up.poll() is None and time.monotonic() < deadline, up.stderr.read() if up.poll() else ""
            time.sleep(0.1)
        assert (
            what_runs.mark(record.conditions()).startswith(REASON)
            and record.provenance["profile_sha256"] == profiles.load(str(path)).sha256
        )
        path.write_text("extends: cpu-smoke\n")  # reads verified now; the seat runs the experiment
        status = " ".join(seat_cli(["status", str(path)], home).stdout.split())
        assert f"verified: no, every result is marked ({REASON}" in status, status
        bench = seat_cli(["bench", str(path)], home)
        assert bench.returncode == 1 and "Traceback" not in bench.stderr, bench.stderr
        said = " ".join(bench.stderr.split())
        assert "reads otherwise now" in said and "seat down exp && seat up exp" in said, said
        doctor = seat_cli(["doctor", str(path), "--json"], home)
        assert doctor.returncode == 1, doctor.stderr  # a FAIL row: a check failed
        rows = json.loads(doctor.stdout)["rows"]
        assert {"layer": "server", "check": "run record", "status": "FAIL"}.items() <= next(
            r for r in rows if r["check"] == "run record"
        ).items()
    finally:
        if up.poll() is None:
            up.send_signal(signal.SIGTERM)
        up.communicate(timeout=60)
    assert launch.recorded("exp") is None
