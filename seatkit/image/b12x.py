"""Which b12x kernels the seat's image carries, and an optional pinned b12x overlay.

The published seat ran one local b12x change (its B12X_CHANGES.md: a dense FP8 GEMM tile port with an
`expected_m` decode hint in b12x/gemm/dense.py) that neither the public base image nor the vllm
overlay has. An operator who has the patched files pins them in overlay/b12x.lock (the vllm overlay's
format: `seat overlay lock --from DIR --source URL@COMMIT --path b12x --out overlay/b12x.lock`,
files in overlay/b12x/); `seat build` then copies them over the image's b12x package and checks
them as it builds. Without one the seat runs the base's public kernels, and the labels say so.
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Sequence
from pathlib import Path

from seatkit import paths
from seatkit.image.container import copy_out
from seatkit.seat.overlay_lock import Lock

FETCHED = paths.REPO / "overlay" / "b12x"
DENSE = "gemm/dense.py"  # where the published seat's kernel change lives
PUBLIC = "none: the base image's public b12x kernels (not the published seat's local dense-GEMM change)"
BASE_COMMIT_LABEL = "local-inference.b12x.commit"  # what the community base images record


def _sha256_in(container, path: str) -> str | None:
    """SHA-256 of one file inside a container (never started), or None when it has none."""
    with tempfile.TemporaryDirectory() as tmp:
        found = copy_out(container, path, Path(tmp))
        return hashlib.sha256(found.read_bytes()).hexdigest() if found and found.is_file() else None


def provenance(container, base_labels: dict, b12x_dir: str, lock: Lock | None) -> dict[str, str]:
    """Build arguments for the image's b12x labels: the b12x the base carries (its commit label,
    when the base records one), the overlay in force, and gemm/dense.py's SHA-256 as the image
    will hold it: the overlay's when it replaces the file, else the base's own."""
    dense = (lock.files.get(DENSE) if lock else None) or _sha256_in(container, f"{b12x_dir}/{DENSE}")
    return {
        "B12X_DIR": b12x_dir,
        "B12X_COMMIT": base_labels.get(BASE_COMMIT_LABEL, "unrecorded by the base"),
        "B12X_DENSE_SHA256": dense or f"absent: the base has no {b12x_dir}/{DENSE}",
        "B12X_OVERLAY": f"{lock.source}@{lock.commit} lock sha256 {lock.sha256}" if lock else PUBLIC,
    }


def mounted_over(mounts: list[dict], b12x_dir: str) -> list[str]:
    """The container's mounts (docker inspect's Mounts) that replace files of the b12x package, or
    the package itself: what the seat runs there is not what the image's labels describe."""
    inside = b12x_dir.rstrip("/") + "/"
    return [
        f"{m.get('Source')} at {m['Destination']}"
        for m in mounts
        if (m["Destination"].rstrip("/") + "/").startswith(inside)
        or inside.startswith(m["Destination"].rstrip("/") + "/")
    ]


def kernels(labels: dict | None, mounted: Sequence[str] = ()) -> str:
    """The `b12x kernels` condition of a bench run, from its image's labels, unless mounts (the
    profile's extra_mounts, as the original's B12X_OVERLAY did) replace the package at start."""
    if mounted:
        return f"mounted over the image's at start (unpinned): {', '.join(mounted)}"
    labels = labels or {}
    dense = labels.get("io.seatkit.b12x.dense_sha256")
    if dense is None:
        return "unrecorded (the image was not built by `seat build`)"
    which = labels.get("io.seatkit.b12x.overlay", "")
    source = "public (base image)" if which.startswith("none") else f"overlay {which}"
    return f"{source}, b12x {labels.get('io.seatkit.b12x.commit')}, {DENSE} sha256 {dense[:16]}"
