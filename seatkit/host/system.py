"""The one door to the host: every file through a root prefix, every command through one runner.

Tests point the root at a fixture tree and give a runner with canned answers, so the whole of
seatkit/host runs against fake hosts without touching this one. `fault` is called at each named
step of a change, so tests can make the process "die" exactly there.
"""

from __future__ import annotations

import ctypes
import os
import re
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from seatkit.errors import SeatError

Runner = Callable[[list[str]], tuple[int, str]]
BIN_DIRS = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")


TEMP = ".seatkit~"
# Where boot tools write: each file system among them is synced before a step is recorded done.
BOOT_FILESYSTEMS = ("/", "/boot", "/boot/efi", "/efi")
_LIBC = ctypes.CDLL(None, use_errno=True)
TOOL_TIMEOUT = 600  # in the names of seatkit's own temporary files, so cleaning finds only them


def run_real(argv: list[str]) -> tuple[int, str]:
    """Exit status and output. Tools print in any encoding (a Latin-1 "Syst\xe8me"): read bytes,
    decode with replacement, and use the text for display only."""
    try:
        done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=TOOL_TIMEOUT)
    except FileNotFoundError:
        return 127, f"{argv[0]}: not found"
    except subprocess.TimeoutExpired as exc:  # a failed step like any other: the journal knows what to undo
        return 124, (exc.output or b"").decode(
            "utf-8", "replace"
        ) + f"\n{argv[0]}: stopped after {TOOL_TIMEOUT} s"
    return done.returncode, done.stdout.decode("utf-8", "replace")


LISTERS = ("lsinitramfs", "lsinitrd", "lsinitcpio")  # an initramfs image's file list


def confined(root: Path) -> Runner:
    """A runner for a throwaway root: the commands that only read, read the root's copies (modinfo
    its modules for the kernel its /proc names, uname that kernel, a lister its image);
    systemd-detect-virt can read only this machine, so it is not run and the root's own files
    (cpuinfo, /proc/1/cgroup) decide.
    Any other command would act on this machine instead of on the root: refused."""

    def run(argv: list[str]) -> tuple[int, str]:
        name = argv[0]
        release = root / "proc/sys/kernel/osrelease"
        if name == "modinfo":  # the root's kernel, where it names one, not this machine's uname
            kernel = ["-k", release.read_text().strip()] if release.is_file() and "-k" not in argv else []
            return run_real(["modinfo", "-b", str(root), *kernel, *argv[1:]])
        if name in LISTERS:
            return run_real([name, str(root / argv[1].lstrip("/")), *argv[2:]])
        if name == "uname" and argv[1:] == ["-r"]:
            return (0, release.read_text()) if release.is_file() else (1, f"{release}: absent")
        if name == "systemd-detect-virt":
            return 127, f"systemd-detect-virt would read this machine, not {root}: not run"
        raise SeatError(
            f"`{' '.join(argv)}` would act on this machine, not on {root}: not run",
            "--root names a throwaway copy to plan against; run it without --root on the host itself",
        )

    return run


