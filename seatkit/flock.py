"""One at a time: an exclusive flock on a file that names its holder.

The lock file says who holds it (pid, what, since), so a second caller is refused with that name.
The kernel drops a flock when its holder dies, so a killed holder never leaves a stale lock behind.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Callable
from contextlib import contextmanager, suppress
from pathlib import Path

from seatkit.errors import SeatError


@contextmanager
def exclusive(path: Path, what: str, busy: str, hint: str, wait: Callable[[str], None] | None = None):
    """Hold path's lock as `what`; else SeatError "{busy}: {holder}" with hint, or, given `wait`,
    tell it "{busy}: {holder}" and wait for the holder to finish."""
    try:  # never through a symlink: truncating the holder's name would truncate its target
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError as exc:  # a folder it cannot write, or something other than a file in its place
        raise SeatError(
            f"cannot open the lock {path}: {exc.strerror}",
            f"{path.parent} must be writable (point SEAT_HOME at a folder you can write), and "
            f"{path.name} a regular file in it: move what is there aside",
        ) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if wait is None:
                raise SeatError(f"{busy}: {holder(fd)}", hint) from None
            wait(f"{busy}: {holder(fd)}; waiting for it")
            fcntl.flock(fd, fcntl.LOCK_EX)
        with suppress(OSError):  # the name is for the next caller's message; a full disk keeps the lock
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps({"pid": os.getpid(), "what": what, "since": time.time()}).encode(), 0)
        yield
    finally:
        os.close(fd)  # closing the last descriptor releases the flock


def beside(target: Path, what: str, busy: str, wait: Callable[[str], None]):
    """The lock of something made once (a venv, a tool, a model folder): a file beside target,
    NAME.lock; a second maker tells `wait` who holds it and waits for it, then finds it made."""
    return exclusive(target.with_name(target.name + ".lock"), what, busy, "", wait=wait)


def holder(fd: int) -> str:
    try:
        who = json.loads(os.pread(fd, 4096, 0) or b"{}")
        since = time.strftime("%H:%M:%S", time.localtime(who["since"]))
        return f"pid {who['pid']} ({who['what']}, since {since})"
    except (ValueError, KeyError, TypeError):
        return "a process that has not yet written its name"
