"""Proof that what listens on the seat's port is the server the kit started, and nothing else.

vLLM binds with SO_REUSEPORT, so another process of the same user can bind the same port while the
seat loads; the kernel then spreads new connections between the two. Asking the server who it is
can be answered by either, by chance. The kernel's socket table cannot be fooled: every listening
socket on the port must be held by one of the seat's processes.
"""

from __future__ import annotations

import os
from pathlib import Path

from seatkit import engine
from seatkit.errors import SeatError

OURS, NOT_YET = "ours", "not listening yet"
TABLES = ("/proc/net/tcp", "/proc/net/tcp6")


def listening(port: int) -> set[int] | None:
    """Socket inodes listening on `port` (any address), from the kernel's TCP tables;
    None when no table can be read (no /proc), which must not read as 'nobody listens'."""
    found, read = set(), False
    for table in TABLES:
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        read = True
        for line in lines:
            fields = line.split()
            if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:  # 0A: LISTEN
                found.add(int(fields[9]))
    return found if read else None


def held(pids: list[int]) -> set[int]:
    """Socket inodes the processes hold open; PermissionError when their fds can't be read."""
    inodes = set()
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except FileNotFoundError:
            continue
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(int(target[8:-1]))
    return inodes


def session_pids(leader: int) -> list[int]:
    """Every live process of the session the native seat was started in (its workers too)."""
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == leader and fields[0] != "Z":
            pids.append(int(stat.parent.name))
    return pids


def container_pids(ident: str) -> list[int]:
    """Host PIDs of a container's processes (the engine runs on this machine)."""
    from docker.errors import DockerException

    try:
        top = engine.client().containers.get(ident).top()
    except DockerException as exc:  # not running (yet): its processes can't be named
        raise PermissionError(f"docker top: {exc}") from None
    column = top["Titles"].index("PID")
    return [int(row[column]) for row in top["Processes"]]


def check(port: int, pids_of) -> str:
    """OURS, NOT_YET, or 'unverifiable: …'; raises when a foreign process listens on the port."""
    for _ in range(2):  # a socket closed between the two reads is not a stranger
        table = listening(port)
        if table is None:
            return "unverifiable: cannot read the kernel's socket tables (" + ", ".join(TABLES) + ")"
        if not table:
            return NOT_YET
        try:
            strangers = table - held(pids_of())
        except PermissionError as exc:
            return f"unverifiable: cannot read the seat's open files ({exc.strerror or exc})"
        if not strangers:
            return OURS
    raise SeatError(
        f"another process, not the seat, also listens on port {port}: vLLM binds with "
        "SO_REUSEPORT, so the kernel would hand it some of the seat's requests and "
        "its answers would be measured as the seat's",
        f"find it (ss -ltnp 'sport = :{port}'), stop it, or give the seat another SEAT_PORT",
    )
