"""A venv's entries as the kit judges them (files, links, anything else), and what `python -m venv`
makes itself, found by making one.

Nothing is followed through a link: a link is an entry of its own, judged by where it points (a
venv's own bin/python and lib64 point outside it or at a sibling; a link dropped into
site-packages would bring in a folder no check reads).
"""

from __future__ import annotations

import os
import stat
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from seatkit.errors import SeatError
from seatkit.models.lock import identity_of


@dataclass
class Tree:
    """Every entry under a folder, by its path relative to it ("bin/vllm")."""

    files: dict[str, os.stat_result] = field(default_factory=dict)
    links: dict[str, str] = field(default_factory=dict)  # where each link points, as written
    odd: dict[str, str] = field(default_factory=dict)  # a fifo, a socket, a device: what it is


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "fifo"), (stat.S_ISSOCK, "socket"), (stat.S_ISCHR, "device")):
        if test(mode):
            return name
    return "device" if stat.S_ISBLK(mode) else "file of an unknown kind"


def walk(folder: Path, skip: frozenset[str] = frozenset()) -> Tree:
    """skip: names at the top of folder that are not walked."""
    tree = Tree()

    def visit(path: str, rel: str) -> None:
        try:
            entries = list(os.scandir(path))
        except OSError as exc:
            raise SeatError(
                f"cannot read {path}: {exc.strerror}",
                "the venv must be readable by whoever checks it; `seat setup` makes it again",
            ) from None
        for entry in entries:
            name = rel + entry.name
            if not rel and entry.name in skip:
                continue
            try:
                info = entry.stat(follow_symlinks=False)
                if stat.S_ISLNK(info.st_mode):
                    tree.links[name] = os.readlink(entry.path)
            except FileNotFoundError:  # gone since the listing: as if never there
                continue
            if stat.S_ISDIR(info.st_mode):
                visit(entry.path, name + "/")
            elif stat.S_ISREG(info.st_mode):
                tree.files[name] = info
            elif not stat.S_ISLNK(info.st_mode):
                tree.odd[name] = _kind(info.st_mode)

    visit(str(folder), "")
    return tree


def identity(info: os.stat_result) -> list[int]:
    """A file's identity as models' full verify keys it (device, inode, size, mtime), and its
    inode's change time: a write, a chmod, a rename over it or a hard link's write change it."""
    return [*identity_of(info), info.st_ctime_ns]


def unchecked_pyc(path: Path) -> bool:
    """Whether a .pyc's header (PEP 552: a magic number ending in CR LF, then a flags word) says
    unchecked-hash, which Python runs without even a look at its source."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(8)
    except OSError:
        return False
    return len(head) == 8 and head[2:4] == b"\r\n" and int.from_bytes(head[4:8], "little") & 0b11 == 0b01


def made_by_venv(python: str) -> Tree:
    """What `python -m venv --without-pip` makes (pyvenv.cfg, bin/python*, bin/activate*, lib64...),
    found by making one with that Python: the names the venv's own files have, for this Python.
    Its pip comes with a RECORD like any other distribution."""
    with tempfile.TemporaryDirectory(prefix="seatkit-venv-") as tmp:
        where = Path(tmp) / "venv"
        try:
            done = subprocess.run(
                [python, "-m", "venv", "--without-pip", str(where)], capture_output=True, text=True
            )
        except OSError as exc:
            raise SeatError(
                f"cannot run {python}: {exc.strerror}", "set native.python in the profile"
            ) from None
        if done.returncode:
            raise SeatError(
                f"{python} -m venv --without-pip failed (exit {done.returncode}): {done.stderr.strip()}",
                "the Python of native.python must make venvs (Debian: apt install python3-venv)",
            )
        return walk(where)
