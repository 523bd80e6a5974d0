"""Times a person reads: an ISO time in UTC and how long ago, from epoch seconds or clock ticks."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime
from pathlib import Path


def ago(seconds: float) -> str:
    """'2 min ago'; a time ahead of the clock (record from another host, clock set back) says so."""
    later = "ago" if seconds >= 0 else "in the future"
    seconds = abs(int(seconds))
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds // size} {unit} {later}"
    return f"{seconds} s {later}"


def stamp(epoch: float, now: float | None = None) -> str:
    now = time.time() if now is None else now
    try:
        iso = datetime.fromtimestamp(epoch, UTC).isoformat(timespec="seconds")
    except (OverflowError, ValueError, OSError):  # NaN, inf, year 10000 in a torn record
        return f"{epoch!r} (not a time)"
    return f"{iso.replace('+00:00', 'Z')} ({ago(now - epoch)})"


def boot_time() -> float:
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith("btime "):
            return float(line.split()[1])
    raise OSError("no btime in /proc/stat")


def from_ticks(ticks: str | int) -> float:
    """A process start time (clock ticks since boot, /proc/PID/stat field 22) as epoch seconds."""
    return boot_time() + int(ticks) / os.sysconf("SC_CLK_TCK")


def readable(info: dict) -> dict:
    """`seat status` for people: `started` and `since` as ISO times with how long ago."""
    shown = dict(info)
    if isinstance(shown.get("started"), (int, float)):
        shown["started"] = stamp(shown["started"])
    if shown.get("since"):
        try:
            shown["since"] = f"process started {stamp(from_ticks(shown['since']))}"
        except (OSError, ValueError):
            pass
    else:
        shown.pop("since", None)
    return shown
