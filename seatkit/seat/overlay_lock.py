"""overlay/overlay.lock as data: where the overlay comes from (repository, commit, path, git tree)
and the SHA-256 of every file, and the name of the image built from it.

Below serve and image: the launch spec names the seat's image from it, the image package fetches,
verifies and builds with it. The body is `sha256sum` output (two spaces, path relative to the
overlay root), so `sha256sum -c` can check it too; its header lines are `# key: value`.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

from seatkit import paths, safe_yaml
from seatkit.errors import SeatError

LOCK = paths.REPO / "overlay" / "overlay.lock"
B12X_LOCK = paths.REPO / "overlay" / "b12x.lock"  # optional: the pinned b12x kernels (image/b12x.py)
LOCK_BYTES = 16 * 1024 * 1024  # a line per file of the vllm package
HEADER = ("source", "commit", "path", "tree")
LINE = re.compile(r"^([0-9a-f]{64})  (\S(?:.*\S)?)$")


@dataclass
class Lock:
    source: str
    commit: str
    path: str
    tree: str
    files: dict[str, str] = field(default_factory=dict)

    def dump(self) -> str:
        head = [
            "# seatkit overlay lock: the overlay layered onto the base image, pinned file by file.",
            "# Checked by `seat overlay fetch` and `seat overlay verify`; body lines are sha256sum format.",
        ]
        head += [f"# {key}: {getattr(self, key)}" for key in HEADER]
        return "\n".join(head + [f"{digest}  {name}" for name, digest in sorted(self.files.items())]) + "\n"

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.dump().encode()).hexdigest()


def parse(text: str, where: str = "overlay.lock") -> Lock:
    header: dict[str, str] = {}
    files: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("#"):
            key, _, value = line[1:].partition(":")
            if key.strip() in HEADER:
                header[key.strip()] = value.strip()
            continue
        if not line.strip():
            continue
        match = LINE.match(line)
        if not match:
            raise SeatError(f"{where}:{number}: expected '<64 hex sha256>  <path>', got {line[:80]!r}")
        digest, name = match.groups()
        files[name] = digest
    missing = [key for key in HEADER if not header.get(key)]
    if missing:
        raise SeatError(f"{where}: header lacks {', '.join(missing)}", "each as a '# key: value' line")
    if not files:
        raise SeatError(f"{where}: no files listed")
    return Lock(header["source"], header["commit"], header["path"], header["tree"], files)


def load(path: Path = LOCK) -> Lock:
    try:
        return parse(safe_yaml.read_text(path, "overlay lock", LOCK_BYTES), str(path))
    except (FileNotFoundError, IsADirectoryError):
        raise SeatError(f"no overlay lock at {path}") from None


REPOSITORY = "seatkit"


def load_b12x(path: Path = B12X_LOCK) -> Lock | None:
    """The b12x overlay lock, or None when there is none (the base's public kernels)."""
    return load(path) if path.exists() else None


def seat_tag(profile, lock: Lock, b12x_lock: Lock | None = None) -> str:
    """The image name the seat runs: the profile, the overlay commit and the lock's own hash (and
    the b12x overlay lock's, when there is one)."""
    b12x_part = f"-b12x-{b12x_lock.sha256[:12]}" if b12x_lock else ""
    return f"{REPOSITORY}/{profile.name}:overlay-{lock.commit[:12]}-{lock.sha256[:12]}{b12x_part}"
