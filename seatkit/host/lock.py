"""One host change at a time: apply, rollback and recover hold an exclusive flock.

The lock file names its holder (pid, command, start time), so a second caller is refused with
who holds it. The kernel drops a flock when its holder dies, so a killed change never leaves a
stale lock behind. Status and plan only read and never take it.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from contextlib import contextmanager, suppress

from seatkit.errors import SeatError
from seatkit.host.system import System

LOCK = "/var/lib/seatkit/host/lock"


@contextmanager
def held(system: System, what: str):
    path = system.path(LOCK)
    try:  # never through a symlink: truncating the holder's name would truncate its target
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError as exc:
        raise SeatError(f"cannot open the host lock {LOCK}: {exc.strerror}",
                        "it must be a regular file seatkit can write (not a symlink or a folder); "
                        "move what is there aside") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise SeatError(f"another host change is running: {holder(fd)}",
                            "wait for it to finish; `seat host status` and `seat host plan` work meanwhile"
                            ) from None
        with suppress(OSError):  # the name is for the next caller's message; a full disk keeps the lock
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps({"pid": os.getpid(), "what": what, "since": time.time()}).encode(), 0)
        yield
    finally:
        os.close(fd)  # closing the last descriptor releases the flock


def holder(fd: int) -> str:
    try:
        who = json.loads(os.pread(fd, 4096, 0) or b"{}")
        since = time.strftime("%H:%M:%S", time.localtime(who["since"]))
        return f"pid {who['pid']} (seat host {who['what']}, since {since})"
    except (ValueError, KeyError, TypeError):
        return "a process that has not yet written its name"
