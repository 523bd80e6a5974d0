"""The overlay pinned by overlay/overlay.lock: fetching it, verifying a tree against it, and pinning
another one. The lock's format lives in seatkit/seat/overlay_lock.py, below serve and image."""

from __future__ import annotations

import hashlib
import io
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Sequence
from pathlib import Path

from seatkit import paths
from seatkit.errors import SeatError
from seatkit.seat.overlay_lock import Lock

FETCHED = paths.REPO / "overlay" / "vllm"
GIT_PROTOCOLS = "https:file"  # file: a local path


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def tree_files(root: Path) -> dict[str, str]:
    """Every regular file under root (compiled caches and symlinks aside) and its SHA-256."""
    out = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink() and "__pycache__" not in path.parts:
            out[path.relative_to(root).as_posix()] = _sha256(path)
    return out


def _oddities(root: Path) -> tuple[list[str], list[str]]:
    """Symlinks (to files, to folders, dangling) and compiled caches: the overlay has none."""
    links, caches = [], []
    for path in sorted(root.rglob("*")):
        name = path.relative_to(root).as_posix()
        if path.is_symlink():
            state = "" if path.exists() else " (dangling)"
            links.append(f"{name} -> {os.readlink(path)}{state}")
        elif path.name == "__pycache__" and path.is_dir():
            caches.append(name)
    return links, caches


def verify(root: Path, lock: Lock, links_seen: Sequence[str] = ()) -> dict[str, list[str]]:
    """missing, changed and extra files of a tree against the lock; links and caches it should not have.

    A listed file replaced by a symlink is both changed and a link, whatever it points to.
    links_seen names links ("name -> target") that were in the tree but not made on disk."""
    if not root.is_dir() or root.is_symlink():
        raise SeatError(f"{root} is not a directory")
    found = tree_files(root)
    links, caches = _oddities(root)
    links = sorted([*links, *links_seen])
    linked = {link.split(" -> ", 1)[0] for link in links}
    return {
        "missing": sorted(set(lock.files) - set(found) - linked),
        "changed": sorted(
            {n for n, d in lock.files.items() if n in found and found[n] != d} | (linked & set(lock.files))
        ),
        "extra": sorted(set(found) - set(lock.files)),
        "links": links,
        "caches": caches,
    }


def _git(*args: str, cwd: Path | None = None, env: dict | None = None) -> str:
    # Only the protocols the kit uses: no ext::, no ssh command, whatever the source says.
    done = subprocess.run(
        ["git", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {}), "GIT_ALLOW_PROTOCOL": GIT_PROTOCOLS},
    )
    if done.returncode:
        raise SeatError(f"git {' '.join(args[:3])} failed: {done.stderr.strip()[-400:]}")
    return done.stdout.strip()


def checked_source(value: str, what: str = "the overlay source") -> str:
    """A repository for git to fetch from (a local folder made absolute); never with credentials
    in its URL, which is printed. git takes it after `--`, by the protocols GIT_PROTOCOLS allows."""
    if re.match(r"https://[^/]*@", value):
        raise SeatError(
            f"{what} carries credentials in its URL",
            "give them to git's credential "
            "helper (git config credential.helper), never in the URL: it is printed",
        )
    return str(Path(value).resolve()) if value and Path(value).is_dir() else value


def fetch(lock: Lock, dest: Path = FETCHED, source: str | None = None) -> Path:
    """Fetch exactly the locked commit, check its tree id (git's hash of every file in it: equal
    ids are the same files), then swap it into dest.

    source (a mirror or a local clone) replaces the lock's own: the check is the same, so it
    need not be trusted. Everything happens in a staging folder beside dest; dest changes only
    when all of it checks, so a failed or interrupted fetch leaves the previous state as it was.
    """
    source = checked_source(lock.source if source is None else source)
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".overlay-fetch-", dir=dest.parent))
    try:
        repo = staging / "repo"
        _git("init", "-q", "--", str(repo))
        _git("fetch", "-q", "--depth", "1", "--", source, lock.commit, cwd=repo)
        tree = _git("rev-parse", "--verify", "--end-of-options", f"{lock.commit}:{lock.path}", cwd=repo)
        if tree != lock.tree:
            raise SeatError(
                f"{source}@{lock.commit[:12]}:{lock.path} has tree {tree}, the lock pins {lock.tree}",
                "the source changed or the lock is wrong; nothing was changed",
            )
        files = staging / "files"
        files.mkdir()
        archive = subprocess.run(
            ["git", "archive", "--format=tar", "--end-of-options", f"{lock.commit}:{lock.path}"],
            cwd=repo,
            capture_output=True,
            check=True,
        ).stdout
        extract(io.BytesIO(archive), files, f"{lock.source}@{lock.commit[:12]}")
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
    if not root.is_dir() or root.is_symlink():
        raise SeatError(f"{root} is not a directory")
    root = root.absolute()  # git runs in it: a relative work tree would name a folder inside itself
    links, caches = _oddities(root)
    gits = [p.relative_to(root).as_posix() for p in sorted(root.rglob("*")) if p.name.lower() == ".git"]
    if links or caches or gits:  # git's tree id would count them (or skip .git), the file list not:
        # no fetch could match
        raise SeatError(
            f"{root} holds what a lock cannot pin: "
            + summary({"links": links, "caches": caches, "git folders": gits}),
            "lock a tree of regular files: remove the links, __pycache__ and .git "
            "folders first (or lock a clean checkout)",
        )
    with tempfile.TemporaryDirectory() as tmp:
        env = {
            "GIT_DIR": str(Path(tmp) / "git"),
            "GIT_INDEX_FILE": str(Path(tmp) / "index"),
            "GIT_WORK_TREE": str(root),
        }
        _git("init", "-q", env=env)
        _git("add", "-A", "--force", "--", ".", cwd=root, env=env)
        tree = _git("write-tree", env=env)
    return Lock(url, commit, path, tree, tree_files(root))


def summary(problems: dict[str, list[str]]) -> str:
    return "; ".join(f"{len(v)} {k} (e.g. {', '.join(v[:3])})" for k, v in problems.items() if v)


def extract(stream, dest: Path, what: str, links: list[str] | None = None) -> None:
    """Unpack a tar into dest, refusing any member that would land outside it (`..`, links pointing
    out) or that is a device, with the member named (tarfile's "data" filter); never a traceback.
    With links given, symlinks are not made but named there ("name -> target"): a folder
    copied out of an image may link anywhere in that image, which is a fact, not an attack."""

    def keep(member: tarfile.TarInfo, path: str) -> tarfile.TarInfo | None:
        if links is not None and member.issym():
            links.append(f"{member.name} -> {member.linkname}")
            return None
        return tarfile.data_filter(member, path)

    try:
        with tarfile.open(fileobj=stream, mode="r|*") as tar:
            tar.extractall(dest, filter=keep)
    except tarfile.FilterError as exc:
        raise SeatError(
            f"{what}: refused an unsafe archive member: {exc}",
            "the archive tries to write outside its folder; nothing of it is used",
        ) from None
    except tarfile.TarError as exc:
        raise SeatError(f"{what}: not a readable tar archive ({exc})") from None
