"""A free TCP port on loopback, for servers the kit starts itself (oracles, registries, benchmarks)."""

from __future__ import annotations

import socket


def free_loopback_port() -> int:
    """A port nobody listens on now; the caller's server binds it next (a race it must notice)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
