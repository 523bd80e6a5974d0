"""seatkit/doctor/targets.py: a seat's URL, its credentials kept out of what is shown."""

import json
import os

import pytest
import yaml
from conftest import PASSWORD

from seatkit import paths
from seatkit.doctor import targets
from seatkit.errors import SeatError
from seatkit.seat import profiles, what_runs
from seatkit.serve import launch
from seatkit.serve.backends.native import process_start


def test_url_credentials_become_a_header_and_are_never_shown():
    target = targets.of_url(f"http://user:{PASSWORD}@127.0.0.1:9/", "m", None, None)
    assert target.url == "http://127.0.0.1:9" and target.headers["Authorization"].startswith("Basic ")
    assert PASSWORD not in json.dumps(target.conditions) + target.url


# A URL bench of a local seat takes the mark its run record holds, however the URL spells the
# seat's address: the mark was lost for localhost, 0.0.0.0 or a seat bound to 0.0.0.0.

REASON = "a patched scheduler"


def recorded_at(name: str, url: str) -> None:
    """A run record of an experiment seat at url, launched from its own profile file (as it reads
    now) and naming this very process (alive all the test)."""
    pid = os.getpid()
    source = paths.seat_home() / f"{name}.yaml"
    experiment = {"unverified": True, "reason": REASON}
    source.write_text(yaml.safe_dump({"extends": "cpu-smoke", "experiment": experiment}))
    profile = profiles.load(str(source))
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
            provenance={"differs": [REASON], "profile_sha256": profile.sha256},
            profile_source=str(source.resolve()),
        )
    )


@pytest.mark.parametrize(
    "seat_host, spelled",
    [
        ("127.0.0.1", "http://localhost:{port}"),
        ("127.0.0.1", "http://LOCALHOST:{port}/"),
        ("127.0.0.1", "http://0.0.0.0:{port}"),
        ("127.0.0.1", "http://127.0.0.1:{port}/"),
        ("127.0.0.1", "http://user:pw@127.0.0.1:{port}"),
        ("127.0.0.1", "http://[::ffff:127.0.0.1]:{port}"),
        ("0.0.0.0", "http://127.0.0.1:{port}"),
        ("0.0.0.0", "http://localhost:{port}/"),
        ("0.0.0.0", "http://127.0.0.2:{port}"),  # a seat bound to all answers on any local address
        ("[::]", "http://127.0.0.1:{port}"),  # dual-stack
    ],
)
def test_a_url_bench_of_a_local_seat_keeps_its_mark_however_the_url_spells_it(
    tmp_path, monkeypatch, seat_host, spelled
):
    monkeypatch.setenv("SEAT_HOME", str(tmp_path))
    recorded_at("exp", f"http://{seat_host}:18100")
    target = targets.of_url(spelled.format(port=18100), "m", None, None)
    assert what_runs.mark(target.conditions) == REASON


@pytest.mark.parametrize(
    "seat_host, spelled",
    [
        ("127.0.0.1", "http://127.0.0.1:18101"),  # another port
        ("127.0.0.1", "http://127.0.0.2:18100"),  # an address a seat bound to 127.0.0.1 never answers
        ("0.0.0.0", "http://[::1]:18100"),  # an IPv4 listener takes no IPv6 connection
        ("127.0.0.1", "http://192.0.2.1:18100"),  # another machine (TEST-NET-1)
        ("0.0.0.0", "http://192.0.2.1:18100"),
    ],
)
def test_a_url_that_does_not_reach_the_seat_takes_no_mark_of_it(tmp_path, monkeypatch, seat_host, spelled):
    """Not the experiment's mark: that of a server no run record names, which nothing checked."""
    monkeypatch.setenv("SEAT_HOME", str(tmp_path))
    recorded_at("exp", f"http://{seat_host}:18100")
    assert what_runs.mark(targets.of_url(spelled, "m", None, None).conditions) == targets.NO_RECORD


def test_a_url_bench_of_a_seat_whose_port_a_stranger_holds_is_refused_before_it_measures(
    tmp_path, monkeypatch
):
    """As `seat bench PROFILE`: who answers on the seat's port is checked before and after each
    group; a bench by URL took the seat's mark and checked nothing."""
    import socket

    monkeypatch.setenv("SEAT_HOME", str(tmp_path))
    stranger = socket.socket()
    stranger.bind(("127.0.0.1", 0))
    stranger.listen()
    port = stranger.getsockname()[1]
    try:
        recorded_at("exp", f"http://127.0.0.1:{port}")  # this process: alive, not the listener
        target = targets.of_url(f"http://127.0.0.1:{port}", "m", None, None)
        assert what_runs.mark(target.conditions) == REASON and target.verify is not None
        with pytest.raises(SeatError, match="listens"):
            target.verify()
    finally:
        stranger.close()


def test_a_url_bench_of_a_seat_whose_profile_reads_otherwise_now_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("SEAT_HOME", str(tmp_path))
    recorded_at("exp", "http://127.0.0.1:18100")
    source = tmp_path / "exp.yaml"
    source.write_text(source.read_text() + "description: edited since\n")
    mark = what_runs.mark(targets.of_url("http://127.0.0.1:18100", "m", None, None).conditions)
    assert mark.startswith(f"{REASON}; benched by URL, and exp's profile cannot judge its seat: ")
    assert "reads otherwise now" in mark
