"""seatkit/serve/reach.py: a name is dialed as the HTTP client dials it. A URL of localhost took
both loopbacks whatever the resolver said, and reached the seat when any address did: with the
seat on one loopback and a stranger on the other, the stranger's numbers carried the seat's mark."""

import socket

import pytest

from seatkit.serve import reach


def loopback6() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
        return True
    except OSError:
        return False


def resolving(monkeypatch, order: list[str]) -> None:
    """localhost resolves here to order (a Debian host's /etc/hosts puts ::1 first)."""
    real = socket.getaddrinfo

    def getaddrinfo(host, port, *args, **kwargs):
        if host != "localhost":
            return real(host, port, *args, **kwargs)
        return [
            (socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port or 0))
            for a in order
        ]

    monkeypatch.setattr(reach.socket, "getaddrinfo", getaddrinfo)


def listener(host: str, port: int = 0) -> socket.socket:
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.bind((host, port))
    sock.listen()
    return sock


@pytest.mark.skipif(not loopback6(), reason="this host has no IPv6 loopback to listen on")
@pytest.mark.parametrize("order", [["::1", "127.0.0.1"], ["127.0.0.1", "::1"]])
def test_localhost_reaches_the_seat_only_where_the_client_lands(monkeypatch, order):
    resolving(monkeypatch, order)
    seat = listener("127.0.0.1")
    port = seat.getsockname()[1]
    try:
        # Nothing on the other loopback: the client falls through to the seat, wherever it is.
        assert reach.reaches(f"http://localhost:{port}", f"http://127.0.0.1:{port}")
        with listener("::1", port):  # a stranger on the other loopback, same port
            lands_on_seat = order[0] == "127.0.0.1"
            assert reach.reaches(f"http://localhost:{port}", f"http://127.0.0.1:{port}") is lands_on_seat
    finally:
        seat.close()


def test_a_literal_address_is_dialed_as_written(monkeypatch):
    resolving(monkeypatch, ["::1", "127.0.0.1"])
    assert reach.reaches("http://127.0.0.1:18100/", "http://127.0.0.1:18100")
    assert not reach.reaches("http://[::1]:18100", "http://127.0.0.1:18100")
