"""The one door to the host: every file through a root prefix, every command through one runner.

Tests point the root at a fixture tree and give a runner with canned answers, so the whole of
seatkit/host runs against fake hosts without touching this one. `fault` is called at each named
step of a change, so tests can make the process "die" exactly there.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from seatkit.errors import SeatError

Runner = Callable[[list[str]], tuple[int, str]]
BIN_DIRS = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")


def run_real(argv: list[str]) -> tuple[int, str]:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    except FileNotFoundError:
        return 127, f"{argv[0]}: not found"
    return done.returncode, done.stdout + done.stderr


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

    def _inside(self, path: str) -> Path:
        """The real path, refused when a symlink would lead it out of the root prefix."""
        target = self.path(path)
        resolved = target.parent.resolve() / target.name
        if target.is_symlink() or not resolved.is_relative_to(self.root.resolve()):
            raise SeatError(f"{path} is a symlink or leads outside {self.root}: not written",
                            "seatkit writes only regular files it can own")
        return target

    def write(self, path: str, data: bytes, mode: int = 0o644) -> None:
        """Atomic: a temporary file in the same folder, fsync, rename, fsync the folder.
        An existing file keeps its mode and owner."""
        target = self._inside(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        old = target.stat() if target.exists() else None
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(tmp, old.st_mode & 0o7777 if old else mode)
            if old and self.euid == 0:
                os.chown(tmp, old.st_uid, old.st_gid)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        _fsync_dir(target.parent)

    def remove(self, path: str) -> None:
        target = self._inside(path)
        target.unlink(missing_ok=True)
        _fsync_dir(target.parent)


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
