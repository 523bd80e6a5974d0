"""The overlay pinned by overlay/overlay.lock: fetching it, verifying a tree against it, and pinning
another one. The lock's format lives in seatkit/overlay_lock.py, below serve and image."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from seatkit import paths
from seatkit.errors import SeatError
from seatkit.overlay_lock import LOCK, Lock, load, parse  # noqa: F401 (the lock's format, re-exported)

FETCHED = paths.REPO / "overlay" / "vllm"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def tree_files(root: Path) -> dict[str, str]:
    """Every regular file under root (compiled caches aside) and its SHA-256."""
    out = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            out[path.relative_to(root).as_posix()] = _sha256(path)
    return out


def verify(root: Path, lock: Lock) -> dict[str, list[str]]:
    """missing, changed and extra files of a tree against the lock."""
    if not root.is_dir():
        raise SeatError(f"{root} is not a directory")
    found = tree_files(root)
    return {"missing": sorted(set(lock.files) - set(found)),
            "changed": sorted(n for n, d in lock.files.items() if n in found and found[n] != d),
            "extra": sorted(set(found) - set(lock.files))}


def _git(*args: str, cwd: Path | None = None, env: dict | None = None) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, **(env or {})})
    if done.returncode:
        raise SeatError(f"git {' '.join(args[:3])} failed: {done.stderr.strip()[-400:]}")
    return done.stdout.strip()


def checked_source(value: str, what: str = "the overlay source") -> str:
    """A repository git may fetch from: an https URL or a local directory, never an option."""
    if re.match(r"https://[^/]*@", value):  # the source is printed in progress and errors
        raise SeatError(f"{what} carries credentials in its URL", "give them to git's credential "
                        "helper (git config credential.helper), never in the URL: it is printed")
    if re.fullmatch(r"https://[^\s/@-][^\s]*", value):
        return value
    if value and not value.startswith("-") and "://" not in value and Path(value).is_dir():
        return str(Path(value).resolve())
    raise SeatError(f"{what} must be an https URL or a local directory, got {value!r}",
                    "a mirror (https://...) or a local clone holding the locked commit")


def fetch(lock: Lock, dest: Path = FETCHED, source: str | None = None) -> Path:
    """Fetch exactly the locked commit, check its tree id and every file, then swap it into dest.

    source (a mirror or a local clone) replaces the lock's own: the checks are the same, so it
    need not be trusted. Everything happens in a staging folder beside dest; dest changes only
    when all of it checks, so a failed or interrupted fetch leaves the previous state as it was.
    """
    source = checked_source(lock.source if source is None else source)
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".overlay-fetch-", dir=dest.parent))
    try:
        repo = staging / "repo"
        _git("init", "-q", str(repo))
        _git("fetch", "-q", "--depth", "1", "--", source, lock.commit, cwd=repo)
        tree = _git("rev-parse", f"{lock.commit}:{lock.path}", cwd=repo)
        if tree != lock.tree:
            raise SeatError(f"{source}@{lock.commit[:12]}:{lock.path} has tree {tree}, the lock "
                            f"pins {lock.tree}", "the source changed or the lock is wrong; nothing was changed")
        files = staging / "files"
        files.mkdir()
        archive = subprocess.run(["git", "archive", "--format=tar", f"{lock.commit}:{lock.path}"],
                                 cwd=repo, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(files)], input=archive, check=True)
        problems = verify(files, lock)
        if any(problems.values()):
            raise SeatError("the fetched overlay does not match the lock: " + summary(problems),
                            "nothing was changed")
        old = staging / "previous"
        if dest.exists():
            dest.rename(old)
        files.rename(dest)
        return dest
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def lock_from(root: Path, source: str, path: str = "overlay/vllm") -> Lock:
    """Pin a directory: its files' hashes and the git tree id git gives that content."""
    if "@" not in source:
        raise SeatError(f"--source must be URL@COMMIT, got {source!r}")
    url, commit = source.rsplit("@", 1)
    with tempfile.TemporaryDirectory() as tmp:
        env = {"GIT_DIR": str(Path(tmp) / "git"), "GIT_INDEX_FILE": str(Path(tmp) / "index"),
               "GIT_WORK_TREE": str(root)}
        _git("init", "-q", env=env)
        _git("add", "-A", "--force", ".", cwd=root, env=env)
        tree = _git("write-tree", env=env)
    return Lock(url, commit, path, tree, tree_files(root))


def summary(problems: dict[str, list[str]]) -> str:
    return "; ".join(f"{len(v)} {k} (e.g. {', '.join(v[:3])})" for k, v in problems.items() if v)
