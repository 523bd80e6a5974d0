"""Whether a URL reaches a seat `seat up` recorded: the seat's port, and an address its listener
answers on, however the URL spells it (localhost, 127.0.0.1, [::1], 0.0.0.0, a trailing slash).

A seat bound to one address answers there alone; one bound to 0.0.0.0 (or ::) answers on every
address of this machine. Dialing the unspecified address reaches this machine's loopback, as Linux
does, so http://0.0.0.0:PORT reaches a seat bound to 127.0.0.1.
"""

from __future__ import annotations

import socket
from ipaddress import IPv4Address, IPv6Address, ip_address
from urllib.parse import urlsplit

Address = IPv4Address | IPv6Address
LOOPBACK = {4: ip_address("127.0.0.1"), 6: ip_address("::1")}


def _host_port(url: str) -> tuple[str, int] | None:
    try:
        parts = urlsplit(url.strip())
        port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    except ValueError:  # a port that is no number, or out of range
        return None
    return (parts.hostname, port) if parts.hostname and port else None


def _addresses(host: str) -> set[Address]:
    """What a name stands for: a literal address, loopback for localhost (RFC 6761, whatever
    /etc/hosts says), else every address it resolves to here."""
    try:
        return {ip_address(host)}
    except ValueError:
        pass
    if host == "localhost" or host.endswith(".localhost"):
        return set(LOOPBACK.values())
    try:
        found = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return set()
    return {ip_address(str(info[4][0])) for info in found}


def _dialed(address: Address) -> Address:
    """Where a connection to the address lands: the unspecified one on loopback, an IPv4-mapped
    IPv6 one on its IPv4 address."""
    if address.is_unspecified:
        return LOOPBACK[address.version]
    mapped = address.ipv4_mapped if isinstance(address, IPv6Address) else None
    return mapped or address


def _local(address: Address) -> bool:
    """Whether the address is this machine's: loopback, or one a socket can bind here."""
    if address.is_loopback:
        return True
    family = socket.AF_INET if address.version == 4 else socket.AF_INET6
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.bind((str(address), 0))
        return True
    except OSError:
        return False


def _answers(bound: Address, dialed: Address) -> bool:
    if not bound.is_unspecified:
        return _dialed(bound) == dialed
    # A wildcard listener takes its family's every local address (:: takes IPv4 too, dual-stack).
    return (bound.version == dialed.version or bound.version == 6) and _local(dialed)


def reaches(url: str, seat_url: str) -> bool:
    """Whether a request to url lands on the listener of the seat recorded at seat_url."""
    dialed, seat = _host_port(url), _host_port(seat_url)
    if dialed is None or seat is None or dialed[1] != seat[1]:
        return False
    bound = _addresses(seat[0])
    return any(_answers(b, _dialed(d)) for d in _addresses(dialed[0]) for b in bound)
