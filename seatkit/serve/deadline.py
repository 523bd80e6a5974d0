"""One overall deadline for an HTTP exchange, however slowly the server answers."""

from __future__ import annotations

import os
import socket
import threading

import requests

from seatkit.errors import SeatError


class Deadline:
    """One overall deadline for an HTTP exchange. Read timeouts bound each wait for a byte, not the
    whole answer: a server that trickles a byte every few seconds never trips them. At the deadline
    the answer's socket is shut, which ends any read in progress (headers are bounded by the read
    timeouts alone: a server built to trickle them is out of the threat model's scope)."""

    def __init__(self, seconds: float):
        self.seconds, self.passed = seconds, False
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._cut)
        self._timer.daemon = True
        self._timer.start()

    def hold(self, answer: requests.Response) -> None:
        """Watch the answer's socket (once its headers are in, the body is what may never end)."""
        with self._lock:
            self._sock = _socket_of(answer)
        if self.passed:
            self._cut()

    def session(self) -> requests.Session:
        """A session that takes no proxy from the environment: a shell's http_proxy/ALL_PROXY would
        send a seat's requests (completions, /metrics, timings) to a proxy that answers in its
        place. The CA bundle the shell names stays (an https --url seat behind a private CA)."""
        session = requests.Session()
        session.trust_env = False
        session.verify = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE") or True
        return session

    def _cut(self) -> None:
        with self._lock:
            self.passed = True
            try:
                if self._sock is not None:
                    self._sock.shutdown(socket.SHUT_RDWR)
            except OSError:  # closed already
                pass

    def close(self) -> None:
        self._timer.cancel()

    def error(self, url: str, what: str) -> SeatError:
        return SeatError(
            f"{url}: {what} did not end within its deadline of {self.seconds:.0f} s",
            "the server stalls, trickles its answer or ignores max_tokens",
        )


def _socket_of(answer: requests.Response) -> socket.socket | None:
    """The socket an answer is read from: the connection's, or (once http.client has let go of it,
    as for a `Connection: close` answer) the one under the response's file."""
    sock = getattr(getattr(answer.raw, "connection", None), "sock", None)
    if sock is None:
        fp = getattr(getattr(answer.raw, "_fp", None), "fp", None)
        sock = getattr(getattr(fp, "raw", None), "_sock", None)
    return sock
