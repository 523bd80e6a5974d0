"""The repository as an operator has it after `seat overlay fetch`, for a test's own overlay: what a
plain `docker build .` reads (shared by the image tests and the build benchmark)."""

import os
import shutil
from pathlib import Path

from seatkit import paths
from seatkit.image import dockerfile
from seatkit.seat.overlay_lock import Lock
from seatkit.seat.profiles import Profile

JUNK = 8 << 20  # bytes the .dockerignore must keep out of the context


def repository_copy(root: Path, profile: Profile, lock: Lock, fetched: Path) -> Path:
    """Dockerfile (its defaults rendered for this profile and lock, as `seat render` does for the
    default), .dockerignore, image/, the lock, the fetched files, and things no build needs."""
    shutil.copytree(paths.REPO / "image", root / "image")
    shutil.copy(paths.REPO / ".dockerignore", root)
    (root / "Dockerfile").write_text(
        dockerfile.rendered((paths.REPO / "Dockerfile").read_text(), profile, lock)
    )
    shutil.copytree(fetched, root / "overlay" / "vllm")
    (root / "overlay" / "overlay.lock").write_text(lock.dump())
    (root / "overlay" / "vllm" / "__pycache__").mkdir(exist_ok=True)
    (root / "overlay" / "vllm" / "__pycache__" / "version.cpython-312.pyc").write_bytes(b"\0" * 64)
    (root / "runs").mkdir()
    (root / "runs" / "big.bin").write_bytes(os.urandom(JUNK))
    return root
