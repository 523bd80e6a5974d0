"""How busy the machine was with other work while a bench ran: the CPU time every process used
(/proc/stat) less this process's own and the seat's (the process tree that serves its port, when it
runs here: a CPU seat, the demo), over the CPUs' time. That is load the seat competed with."""

from __future__ import annotations

import os
import time
from pathlib import Path
from urllib.parse import urlparse

STAT = Path("/proc/stat")
BUSY_SHARE = 0.25  # other work held a quarter of the CPUs or more: the machine was busy
# ms/step varying between repeats far above a quiet seat's: about 1 % on a GPU, 8-10 % on the
# 2-core CPU seat (a seat of unknown device is held to the CPU's, so it is never called busy wrongly)
BUSY_MS_CV = {"gpu": 0.05, "cpu": 0.15}


def _busy_s() -> float | None:
    """Seconds every CPU spent on anything but idle and iowait since boot; None off Linux."""
    try:
        fields = STAT.read_text().split("\n", 1)[0].split()[1:]
    except OSError:
        return None
    ticks = [int(f) for f in fields]
    return (sum(ticks[:8]) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


def _own_s() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _listening(port: int) -> set[str]:
    """The inodes of this machine's sockets listening on `port` (TCP, IPv4 or IPv6)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            f = row.split()
            if len(f) > 9 and f[3] == "0A" and int(f[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(f[9])
    return inodes


def _stats() -> dict[int, tuple[int, float]]:
    """Every process's parent and its CPU seconds (its threads' and its reaped children's)."""
    tick, out = os.sysconf("SC_CLK_TCK"), {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                f = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            out[int(entry.name)] = (int(f[1]), sum(int(x) for x in f[11:15]) / tick)
    return out


def _serving(pid: int, sockets: set[str]) -> bool:
    try:
        return any(os.readlink(fd).strip("socket:[]") in sockets for fd in Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return False


def seat_s(url: str | None) -> dict[int, float]:
    """CPU seconds of each process of the seat when it runs on this machine: those listening on
    its loopback port and all their descendants; {} for a seat elsewhere, or none found."""
    parsed = urlparse(url or "")
    if parsed.hostname not in ("127.0.0.1", "localhost", "::1") or not parsed.port:
        return {}
    sockets, stats = _listening(parsed.port), _stats()
    tree = {pid for pid in stats if pid != os.getpid() and sockets and _serving(pid, sockets)}
    while grown := {p for p, (parent, _) in stats.items() if parent in tree and p not in tree}:
        tree |= grown
    return {pid: stats[pid][1] for pid in tree}


class Meter:
    """Started before the bench, read after it; `url`, the seat's, to leave its own work out."""

    def __init__(self, url: str | None = None):
        self.url, self.seat = url, seat_s(url)
        self.busy, self.own, self.wall = _busy_s(), _own_s(), time.monotonic()

    def read(self) -> dict | None:
        """Other work's share of the CPUs over the bench, and the load average at its end."""
        busy = _busy_s()
        if busy is None or self.busy is None:
            return None
        cpus = os.cpu_count() or 1
        wall = time.monotonic() - self.wall
        seat = sum(s - self.seat.get(pid, 0.0) for pid, s in seat_s(self.url).items())
        other = max(0.0, (busy - self.busy) - (_own_s() - self.own) - seat)
        return {
            "cpus": cpus,
            "other_cpu_share": min(1.0, other / (wall * cpus)) if wall > 0 else 0.0,
            "load_average": os.getloadavg()[0],
        }


def busy_note(machine: dict | None, ms_cv: float | None, device: str | None = None) -> str | None:
    """A plain note when the machine was busy: other work's share of the CPUs, or ms/step varying
    between repeats far more than a quiet seat's on its device; None when neither says so."""
    machine = machine or {}
    share = machine.get("other_cpu_share")
    loaded = share is not None and share >= BUSY_SHARE
    jittery = ms_cv is not None and ms_cv >= BUSY_MS_CV.get(device or "cpu", BUSY_MS_CV["cpu"])
    if not (loaded or jittery):
        return None
    said = []
    if loaded:
        said.append(f"other processes used {share:.0%} of its {machine['cpus']} CPUs during the bench")
    if jittery:
        said.append(
            f"ms/step varied by {ms_cv:.0%} between requests (a quiet seat: about 1 % on a GPU, "
            "under 10 % on the 2-core CPU seat)"
        )
    return (
        "the machine was busy: "
        + " and ".join(said)
        + "; step times are slowed and spread by that load, so read ms/step as this machine's, now"
    )
