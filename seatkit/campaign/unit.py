"""The systemd units a campaign installs: the one that resumes it after each boot, and the one that
returns an arm's boot to the normal entry when that fails. What the first runs as root must be root's
alone (`unsafe_exe`): checked when the unit is written, and by the unit itself before each start.
"""

from __future__ import annotations

import re
import stat
from pathlib import Path

import seatkit
from seatkit.campaign.boot import FALLBACK_NAME, GRUBENV, MARKER
from seatkit.errors import SeatError
from seatkit.host.system import System

PLAIN_PATH = re.compile(r"/[A-Za-z0-9/._+-]+")  # safe in a unit's ExecStart and in sh without quoting


def _root_only_check(seat: str) -> str:
    """sh that fails unless the program and every folder above it (as named and as resolved) are
    owned by root and writable by no one else: systemd runs it before the step, as root."""
    return (
        f"for p in {seat} $$(readlink -f {seat}); do while :; do "
        '[ "$$(stat -Lc %%u "$$p")" = 0 ] || exit 1; '
        'case "$$(stat -Lc %%A "$$p")" in ?????w????|????????w?) exit 1;; esac; '
        '[ "$$p" = / ] && break; p=$$(dirname "$$p"); done; done'
    )


def unit_text(seat: str, root: str = "/") -> str:
    """The oneshot unit that resumes the campaign after each boot (removed at the end). It refuses to
    run a `seat` that is not root's alone, and any failure of it starts the fallback unit."""
    where = "" if root == "/" else f" --root {root}"
    return (
        "# Written by seatkit (seat campaign run); removed at the campaign's end.\n"
        "[Unit]\nDescription=seatkit campaign: the next arm after this boot\n"
        "After=network-online.target\nWants=network-online.target\n"
        f"OnFailure={FALLBACK_NAME}\n\n"
        "[Service]\nType=oneshot\n"
        f"ExecStartPre=/bin/sh -c '{_root_only_check(seat)}'\n"
        f"ExecStart={seat} campaign step{where}\n"
        "TimeoutStartSec=infinity\n\n[Install]\nWantedBy=multi-user.target\n"
    )


def fallback_text() -> str:
    """Started when the step fails or dies: in an arm's boot (its marker on the command line), the
    one-shot is cleared and the host reboots into the normal entry; in the normal boot, nothing."""
    return (
        "# Written by seatkit (seat campaign run); removed at the campaign's end.\n"
        "[Unit]\nDescription=seatkit campaign: back to the normal boot entry after a failed step\n"
        f"ConditionKernelCommandLine={MARKER}\n\n"
        "[Service]\nType=oneshot\n"
        f"ExecStart=-/usr/bin/grub-editenv {GRUBENV} unset next_entry\n"
        "ExecStart=/usr/bin/systemctl reboot\n"
    )


def unsafe_exe(system: System, exe: str) -> list[str]:
    """Why root must not run `exe` from the unit: it, its interpreter, the kit's package it runs
    (this one: the unit runs the seat that started the campaign), or a folder above any of them
    (as named and as resolved) is not owned by the root folder's owner, or is writable by another
    user. Empty when it is root's alone."""
    if not PLAIN_PATH.fullmatch(exe):
        return [f"{exe} is not a plain absolute path (letters, digits and / . _ + -)"]
    top = system.path("/").resolve()
    owner = top.stat()
    problems: list[str] = []
    shown = set()

    def check(path: Path) -> None:
        for p in [path, *path.parents]:
            if not p.is_relative_to(top) or p in shown or not p.exists():
                continue
            shown.add(p)
            st = p.stat()
            name = "/" + str(p.relative_to(top)).lstrip(".")
            if st.st_uid != owner.st_uid:
                problems.append(f"{name} is owned by uid {st.st_uid}, not root")
            elif st.st_mode & (stat.S_IWOTH | stat.S_IWGRP):
                problems.append(f"{name} is writable by others (mode {stat.filemode(st.st_mode)})")

    target = system.path(exe)
    if not target.is_file():
        return [f"{exe} is not a file"]
    check(target.parent.resolve())  # whoever can write a folder on the way can replace what follows
    check(target.resolve())
    head = target.read_bytes()[:256].split(b"\n")[0]
    if head.startswith(b"#!") and head[2:].split():  # a script: its interpreter runs as root too
        check(system.path(head[2:].split()[0].decode(errors="replace")).resolve())
    package = Path(seatkit.__file__).resolve().parent  # the kit's code it imports, where this root holds it
    for path in [package, *sorted(package.rglob("*.py"))]:  # an editable install: the user's clone
        check(path)
    return problems


def require_safe_exe(system: System, exe: str) -> None:
    problems = unsafe_exe(system, exe)
    if problems:
        raise SeatError(
            f"the campaign's unit would run {exe} as root at every boot, but a user could change "
            "what it runs:\n  - " + "\n  - ".join(problems),
            "install seatkit where only root can write (`sudo make install`, or a root-owned copy "
            "of the kit and its venv) and run `seat campaign run` from there",
        )
