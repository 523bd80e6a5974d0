"""`seat setup`'s progress: every step it announces says when it is done, hashing the venv too."""

from seatkit.seat import profiles
from seatkit.serve import runtime


def test_every_step_of_an_install_says_done_in(tmp_path, monkeypatch):
    native = profiles.load("cpu-smoke").native
    venv = tmp_path / "venv"

    def pip_and_venv(argv, log, what, say):  # the commands themselves, as quick as they can be
        say(what)
        (venv / "lib" / "python3.11" / "site-packages").mkdir(parents=True, exist_ok=True)
        say(f"{what}: done in 0 s")

    monkeypatch.setattr(runtime, "_run", pip_and_venv)
    monkeypatch.setattr(runtime.venv_lock, "record", lambda *a: None)
    monkeypatch.setattr(runtime, "_log_path", lambda name: tmp_path / "setup.log")
    said: list[str] = []
    runtime._install(native, venv, said.append)
    started = [line for line in said if ": done in " not in line and "making it again" not in line]
    assert any(line.startswith("recording ") for line in started), said
    for step in started:
        assert any(line.startswith(f"{step}: done in ") for line in said), (step, said)
