"""SHA-256 of many files at once, for folders of multi-GB shards.

Threads, not processes: hashlib releases the GIL while it hashes a large buffer, so threads run
on every core without pickling or copying (tests/benchmarks/model_hash.py measures both). Each
thread reads into one reused 4 MiB buffer, the size at which sha256sum's throughput flattens.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from seatkit.errors import SeatError

CHUNK = 4 << 20
OnBytes = Callable[[int], None]


def sha256_file(
    path: Path, on_bytes: OnBytes | None = None, chunk: int = CHUNK, stop: threading.Event | None = None
) -> str:
    digest = hashlib.sha256()
    buffer = bytearray(chunk)
    view = memoryview(buffer)
    try:
        with open(path, "rb", buffering=0) as fh:
            while n := fh.readinto(buffer):
                if stop is not None and stop.is_set():
                    raise InterruptedError("hashing stopped")
                digest.update(view[:n])
                if on_bytes:
                    on_bytes(n)
    except (FileNotFoundError, PermissionError, IsADirectoryError) as exc:
        raise SeatError(
            f"cannot read {path}: {exc.strerror}",
            "another process changed the folder, or its permissions; run it again",
        ) from None
    return digest.hexdigest()


def workers_default() -> int:
    return len(os.sched_getaffinity(0))


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:  # gone since the walk: sha256_file says so
        return 0


def hash_files(
    files: list[Path], workers: int | None = None, on_bytes: OnBytes | None = None
) -> dict[Path, str]:
    """Each file's SHA-256, `workers` files at a time, largest first (so no big file ends alone)."""
    order = sorted(files, key=_size, reverse=True)
    stop = threading.Event()
    with ThreadPoolExecutor(workers or workers_default()) as pool:
        try:
            return dict(
                zip(order, pool.map(lambda p: sha256_file(p, on_bytes, stop=stop), order), strict=True)
            )
        finally:  # Ctrl-C or an error: drop the queued files, stop the others at their next chunk
            stop.set()
            pool.shutdown(cancel_futures=True)
