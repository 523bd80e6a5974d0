"""`seat doctor`: each check from fixtures (the H200 run committed as tests/fixtures/h200-doctor.json)."""

import copy
import json
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path

import pytest
from click.testing import CliRunner

from seatkit.cli.app import seat
from seatkit.doctor import bench, diagnose, gpu, gpu_readings, host, models
from seatkit.doctor.rows import Row, exit_code, worst
from seatkit.models import lock as locks
from seatkit.seat import host_profiles, layout
from seatkit.serve.backends.native import process_start

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
H200 = json.loads((FIXTURES / "h200-doctor.json").read_text())
DEFAULT = "dsv4-flash-dspark-tp4"


@pytest.fixture
def seat_home(tmp_path, monkeypatch):
    monkeypatch.setenv("SEAT_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


@pytest.fixture
def profile():
    from seatkit.seat import profiles

    return profiles.load(DEFAULT)


def statuses(rows):
    return {r.check: r.status for r in rows}


def test_h200_fixture_rows_follow_from_its_nvml_readings(profile):
    """The committed real run: its NVML rows are what the checks make of its readings."""
    rows = gpu.rows(H200["nvml"], profile, host_profiles.load("paper"))
    assert [asdict(r) for r in rows] == [r for r in H200["rows"] if r["layer"] == "gpu"]
    assert statuses(rows) == {
        "driver": "WARN",
        "GPU count": "FAIL",
        "GPU0 PCIe": "OK",
        "power limit": "WARN",
        "clocks": "OK",
        "persistence": "OK",
    }
    assert "580.159.04" in rows[0].evidence and "595.58.03" in rows[0].evidence
    assert "1 visible (NVIDIA H200), TP needs 4" == rows[1].evidence
    assert "700 W" in rows[3].evidence and "300 W" in rows[3].evidence
    assert H200["exit_code"] == 2 and H200["status"] == "FAIL"
    every_layer = {r["layer"] for r in H200["rows"]}
    assert every_layer == {"gpu", "host", "image", "models", "server", "bench"}


def gpu0(**change):
    nv = copy.deepcopy(H200["nvml"])
    nv["gpus"][0].update(change)
    nv["gpus"] = [{**nv["gpus"][0], "index": i} for i in range(4)]
    return nv


@pytest.mark.parametrize(
    "change, check, status, words",
    [
        ({}, "GPU count", "OK", "4 visible"),
        ({"pcie_width": 8}, "GPU0 PCIe", "FAIL", "x8 of x16"),
        ({"pcie_gen": 3}, "GPU0 PCIe", "WARN", "Gen3 of Gen5"),
        ({"pcie_gen": "unavailable (Not Supported)"}, "GPU0 PCIe", "WARN", "cannot check"),
        ({"power_limit_w": 300.0}, "power limit", "OK", "300 W"),
        ({"clock_event_reasons": ["hw_thermal"]}, "clocks", "FAIL", "hw_thermal"),
        ({"clock_event_reasons": ["sw_power_cap"]}, "clocks", "WARN", "sw_power_cap"),
        ({"persistence_mode": 0}, "persistence", "WARN", "off on GPU 0, 1, 2, 3"),
    ],
)
def test_gpu_checks_judge_each_reading(profile, change, check, status, words):
    rows = {r.check: r for r in gpu.rows(gpu0(**change), profile, host_profiles.load("paper"))}
    assert rows[check].status == status and words in rows[check].evidence


def test_a_refusing_driver_fails(profile):
    nv = {**gpu0(), "driver": "570.133.20"}
    row = gpu.driver(nv, profile, host_profiles.load("paper"))
    assert row.status == "FAIL" and "five-key" in row.evidence


def test_without_a_driver_every_gpu_check_says_why(profile):
    nv = {"error": "no NVIDIA driver answers (NVML: Shared Library Not Found)"}
    rows = gpu.rows(nv, profile, host_profiles.load("paper"))
    assert statuses(rows)["GPU count"] == "FAIL"
    assert all(
        r.evidence.startswith("cannot check: no NVIDIA driver") for r in rows if r.check != "GPU count"
    )
    assert len(rows) == 6


def test_reasons_decode_the_nvml_mask():
    assert gpu_readings.reasons(0x1 | 0x40) == ["gpu_idle", "hw_thermal"]


def test_host_rows_map_verdicts(profile):
    status = json.loads((FIXTURES / "h200x2-host-status.json").read_text())
    rows = host.rows(status, profile)
    for r, source in zip(rows, status["rows"], strict=False):
        assert r.status == host.STATUS[source["verdict"]] and r.evidence.startswith(source["verdict"])
    assert rows[-1].check == "verify-p2p"
    status["data_path"] = {"verdict": "FAILED on this boot", "why": "GPU0 -> GPU1: copy wrong"}
    assert host.rows(status, profile)[-1].status == "FAIL"


def test_models_rows_say_what_is_missing(seat_home, profile):
    rows = models.rows(profile)
    assert statuses(rows) == {"lock sizes": "WARN", "full verify": "WARN"}
    assert "no models lock" in rows[0].evidence and "no models lock" in rows[1].evidence


def test_bench_row_names_the_factor_and_the_rows_that_move_it(tmp_path, profile):
    folder = tmp_path / "runs" / "20261201T000000Z-x"
    folder.mkdir(parents=True)
    stats = lambda v: {"median": v, "min": v, "max": v, "cv": 0.01, "n": 5}  # noqa: E731
    (folder / "summary.json").write_text(
        json.dumps(
            {
                "conditions": {"profile": DEFAULT, "model": "m", "k": 5, "sampling": {"temperature": 0.1}},
                "suites": {
                    "prose": {
                        "content": "prose",
                        "context": 0,
                        "decode_tok_s": stats(150.0),
                        "tokens_per_step": stats(3.0),
                        "ms_per_step": stats(20.0),
                        "harness_figures": {
                            "llm_decode_bench sustained C=1": {
                                "decode_tok_s": 150.0,
                                "prefix_cache": "warm",
                                "definition": "d",
                            }
                        },
                    }
                },
            }
        )
    )
    others = [Row("host", "iommu", "FAIL", "DRIFT", "apply"), Row("server", "alone", "OK", "idle")]
    (row,) = bench.rows(profile, tmp_path / "runs", others)
    assert row.status == "WARN" and "ms per step carries" in row.evidence
    assert "host iommu FAIL" in row.evidence and "server alone" not in row.evidence
    assert bench.card_for(profile).stem == "deepspark-readme"
    (none,) = bench.rows(profile, tmp_path / "empty", others)
    assert none.evidence.startswith("cannot check: no bench")


def test_exit_code_is_1_on_a_failed_check_and_0_when_only_warned():
    """The kit's rule: 0 done, 1 a check failed, 2 refused or bad input. A WARN (a check that cannot
    run here, a seat with no reference card) is said, not failed: a healthy demo seat exits 0."""
    assert exit_code([]) == 0
    assert exit_code([Row("a", "b", "OK", "")]) == 0
    assert exit_code([Row("a", "b", "OK", ""), Row("a", "c", "WARN", "")]) == 0
    assert exit_code([Row("a", "b", "FAIL", ""), Row("a", "c", "WARN", "")]) == 1
    assert worst([Row("a", "b", "FAIL", ""), Row("a", "c", "WARN", "")]) == "FAIL"


def test_cli_json_and_an_80_column_table(seat_home, monkeypatch):
    monkeypatch.setattr(gpu_readings, "read", lambda: H200["nvml"])
    runner = CliRunner()
    done = runner.invoke(seat, ["doctor", DEFAULT, "--json"])
    result = json.loads(done.output)
    assert done.exit_code == 1 == result["exit_code"]
    assert {r["status"] for r in result["rows"]} <= {"OK", "WARN", "FAIL"}
    assert all(r["fix"] for r in result["rows"] if r["status"] == "FAIL")
    table = runner.invoke(seat, ["doctor", DEFAULT])
    assert table.exit_code == 1 and "GPU count" in table.output
    assert max(len(line) for line in table.output.splitlines()) <= 80


def test_cpu_profile_needs_no_gpu_rows(seat_home, tmp_path):
    result = diagnose.diagnose("cpu-smoke", runs=tmp_path, readings={"error": "no driver"})
    rows = {(r["layer"], r["check"]): r for r in result["rows"]}
    assert rows[("gpu", "GPUs")]["status"] == "OK" and "gpus.count 0" in rows[("gpu", "GPUs")]["evidence"]
    assert rows[("image", "venv")]["status"] == "FAIL"  # this SEAT_HOME has no venv
    assert rows[("models", "lock sizes")]["status"] == "FAIL"  # nor the tiny model
    assert all(
        rows[("server", c)]["evidence"].startswith("cannot check: cpu-smoke is not up")
        for c in ("identity", "vLLM version", "spec config", "alone")
    )
    assert locks.hashes(__import__("seatkit.seat.profiles", fromlist=["load"]).load("cpu-smoke"))


@contextmanager
def liar_recorded_as_the_seat(answer):
    """A listener at the URL `seat up` recorded for cpu-smoke (this test's own process as the seat's)."""
    import os
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from seatkit.seat import profiles
    from seatkit.serve import launch

    class Liar(BaseHTTPRequestHandler):
        def do_GET(self):
            answer(self)

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Liar)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        prof = profiles.load("cpu-smoke")
        launch._record(
            launch.Running(
                prof.name,
                "native",
                str(os.getpid()),
                f"http://127.0.0.1:{httpd.server_address[1]}",
                "m",
                "",
                0.0,
                since=process_start(os.getpid()),
            )
        )
        yield prof
    finally:
        httpd.shutdown()
        httpd.server_close()


