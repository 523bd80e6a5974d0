"""What root runs unattended must be root's alone: the `seat` the campaign's unit starts, its #!
interpreter, every folder its Python imports from (sys.path and what .pth files add there), and the
profiles it reads. Each, and every folder above it (as named and as resolved), must be owned by the
root folder's owner and writable by no one else.
"""

from __future__ import annotations

import os
import re
import stat
import sys
from pathlib import Path

import seatkit
from seatkit import paths
from seatkit.errors import SeatError
from seatkit.host.system import System
from seatkit.seat import host_profiles

PLAIN_PATH = re.compile(r"/[A-Za-z0-9/._+-]+")  # safe in a unit's ExecStart and in sh without quoting


def import_folders() -> list[str]:
    """Where the unit's Python finds code and what it reads: the kit's package folder, sys.path, the
    folders .pth files add there (their `import` lines run at start-up), and the profiles."""
    package = Path(seatkit.__file__).resolve().parent
    found = [str(package.parent), *[p for p in sys.path if p]]
    for folder in list(found):
        for pth in sorted(Path(folder).glob("*.pth")) if Path(folder).is_dir() else []:
            for line in pth.read_text(errors="replace").splitlines():
                if line.strip() and not line.startswith(("#", "import ", "import\t")):
                    found.append(str((pth.parent / line.strip()).resolve()))
    found += [str(paths.PROFILES), str(host_profiles.HOST)]
    return list(dict.fromkeys(str(Path(f).absolute()) for f in found if Path(f).is_dir()))


def sticky(st: os.stat_result) -> bool:
    """A folder like /tmp: others may add names to it, but only an entry's owner renames or removes it."""
    return stat.S_ISDIR(st.st_mode) and bool(st.st_mode & stat.S_ISVTX)


def owned_by_root_alone(top: Path, roots: list[Path], trees: list[Path]) -> list[str]:
    """Why `roots` (and every folder above them) and everything under `trees` are not the owner of
    `top`'s alone; paths outside `top` are another root's business and are not looked at."""
    owner = top.stat().st_uid
    problems: list[str] = []
    shown: set[Path] = set()

    def one(p: Path) -> None:
        if p in shown or not p.is_relative_to(top) or not os.path.lexists(p):
            return
        shown.add(p)
        st = p.lstat()
        name = "/" + str(p.relative_to(top)).lstrip(".")
        if st.st_uid != owner:
            problems.append(f"{name} is owned by uid {st.st_uid}, not root")
        elif not stat.S_ISLNK(st.st_mode) and st.st_mode & (stat.S_IWOTH | stat.S_IWGRP) and not sticky(st):
            problems.append(f"{name} is writable by others (mode {stat.filemode(st.st_mode)})")

    for path in roots + trees:
        for p in [path, *path.parents]:
            one(p)
    for tree in (t for t in trees if t.is_relative_to(top)):
        for folder, dirs, files in os.walk(tree):
            for name in sorted(dirs + files):
                one(Path(folder) / name)
    return problems


def unsafe_exe(system: System, exe: str) -> list[str]:
    """Why root must not run `exe` from the unit: it, its interpreter, the code its Python imports
    (the kit's package, sys.path, what .pth files add: the unit runs the seat that started the
    campaign), the profiles it reads, or a folder above any of them is not root's alone. Empty
    when it is."""
    if not PLAIN_PATH.fullmatch(exe):
        return [f"{exe} is not a plain absolute path (letters, digits and / . _ + -)"]
    target = system.path(exe)
    if not target.is_file():
        return [f"{exe} is not a file"]
    roots = [target.parent.resolve(), target.resolve()]  # a folder on the way could replace what follows
    head = target.read_bytes()[:256].split(b"\n")[0]
    if head.startswith(b"#!") and head[2:].split():  # a script: its interpreter runs as root too
        named = system.path(head[2:].split()[0].decode(errors="replace"))
        roots += [named.parent.resolve(), named.resolve()]  # as the kernel opens it, and as it resolves
    folders = import_folders()
    problems = [f"{f} is not a plain absolute path" for f in folders if not PLAIN_PATH.fullmatch(f)]
    return problems + owned_by_root_alone(
        system.path("/").resolve(), roots, [Path(f).resolve() for f in folders]
    )


def require_safe_exe(system: System, exe: str) -> None:
    problems = unsafe_exe(system, exe)
    if problems:
        raise SeatError(
            f"the campaign's unit would run {exe} as root at every boot, but a user could change "
            "what it runs:\n  - "
            + "\n  - ".join(problems[:20])
            + (f"\n  - and {len(problems) - 20} more" if len(problems) > 20 else ""),
            "install seatkit where only root can write (`sudo make install`, or a root-owned copy "
            "of the kit and its venv) and run `seat campaign run` from there",
        )
