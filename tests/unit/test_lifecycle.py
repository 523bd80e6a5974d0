"""One seat, one record, one owner: `seat up` paused and resumed, two at once, `seat down` during
`seat up`, and a PID recorded before a reboot that a stranger holds now. Native seats whose
server is a small real process (a shell that prints its PID, then sleeps)."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Literal

import pytest
from conftest import seat_cli, stand_in_server

from seatkit.seat import profiles
from seatkit.serve import backends, launch
from seatkit.serve.backends.native import boot_id, process_start

SEAT = str(Path(sys.executable).parent / "seat")


@pytest.fixture
def profile(home):  # noqa: F811
    stand_in_server(home, 'echo "server $$ of this up"\nexec sleep 300')  # never ready
    path = home / "life.yaml"
    path.write_text("extends: cpu-smoke\n")
    return path


def start_up(path, home):  # noqa: F811
    return subprocess.Popen(
        [SEAT, "up", str(path)],
        env={**os.environ, "SEAT_HOME": str(home)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_recorded(up, previous=None):
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and up.poll() is None:
        run = launch.recorded("life")
        if run is not None and run != previous and launch.alive(run):
            return run
        time.sleep(0.1)
    raise AssertionError(up.stderr.read() if up.poll() is not None else "not recorded in 60 s")


def finish(up, sig=signal.SIGTERM):
    if up.poll() is None:
        up.send_signal(sig)
    return up.communicate(timeout=60)


def test_a_paused_up_resumed_after_down_and_a_new_up_leaves_the_new_seat_alone(profile, home):  # noqa: F811
    first = start_up(profile, home)
    old = wait_recorded(first)
    first.send_signal(signal.SIGSTOP)  # Ctrl-Z
    try:
        assert seat_cli(["down", str(profile)], home).returncode == 0
        second = start_up(profile, home)
        new = wait_recorded(second, old)
    finally:
        first.send_signal(signal.SIGCONT)
    try:
        _, stderr = first.communicate(timeout=60)
        assert first.returncode == 1 and "was stopped while this `seat up` waited" in stderr, stderr
        assert f"server {new.ident} of this up" not in stderr  # the new seat's log is not its own
        assert launch.recorded("life") == new and launch.alive(new)
        status = seat_cli(["status", str(profile), "--json"], home)
        assert '"state": "running"' in status.stdout
    finally:
        finish(second)
    assert not launch.alive(new) and launch.recorded("life") is None


def test_two_ups_of_one_profile_at_once_one_wins_the_other_refuses(profile, home):  # noqa: F811
    ups = [start_up(profile, home) for _ in range(2)]
    try:
        deadline = time.monotonic() + 60
        while all(up.poll() is None for up in ups) and time.monotonic() < deadline:
            time.sleep(0.1)
        loser = next(up for up in ups if up.poll() is not None)
        winner = next(up for up in ups if up is not loser)
        _, stderr = loser.communicate()
        assert loser.returncode == 1 and "Traceback" not in stderr
        assert "is starting it" in stderr or "is already up" in stderr, stderr
        run = wait_recorded(winner)
        assert winner.poll() is None and launch.alive(run)
    finally:
        for up in ups:
            finish(up)
    assert launch.recorded("life") is None


def test_down_during_up_stops_the_seat_and_up_says_so(profile, home):  # noqa: F811
    up = start_up(profile, home)
    run = wait_recorded(up)
    try:
        done = seat_cli(["down", str(profile)], home)
        assert done.returncode == 0, done.stderr
        _, stderr = up.communicate(timeout=60)
    finally:
        finish(up)
    assert up.returncode == 1 and "was stopped while this `seat up` waited" in stderr, stderr
    assert "server" not in stderr and not launch.alive(run) and launch.recorded("life") is None


def test_a_pid_recorded_before_a_reboot_and_held_by_a_stranger_is_never_signalled(home):  # noqa: F811
    stranger = subprocess.Popen(["sleep", "300"])
    try:
        since = process_start(stranger.pid)
        launch._record(
            launch.Running(
                "cpu-smoke",
                "native",
                str(stranger.pid),
                "http://127.0.0.1:9",
                "m",
                str(home / "log"),
                time.time(),
                since=since,
                boot="0" * 8 + "-0000-0000-0000-" + "0" * 12,
            )
        )
        assert not launch.alive(launch.recorded("cpu-smoke"))
        done = seat_cli(["down", "cpu-smoke"], home)
        assert done.returncode == 0 and "had already stopped" in " ".join(done.stdout.split()), done.stdout
        time.sleep(0.3)
        assert stranger.poll() is None  # alive: never signalled
        assert launch.recorded("cpu-smoke") is None
    finally:
        stranger.kill()
        stranger.wait()


def test_a_record_of_this_boot_names_its_boot(profile, home):  # noqa: F811
    up = start_up(profile, home)
    try:
        run = wait_recorded(up)
        assert run.boot == boot_id() != "" and len(run.token) == 32
    finally:
        finish(up)


def test_every_runtime_has_a_profile_variant_and_a_backend():
    """A runtime is its profile variant (its own section) and its backend: neither without the other."""
    assert set(profiles.RUNTIMES) == set(backends.RUNTIMES)
    for name, variant in profiles.RUNTIMES.items():
        assert variant.model_fields["runtime"].annotation == Literal[name]
