"""review4: a bench by --url of a local seat takes the seat's verified mark without the checks a
bench of the profile makes (who answers on the port, what was written into its container)."""

import os
import socket
import subprocess

import pytest

from seatkit.doctor import targets
from seatkit.errors import SeatError
from seatkit.serve import launch
from seatkit.serve.backends.native import process_start

SHA = "0" * 64


def verified_at(name: str, url: str, pid: int) -> None:
    """A run record `seat up` writes for a verified seat (its profile's sha256, no mark)."""
    launch._record(
        launch.Running(
            name,
            "native",
            str(pid),
            url,
            "m",
            "",
            0.0,
            since=process_start(pid),
            profile_sha256=SHA,
            unverified=None,
        )
    )


def test_url_bench_of_a_port_a_stranger_holds_takes_the_seats_verified_mark(tmp_path, monkeypatch):
    """The recorded seat's process is alive (its API server gone, or never listening there), and
    another program answers on the seat's port: `seat bench PROFILE` refuses it (require_identity,
    before and after each group); `seat bench --url` gives its numbers the seat's verified mark
    and checks nothing (Target.verify None)."""
    monkeypatch.setenv("SEAT_HOME", str(tmp_path))
    seat = subprocess.Popen(["sleep", "60"])  # the recorded seat's process: alive, not listening
    stranger = socket.socket()
    try:
        stranger.bind(("127.0.0.1", 0))
        stranger.listen()
        port = stranger.getsockname()[1]
        verified_at("v", f"http://127.0.0.1:{port}", seat.pid)
        target = targets.of_url(f"http://127.0.0.1:{port}", "m", None, None)
        if "unverified" not in target.conditions:
            assert target.verify is not None, "verified numbers of a stranger, and nothing checks who answers"
            with pytest.raises(SeatError):
                target.verify()
    finally:
        stranger.close()
        seat.kill()
        seat.wait()


def test_url_bench_ignores_what_was_written_into_the_seats_container(tmp_path, monkeypatch):
    """of_profile marks results of a container written into since it started (tree.written via
    _container); of_url reaches the same seat and returns its record's bare (verified) mark."""
    monkeypatch.setenv("SEAT_HOME", str(tmp_path))
    verified_at("v", "http://127.0.0.1:18177", os.getpid())
    written = ["/opt/venv/lib/python3.12/site-packages/vllm/sampling_params.py: changed"]
    monkeypatch.setattr(targets, "_container", lambda running, profile: ({}, [], written))
    monkeypatch.setattr(launch, "in_container", lambda run: True)
    target = targets.of_url("http://127.0.0.1:18177", "m", None, None)
    assert "unverified" in target.conditions, target.conditions
