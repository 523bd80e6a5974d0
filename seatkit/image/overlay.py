"""overlay/overlay.lock: where the overlay comes from (repository, commit, path, git tree) and the
SHA-256 of every file; fetching it, verifying a tree against it, and pinning another one.

The lock's body is `sha256sum` output (two spaces, path relative to the overlay root), so
`sha256sum -c` can check it too; its header lines are `# key: value`.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from seatkit import paths
from seatkit.errors import SeatError

LOCK = paths.REPO / "overlay" / "overlay.lock"
FETCHED = paths.REPO / "overlay" / "vllm"
HEADER = ("source", "commit", "path", "tree")
LINE = re.compile(r"^([0-9a-f]{64})  (\S(?:.*\S)?)$")
# Where an overlay may come from: an https URL or an absolute local path, never a git option.
SOURCE = re.compile(r"https://[A-Za-z0-9.-]+(:[0-9]+)?(/[A-Za-z0-9._~%+@-]*)*|(/[A-Za-z0-9._+@-]+)+/?")
REPO_PATH = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._+-]*(/[A-Za-z0-9_][A-Za-z0-9._+-]*)*")
GIT_PROTOCOLS = "https:file"  # file: a local path


@dataclass
class Lock:
    source: str
    commit: str
    path: str
    tree: str
    files: dict[str, str] = field(default_factory=dict)

    def dump(self) -> str:
        head = ["# seatkit overlay lock: the overlay layered onto the base image, pinned file by file.",
                "# Checked by `seat overlay fetch` and `seat overlay verify`; body lines are sha256sum format."]
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
        if name.startswith("/") or ".." in Path(name).parts:
            raise SeatError(f"{where}:{number}: path must stay inside the overlay, got {name!r}")
        if name in files:
            raise SeatError(f"{where}:{number}: {name} is listed twice")
        files[name] = digest
    missing = [key for key in HEADER if not header.get(key)]
    if missing:
        raise SeatError(f"{where}: header lacks {', '.join(missing)}", "each as a '# key: value' line")
    if not re.fullmatch(r"[0-9a-f]{40}", header["commit"]) or not re.fullmatch(r"[0-9a-f]{40}", header["tree"]):
        raise SeatError(f"{where}: commit and tree must be 40-hex git object ids")
    if not files:
        raise SeatError(f"{where}: no files listed")
    check_source(header["source"], where)
    if not REPO_PATH.fullmatch(header["path"]) or ".." in header["path"].split("/"):
        raise SeatError(f"{where}: path must be a folder inside the repository, got {header['path']!r}")
    return Lock(header["source"], header["commit"], header["path"], header["tree"], files)


def check_source(source: str, where: str = "source") -> str:
    if not SOURCE.fullmatch(source) or ".." in source.split("/"):
        raise SeatError(f"{where}: the overlay source must be an https:// URL or an absolute local path, "
                        f"got {source!r}", "git fetches from nothing else")
    return source


def load(path: Path = LOCK) -> Lock:
    try:
        return parse(path.read_text(), str(path))
    except FileNotFoundError:
        raise SeatError(f"no overlay lock at {path}") from None


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


def verify(root: Path, lock: Lock) -> dict[str, list[str]]:
    """missing, changed and extra files of a tree against the lock; links and caches it should not have.

    A listed file replaced by a symlink is both changed and a link, whatever it points to."""
    if not root.is_dir() or root.is_symlink():
        raise SeatError(f"{root} is not a directory")
    found = tree_files(root)
    links, caches = _oddities(root)
    return {"missing": sorted(n for n in set(lock.files) - set(found)
                              if not any(l.startswith(n + " -> ") for l in links)),
            "changed": sorted({n for n, d in lock.files.items() if n in found and found[n] != d}
                              | {n for n in lock.files if (root / n).is_symlink()}),
            "extra": sorted(set(found) - set(lock.files)),
            "links": links, "caches": caches}


def _git(*args: str, cwd: Path | None = None, env: dict | None = None) -> str:
    # Only the protocols the kit uses: no ext::, no ssh command, whatever the source says.
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, **(env or {}), "GIT_ALLOW_PROTOCOL": GIT_PROTOCOLS})
    if done.returncode:
        raise SeatError(f"git {' '.join(args[:3])} failed: {done.stderr.strip()[-400:]}")
    return done.stdout.strip()


def fetch(lock: Lock, dest: Path = FETCHED) -> Path:
    """Fetch exactly the locked commit, check its tree id and every file, then swap it into dest.

    Everything happens in a staging folder beside dest; dest changes only when all of it checks,
    so a failed or interrupted fetch leaves the previous state as it was.
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".overlay-fetch-", dir=dest.parent))
    try:
        repo = staging / "repo"
        _git("init", "-q", "--", str(repo))
        _git("fetch", "-q", "--depth", "1", "--", check_source(lock.source), lock.commit, cwd=repo)
        tree = _git("rev-parse", "--verify", "--end-of-options", f"{lock.commit}:{lock.path}", cwd=repo)
        if tree != lock.tree:
            raise SeatError(f"{lock.source}@{lock.commit[:12]}:{lock.path} has tree {tree}, the lock "
                            f"pins {lock.tree}", "the source changed or the lock is wrong; nothing was changed")
        files = staging / "files"
        files.mkdir()
        archive = subprocess.run(["git", "archive", "--format=tar", "--end-of-options",
                                  f"{lock.commit}:{lock.path}"], cwd=repo, capture_output=True,
                                 check=True).stdout
        extract(io.BytesIO(archive), files, f"{lock.source}@{lock.commit[:12]}")
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
    check_source(url, "--source")
    with tempfile.TemporaryDirectory() as tmp:
        env = {"GIT_DIR": str(Path(tmp) / "git"), "GIT_INDEX_FILE": str(Path(tmp) / "index"),
               "GIT_WORK_TREE": str(root)}
        _git("init", "-q", env=env)
        _git("add", "-A", "--force", "--", ".", cwd=root, env=env)
        tree = _git("write-tree", env=env)
    return Lock(url, commit, path, tree, tree_files(root))


def summary(problems: dict[str, list[str]]) -> str:
    return "; ".join(f"{len(v)} {k} (e.g. {', '.join(v[:3])})" for k, v in problems.items() if v)


def _strict_filter(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo:
    """tarfile's "data" filter, except that an absolute name is refused rather than made relative."""
    if member.name.startswith("/"):
        raise tarfile.AbsolutePathError(member)
    return tarfile.data_filter(member, dest)


def extract(stream, dest: Path, what: str) -> None:
    """Unpack a tar into dest, refusing any member that would land outside it (absolute names,
    `..`, links pointing out) or that is a device, with the member named; never a traceback."""
    try:
        with tarfile.open(fileobj=stream, mode="r|*") as tar:
            tar.extractall(dest, filter=_strict_filter)
    except tarfile.FilterError as exc:
        raise SeatError(f"{what}: refused an unsafe archive member: {exc}",
                        "the archive tries to write outside its folder; nothing of it is used") from None
    except tarfile.TarError as exc:
        raise SeatError(f"{what}: not a readable tar archive ({exc})") from None
