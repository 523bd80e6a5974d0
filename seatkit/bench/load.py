"""How busy the machine was with other work while a bench ran: the CPU time every process used
(/proc/stat) less this process's own, over the CPUs' time. On a seat that shares the machine with
the bench (a CPU seat, the demo), that is load the seat competed with for its steps."""

from __future__ import annotations

import os
import time
from pathlib import Path

STAT = Path("/proc/stat")
BUSY_SHARE = 0.25  # other work held a quarter of the CPUs or more: the machine was busy
BUSY_MS_CV = 0.15  # ms/step varying by 15 % or more: above even the 2-core CPU seat's usual 8-10 %


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


class Meter:
    """Started before the bench, read after it."""

    def __init__(self):
        self.busy, self.own, self.wall = _busy_s(), _own_s(), time.monotonic()

    def read(self) -> dict | None:
        """Other work's share of the CPUs over the bench, and the load average at its end."""
        busy = _busy_s()
        if busy is None or self.busy is None:
            return None
        cpus = os.cpu_count() or 1
        wall = time.monotonic() - self.wall
        other = max(0.0, (busy - self.busy) - (_own_s() - self.own))
        return {
            "cpus": cpus,
            "other_cpu_share": min(1.0, other / (wall * cpus)) if wall > 0 else 0.0,
            "load_average": os.getloadavg()[0],
        }


def busy_note(machine: dict | None, ms_cv: float | None) -> str | None:
    """A plain note when the machine was busy: other work's share of the CPUs, or ms/step varying
    far more than a quiet seat's; None when neither says so."""
    machine = machine or {}
    share = machine.get("other_cpu_share")
    loaded = share is not None and share >= BUSY_SHARE
    jittery = ms_cv is not None and ms_cv >= BUSY_MS_CV
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