def send(handler, body: bytes, length: int | None = None) -> None:
    handler.send_response(200)
    handler.send_header("Content-Length", str(len(body) if length is None else length))
    handler.end_headers()
    handler.wfile.write(body)


@pytest.mark.parametrize(
    "answers",
    [
        {"/version": [], "/v1/models": {"data": []}},  # /version not an object
        {"/version": {"version": "0.1"}, "/v1/models": {"data": "no list"}},
        {"/version": {"version": "0.1"}, "/v1/models": {"data": [1, 2]}},
        {"/version": {"version": "0.1"}, "/v1/models": []},
    ],
)
def test_a_server_answering_garbage_is_a_fail_row_not_a_traceback(seat_home, answers):
    """A listener on the seat's URL that answers JSON of the wrong shape."""
    from seatkit.doctor import server

    def answer(handler):
        send(
            handler,
            b"# nothing\n"
            if handler.path == "/metrics"
            else json.dumps(answers.get(handler.path, {})).encode(),
        )

    with liar_recorded_as_the_seat(answer) as prof:
        rows = server.rows(prof, server.seat(prof))
    assert any(r.status == "FAIL" for r in rows)


def test_a_trickling_server_does_not_hang_doctor(seat_home, monkeypatch):
    """/metrics sends a byte now and then, never the whole answer: each read is in time, the whole never."""
    import time

    from seatkit.doctor import server

    monkeypatch.setattr(server, "DEADLINE_S", 1)

    def answer(handler):
        handler.send_response(200)
        handler.send_header("Content-Length", "1000000")
        handler.end_headers()
        for _ in range(120):  # 30 s at most, then the connection closes short
            handler.wfile.write(b"#")
            handler.wfile.flush()
            time.sleep(0.25)

    with liar_recorded_as_the_seat(answer) as prof:
        (row,) = server.rows(prof, server.seat(prof))
    assert row.status == "FAIL" and "did not end within its deadline of 1 s" in row.evidence


