"""review4: reach.reaches takes a name as reaching the seat when ANY of its addresses does, and
`localhost` as both loopbacks whatever this host resolves it to; the HTTP client dials the first
address getaddrinfo gives. A stranger there gets the verified seat's mark."""

import os
import socket

import pytest

from seatkit.doctor import targets
from seatkit.serve import launch, reach
from seatkit.serve.backends.native import process_start


def _loopback6() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.skipif(not _loopback6(), reason="no IPv6 loopback")
def test_localhost_lands_on_a_stranger_yet_takes_the_verified_seats_mark(tmp_path, monkeypatch):
    monkeypatch.setenv("SEAT_HOME", str(tmp_path))
    first = socket.getaddrinfo("localhost", None, type=socket.SOCK_STREAM)[0]
    dialed_family, dialed = first[0], first[4][0]  # where requests/urllib3 connects first
    seat_family = socket.AF_INET if dialed_family == socket.AF_INET6 else socket.AF_INET6
    seat_host = "127.0.0.1" if seat_family == socket.AF_INET else "::1"
    stranger, seat = socket.socket(dialed_family), socket.socket(seat_family)
    try:
        stranger.bind((dialed, 0))
        stranger.listen()
        port = stranger.getsockname()[1]
        seat.bind((seat_host, port))  # the verified seat, on the other loopback, same port
        seat.listen()
        url = f"http://[{seat_host}]:{port}" if ":" in seat_host else f"http://{seat_host}:{port}"
        pid = os.getpid()
        launch._record(
            launch.Running(
                "v",
                "native",
                str(pid),
                url,
                "m",
                "",
                0.0,
                since=process_start(pid),
                profile_sha256="0" * 64,
                unverified=None,
            )
        )
        # Where a client of http://localhost:PORT lands: the stranger.
        with socket.create_connection(("localhost", port), timeout=2):
            stranger.settimeout(2)
            conn, _ = stranger.accept()
            conn.close()
        assert reach.reaches(f"http://localhost:{port}", url)  # the kit: it reaches the seat
        conditions = targets.of_url(f"http://localhost:{port}", "m", None, None).conditions
        assert "unverified" in conditions, "the stranger's numbers carry the seat's verified mark"
    finally:
        stranger.close()
        seat.close()