@dataclass
class System:
    root: Path = Path("/")
    runner: Runner = field(default=run_real)
    euid: int = field(default_factory=os.geteuid)
    fault: Callable[[str], None] = field(default=lambda point: None)

    def path(self, path: str) -> Path:
        return self.root / path.lstrip("/")

    def read(self, path: str) -> str | None:
        try:
            return self.path(path).read_text(errors="replace")
        except OSError:
            return None

    def read_bytes(self, path: str) -> bytes | None:
        try:
            return self.path(path).read_bytes()
        except OSError:
            return None

    def exists(self, path: str) -> bool:
        return self.path(path).exists()

    def entries(self, path: str) -> list[str] | None:
        """Names in a directory, sorted; None when it does not exist."""
        try:
            return sorted(p.name for p in self.path(path).iterdir())
        except OSError:
            return None

    def glob(self, pattern: str) -> list[Path]:
        return sorted(self.root.glob(pattern.lstrip("/")))

    def which(self, name: str) -> str | None:
        return next((f"{d}/{name}" for d in BIN_DIRS if self.path(f"{d}/{name}").is_file()), None)

    def run(self, argv: list[str]) -> tuple[int, str]:
        return self.runner(argv)

    def settle(self) -> None:
        """Make what a boot tool wrote durable: grub-mkconfig, kernel-install and the initramfs
        generators do not sync, so a power cut after the journal says "done" could lose it."""
        seen = set()
        for path in BOOT_FILESYSTEMS:
            target = self.path(path)
            if target.is_dir() and target.stat().st_dev not in seen:
                seen.add(target.stat().st_dev)
                syncfs(target)

    def _inside(self, path: str) -> Path:
        """The real path, refused when a symlink would lead it out of the root prefix."""
        target = self.path(path)
        resolved = target.parent.resolve() / target.name
        if target.is_symlink() or not resolved.is_relative_to(self.root.resolve()):
            raise SeatError(
                f"{path} is a symlink or leads outside {self.root}: not written",
                "seatkit writes only regular files it can own",
            )
        return target

    def check_writable(self, path: str) -> None:
        """Raises the SeatError a write of this path would meet, before anything is changed."""
        self._inside(path)
        for folder in [self.path(path).parent, *self.path(path).parent.parents]:
            if folder.exists() and not folder.is_dir():
                raise SeatError(
                    f"{path}: /{folder.relative_to(self.root)} is not a folder",
                    "seatkit writes only regular files it can own",
                )

    def missing_dirs(self, path: str) -> list[str]:
        """Folders a write of this path would create, outermost first."""
        missing = [p for p in self.path(path).parents if not p.exists() and p.is_relative_to(self.root)]
        return [f"/{p.relative_to(self.root)}" for p in reversed(missing)]

    def write(self, path: str, data: bytes, mode: int = 0o644) -> None:
        """Atomic: a temporary file in the same folder, fsync, rename, fsync the folder.
        An existing file keeps its mode, owner and extended attributes (ACLs, SELinux labels)."""
        target = self._inside(path)
        created = self.missing_dirs(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        for folder in created:  # a new folder is durable once its parent's entry for it is
            fsync_dir(self.path(folder).parent)
        old = target.stat() if target.exists() else None
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}{TEMP}")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            self.fault("inside the write of " + re.sub(r"/backups/[^/]+/", "/backups/<tx>/", path))
            os.chmod(tmp, old.st_mode & 0o7777 if old else mode)
            if old and self.euid == 0:
                os.chown(tmp, old.st_uid, old.st_gid)
            if old:
                copy_xattrs(target, Path(tmp), path)
            os.replace(tmp, target)
        except Exception:  # a kill (or a test's Death) leaves the temp file: recover cleans it
            Path(tmp).unlink(missing_ok=True)
            raise
        fsync_dir(target.parent)

    def clean_temp(self, folder: str) -> list[str]:
        """Remove seatkit's own temporary files left in a folder by a kill inside a write."""
        found = [p for p in self.path(folder).glob(f".*{TEMP}*") if p.is_file()]
        for p in found:
            p.unlink()
        return [f"/{p.relative_to(self.root)}" for p in found]

    def remove(self, path: str) -> None:
        target = self._inside(path)
        target.unlink(missing_ok=True)
        fsync_dir(target.parent)


def copy_xattrs(source: Path, target: Path, shown: str) -> None:
    for name in os.listxattr(source, follow_symlinks=False):
        try:
            os.setxattr(target, name, os.getxattr(source, name, follow_symlinks=False))
        except OSError as exc:
            raise SeatError(
                f"{shown} has the extended attribute {name}, which seatkit cannot copy to "
                f"its new version ({exc.strerror}): the file is left as it was",
                "an ACL or security label would be lost; set the change by hand",
            ) from None


def syncfs(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        if _LIBC.syncfs(fd) != 0:
            raise OSError(ctypes.get_errno(), f"syncfs {folder}: {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(fd)


def fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