@pytest.mark.parametrize(
    "summary",
    [
        "[]",
        '{"conditions": []}',
        "{not json",
        f'{{"conditions": {{"profile": "{DEFAULT}"}}}}',
        f'{{"conditions": {{"profile": "{DEFAULT}"}}, "suites": {{"x": 1}}}}',
    ],
)
def test_a_corrupted_run_folder_is_skipped_or_said_not_a_traceback(tmp_path, profile, summary):
    folder = tmp_path / "runs" / "20261201T000000Z-x"
    folder.mkdir(parents=True)
    (folder / "summary.json").write_text(summary)
    (row,) = bench.rows(profile, tmp_path / "runs", [])
    assert row.status == "WARN" and row.evidence.startswith("cannot check")


def test_a_corrupted_verify_record_is_said_not_a_traceback(seat_home, profile):
    record = layout.model_verified(profile.name)
    record.parent.mkdir(parents=True)
    record.write_text("{torn")
    row = models.last_verify(profile)
    assert row.status == "WARN" and "unreadable" in row.evidence and "verify" in row.fix


def test_a_docker_seat_recorded_without_an_engine_says_why(seat_home, monkeypatch):
    """`seat up` recorded a container; the engine is gone since: each server row says why."""
    from seatkit.doctor import server
    from seatkit.seat import profiles
    from seatkit.serve import launch

    monkeypatch.setenv("DOCKER_HOST", f"unix://{seat_home}/no-engine.sock")
    launch._record(
        launch.Running(DEFAULT, "docker", "abcdef" * 10 + "abcd", "http://127.0.0.1:1", "m", "", 0.0)
    )
    rows = server.rows(profiles.load(DEFAULT), server.seat(profiles.load(DEFAULT)))
    assert [r.check for r in rows] == list(server.CHECKS)
    assert all(r.status == "WARN" and "no docker engine answers" in r.evidence for r in rows)
    assert all(r.evidence.endswith("answers") and "DOCKER_HOST" in r.fix for r in rows), rows  # no class name


