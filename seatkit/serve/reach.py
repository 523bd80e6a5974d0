"""Whether a URL reaches a seat `seat up` recorded: the seat's port, and an address its listener
answers on, however the URL spells it (localhost, 127.0.0.1, [::1], 0.0.0.0, a trailing slash).

A name is dialed as the HTTP client dials it: its addresses in the resolver's order, the first
that takes the connection (a stranger there takes the requests, whoever listens on the next).

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


def _addresses(host: str, port: int | None = None) -> list[Address]:
    """What a name stands for, in the resolver's order (the client's): a literal address, else
    every address it resolves to here, localhost included (the client asks the resolver too)."""
    try:
        return [ip_address(host)]
    except ValueError:
        pass
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return []
    return list(dict.fromkeys(ip_address(str(info[4][0]).split("%")[0]) for info in found))


def _lands(host: str, port: int) -> Address | None:
    """Where a client's connection to host:port lands: the first address that takes it, as
    urllib3 tries them; the first address when none does (the request fails, and nothing lands)."""
    addresses = _addresses(host, port)
    if len(addresses) > 1:
        for address in addresses:
            family = socket.AF_INET if address.version == 4 else socket.AF_INET6
            try:
                with socket.socket(family, socket.SOCK_STREAM) as probe:
                    probe.settimeout(1.0)
                    probe.connect((str(address), port))
                return address
            except OSError:
                continue
    return addresses[0] if addresses else None


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
    lands = _lands(*dialed)
    return lands is not None and any(_answers(b, _dialed(lands)) for b in _addresses(seat[0]))
