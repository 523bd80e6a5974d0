"""The tiny model's lock proves its build deterministic; `seat doctor` on the real CPU seat, up and
benched, with no GPU on this machine (the GPU rows run on the H200: tests/fixtures/h200-doctor.json)."""

import json
import os
import subprocess

import pytest
from conftest import BIN

from seatkit.models import verify
from seatkit.seat import profiles
from seatkit.serve import runtime


@pytest.fixture
def own_home(vllm_runtime, tmp_path, monkeypatch):
    """A SEAT_HOME of this test's own that borrows the shared venv (read only)."""
    home = tmp_path / "home"
    (home / "venvs").mkdir(parents=True)
    venv = vllm_runtime["venv"]
    (home / "venvs" / venv.name).symlink_to(venv)
    monkeypatch.setenv("SEAT_HOME", str(home))
    return home


def test_the_tiny_model_rebuilds_to_its_committed_lock(own_home, vllm_runtime):
    profile = profiles.load("cpu-smoke")
    built = runtime.ensure_model("tiny-llama", profile.models["base"].files, vllm_runtime["venv"], say=print)
    assert built == own_home / "models" / "tiny-llama"
    result = verify.verify(profile)
    assert result["ok"], result["models"]["base"]
    assert result["models"]["base"]["files"] == 5


def seat(*args, timeout=900):
    return subprocess.run(
        [str(BIN / "seat"), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "COLUMNS": "80"},
    )


def test_doctor_on_the_cpu_seat_up_and_benched(cpu_seats, tmp_path):
    """On the run's shared cpu-smoke seat: how a seat starts is test_seat's; this is what doctor
    says of one that is up, its model fully verified and benched."""
    with cpu_seats.recorded():
        assert seat("model", "verify", "cpu-smoke").returncode == 0
        bench = seat(
            "bench",
            "cpu-smoke",
            "--suite",
            "code",
            "--warmups",
            "1",
            "--repeats",
            "1",
            "--max-tokens",
            "64",
            "--out",
            str(tmp_path / "runs"),
        )
        assert bench.returncode == 0, bench.stderr
        (run_dir,) = (tmp_path / "runs").iterdir()
        conditions = json.loads((run_dir / "summary.json").read_text())["conditions"]
        assert conditions["model_locks"]["base"] == verify.last_full("cpu-smoke")["models"]["base"]["sha256"]
        done = seat("doctor", "cpu-smoke", "--runs", str(tmp_path / "runs"), "--json")
        table = seat("doctor", "cpu-smoke", "--runs", str(tmp_path / "runs"))
    result = json.loads(done.stdout)
    rows = {(r["layer"], r["check"]): r for r in result["rows"]}
    for key in [
        ("gpu", "GPUs"),
        ("image", "venv"),
        ("models", "lock sizes"),
        ("models", "full verify"),
        ("server", "identity"),
        ("server", "vLLM version"),
        ("server", "spec config"),
        ("server", "alone"),
    ]:
        assert rows[key]["status"] == "OK", rows[key]
    assert rows[("server", "vLLM version")]["evidence"].startswith("0.32.0")
    assert "5 draft positions (k=5, ngram)" in rows[("server", "spec config")]["evidence"]
    assert rows[("bench", "vs card")]["evidence"].startswith(f"cannot check: last bench {run_dir.name}")
    # The card row cannot run (a locally built model has no card): a WARN, said, not failed; a
    # healthy seat exits 0. Its title names no host profile: a CPU seat's host is not judged.
    assert done.returncode == 0 == result["exit_code"]
    assert table.returncode == 0 and max(map(len, table.stdout.splitlines())) <= 80
    assert "(host profile" not in table.stdout
    # The original seat here: no GPU, no driver; every GPU row says so and the count fails.
    default = json.loads(seat("doctor", "--runs", str(tmp_path / "runs"), "--json").stdout)
    gpu = [r for r in default["rows"] if r["layer"] == "gpu"]
    assert default["exit_code"] == 1 and gpu[1]["status"] == "FAIL"  # a check failed
    assert all("no NVIDIA driver" in r["evidence"] for r in gpu)