def test_a_broken_models_lock_is_a_row_and_every_other_layer_still_runs(seat_home, tmp_path):
    """Doctor is for broken seats: a hand-edited lock must not stop the whole diagnosis."""
    import shutil

    from seatkit.seat import profiles

    source = Path(profiles.load("cpu-smoke").source)
    shutil.copy(source, tmp_path / source.name)
    lock = source.with_suffix(".models.lock").read_text()
    (tmp_path / "cpu-smoke.models.lock").write_text(lock.replace("size: 481", "size: 482", 1))
    result = diagnose.diagnose(str(tmp_path / source.name), runs=tmp_path, readings={"error": "no driver"})
    rows = {(r["layer"], r["check"]): r for r in result["rows"]}
    assert "aggregate hash does not match" in rows[("models", "lock sizes")]["evidence"]
    assert {"gpu", "host", "image", "models", "server", "bench"} == {layer for layer, _ in rows}


def test_no_diagnosis_at_all_exits_2_bad_input_not_a_failed_check(seat_home):
    """A script reading exit 1 as 'a check failed' must not take an unknown profile for one."""
    import subprocess

    from conftest import BIN

    done = subprocess.run(
        [str(BIN / "seat"), "doctor", "no-such-profile"], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "no-such-profile" in done.stderr


def test_a_file_rewritten_after_the_last_full_verify_is_not_vouched_for(seat_home, tmp_path):
    """Same size, other bytes, written after a verify that passed: the row must not say 'every hash matched'."""
    import os
    import shutil

    from seatkit.models import verify
    from seatkit.seat import profiles

    source = Path(profiles.load("cpu-smoke").source)
    shutil.copy(source, tmp_path / source.name)
    prof = profiles.load(str(tmp_path / source.name))
    model = seat_home / "models" / "tiny-llama"
    model.mkdir(parents=True)
    for name in prof.models["base"].files:
        (model / name).write_bytes(os.urandom(64))
    locks.write(prof, locks.make(prof))
    assert verify.verify(prof)["ok"]
    assert models.last_verify(prof).status == "OK"
    then = verify.last_full(prof.name)["time"]
    while (model / "config.json").stat().st_ctime <= then:  # file times tick coarser than time.time()
        (model / "config.json").write_bytes(os.urandom(64))
    row = models.last_verify(prof)
    assert row.status == "WARN" and "base/config.json" in row.evidence


def test_a_gpu_lost_mid_read_is_every_gpu_row_saying_why(profile, monkeypatch):
    """NVML answers nvmlInit, then a GPU has fallen off the bus (the driver's own error code)."""
    import pynvml

    def lost(*args):
        raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)

    monkeypatch.setattr(pynvml, "nvmlInit", lambda: None)
    monkeypatch.setattr(pynvml, "nvmlShutdown", lambda: None)
    monkeypatch.setattr(pynvml, "nvmlDeviceGetCount", lambda: 4)
    monkeypatch.setattr(pynvml, "nvmlDeviceGetHandleByIndex", lost)
    readings = gpu_readings.read()
    assert "NVML failed reading the GPUs" in readings["error"]
    rows = gpu.rows(readings, profile, host_profiles.load("paper"))
    assert statuses(rows)["GPU count"] == "FAIL"


def test_bench_row_against_an_ldb_card_without_the_harness_figure_says_why(tmp_path, profile):
    folder = tmp_path / "runs" / "20261201T000000Z-x"
    folder.mkdir(parents=True)
    stats = lambda v: {"median": v, "min": v, "max": v, "cv": 0.01, "n": 3}  # noqa: E731
    (folder / "summary.json").write_text(
        json.dumps(
            {
                "conditions": {"profile": DEFAULT, "model": "m", "k": 5, "sampling": {"temperature": 0.1}},
                "suites": {
                    "prose": {
                        "content": "prose",
                        "context": 0,
                        "decode_tok_s": stats(150.0),
                        "tokens_per_step": stats(3.0),
                        "ms_per_step": stats(20.0),
                    }
                },
            }
        )
    )
    (row,) = bench.rows(profile, tmp_path / "runs", [])
    assert "llm_decode_bench sustained" in row.evidence and "re-run it with this kit" in row.evidence


def test_the_image_row_without_an_engine_says_how_to_reach_one_and_names_no_python_class(
    seat_home, monkeypatch
):
    """'no docker engine answers (DockerException)' gave a class name and no fix."""
    from seatkit import engine
    from seatkit.doctor import image
    from seatkit.seat import profiles

    profile = profiles.load(DEFAULT)
    monkeypatch.setenv("DOCKER_HOST", f"unix://{seat_home}/no-engine.sock")
    row = image.overlay(profile, "seatkit/x:y", None)
    assert row.evidence == "cannot check: no docker engine answers" and row.fix == engine.HINT, row
