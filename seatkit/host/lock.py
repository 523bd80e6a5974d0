"""One host change at a time: apply, rollback and recover hold an exclusive flock.

Status and plan only read and never take it.
"""

from __future__ import annotations

from seatkit import flock
from seatkit.host.system import System

LOCK = "/var/lib/seatkit/host/lock"


def held(system: System, what: str):
    return flock.exclusive(
        system.path(LOCK),
        f"seat host {what}",
        "another host change is running",
        "wait for it to finish; `seat host status` and `seat host plan` work meanwhile",
    )
