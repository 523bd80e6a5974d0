"""Reading an image's files from outside it: a created, never-started container asked through the
engine's archive API, so nothing inside the image runs or chooses what is read."""

from __future__ import annotations

import base64
import io
import json
import tarfile
from pathlib import PurePosixPath
from posixpath import normpath

from seatkit.seat import what_runs

MAX_READ = 256 << 20  # one file read whole (an interpreter, a script); a bigger one is no base's
IS_DIR = 1 << 31  # Go's os.ModeDir, in the engine's stat


SNAPSHOT_FILE = 4 << 20  # a Snapshot keeps the bytes of files up to this size (source, bytecode)
IS_LINK = 1 << 27  # Go's os.ModeSymlink
MISS = object()  # a Snapshot's "ask the engine"


class Snapshot:
    """A container read once below a folder (one archive of it), answering stat and read there as
    the engine would: a check that judges every locked file asks the engine once, not a dozen times
    a file. What it cannot answer for as the engine would (a path through a link, not normal, or
    outside the folder; a file bigger than SNAPSHOT_FILE) is asked of the engine."""

    def __init__(self, container, root: str):
        self.container, self.root = container, normpath(root)
        self.entries: dict[str, tuple] | None = (
            None  # relative path -> ("file", mode, bytes | None) | ("link", target) | ("dir",)
        )
        found = stat(container, self.root)
        if not is_dir(found) or (found or {}).get("linkTarget"):
            return  # a folder reached through a link: every path is the engine's to resolve
        from docker.errors import NotFound

        try:
            stream, _ = container.get_archive(self.root)
        except NotFound:  # gone since the stat: the engine answers each path (none)
            return
        self.entries = {}
        with tarfile.open(fileobj=io.BufferedReader(Chunks(stream), 1 << 20), mode="r|") as tar:
            for member in tar:
                self._add(member, tar)

    def _add(self, member: tarfile.TarInfo, tar: tarfile.TarFile) -> None:
        assert self.entries is not None
        rel = "/".join(PurePosixPath(member.name).parts[1:])  # below the archive's top folder
        for parent in PurePosixPath(rel).parents:
            self.entries.setdefault(str(parent), ("dir",))
        if member.isreg():
            file = tar.extractfile(member) if member.size <= SNAPSHOT_FILE else None
            self.entries[rel] = ("file", member.mode & 0o7777, file.read() if file else None)
        elif member.islnk():  # a hard link: the file it names, when that is below root
            target = "/".join(PurePosixPath(member.linkname).parts[1:])
            self.entries[rel] = self.entries.get(target, ("file", member.mode & 0o7777, None))
        elif member.issym():
            self.entries[rel] = ("link", member.linkname)
        elif member.isdir():
            self.entries[rel] = ("dir",)
        else:
            self.entries[rel] = ("other",)

    def __getattr__(self, name):  # id, client, get_archive: the container's own
        return getattr(self.container, name)

    def answer(self, path: str):
        """The entry at path (None: there is none), or MISS when only the engine can say."""
        if self.entries is None or normpath(path) != path:
            return MISS
        rel = PurePosixPath(path).relative_to(self.root) if path.startswith(self.root + "/") else None
        if rel is None:
            return ("dir",) if path == self.root else MISS
        for parent in list(rel.parents)[:-1]:  # a folder on the way that is a link: the engine's
            if self.entries.get(str(parent), ("dir",))[0] != "dir":
                return MISS
        found = self.entries.get(str(rel))
        return MISS if found is not None and found[0] == "other" else found


class Chunks(io.RawIOBase):
    """The engine's archive stream (an iterable of byte chunks) as a file tarfile can read."""

    def __init__(self, chunks):
        self.chunks, self.rest = iter(chunks), memoryview(b"")

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while not self.rest:
            chunk = next(self.chunks, None)
            if chunk is None:
                return 0
            self.rest = memoryview(chunk)
        size = min(len(buffer), len(self.rest))
        buffer[:size], self.rest = self.rest[:size], self.rest[size:]
        return size


def stat(container, path: str) -> dict | None:
    """The engine's stat of a path in the container (mode, linkTarget), None when there is none."""
    if isinstance(container, Snapshot):
        found = container.answer(path)
        if found is not MISS:
            return _stat_of(path, found)
        container = container.container
    api = container.client.api
    answer = api.head(api._url("/containers/{0}/archive", container.id), params={"path": path})
    header = answer.headers.get("X-Docker-Container-Path-Stat")
    return json.loads(base64.b64decode(header)) if answer.ok and header else None


def _stat_of(path: str, entry: tuple | None) -> dict | None:
    """A Snapshot's entry as the engine's stat gives it: the fields the kit reads."""
    if entry is None:
        return None
    name = PurePosixPath(path).name
    if entry[0] == "link":
        return {"name": name, "mode": IS_LINK | 0o777, "linkTarget": entry[1]}
    return {"name": name, "mode": IS_DIR if entry[0] == "dir" else entry[1], "linkTarget": ""}


def is_dir(found: dict | None) -> bool:
    return bool(found and found.get("mode", 0) & IS_DIR)


def _archive(container, path: str) -> bytes | None:
    """The engine's tar of a path (None when absent or bigger than MAX_READ)."""
    from docker.errors import NotFound

    try:
        stream, _ = container.get_archive(path)
    except NotFound:
        return None
    data = bytearray()
    for chunk in stream:
        data += chunk
        if len(data) > MAX_READ:
            return None
    return bytes(data)


def names(container, folder: str) -> list[str]:
    """The names in a folder of the container, as its links place the folder (none when absent)."""
    data = _archive(container, lands(container, folder))
    if data is None:
        return []
    with tarfile.open(fileobj=io.BytesIO(data), mode="r|") as tar:
        parts = [PurePosixPath(member.name).parts for member in tar]
    return sorted({p[1] for p in parts if len(p) > 1})


def read(container, path: str, hops: int = 8) -> bytes | None:
    """One regular file's bytes, following symlinks as exec and open do (None when absent)."""
    if isinstance(container, Snapshot):
        found = container.answer(path)
        if found is None or found is not MISS and found[0] == "dir":
            return None
        if found is not MISS and found[0] == "link":
            return read(container, str(PurePosixPath(path).parent / found[1]), hops - 1) if hops else None
        if found is not MISS and found[2] is not None:
            return found[2]
        container = container.container
    data = _archive(container, path)
    if data is None:
        return None
    with tarfile.open(fileobj=io.BytesIO(data), mode="r|") as tar:
        for member in tar:
            if member.issym() and hops:
                return read(container, str(PurePosixPath(path).parent / member.linkname), hops - 1)
            file = tar.extractfile(member) if member.isreg() else None
            return file.read() if file else None
    return None


def same_as_base(inside, base, path: str) -> bool:
    return base is not None and read(inside, path) == read(base, path) is not None


def which(container, name: str, search: str) -> str | None:
    """Where execvp finds name on PATH: the first folder holding it (an empty entry is the cwd)."""
    for folder in search.split(":"):
        found = stat(container, f"{folder or '.'}/{name}")
        if found and not is_dir(found):
            return f"{folder}/{name}"
    return None


def lands(container, target: str, hops: int = 16) -> str:
    """Where docker puts a mount of target: each folder on the way resolved through the image's
    links, as docker resolves them inside the container's root."""
    at = PurePosixPath("/")
    rest = list(what_runs.where(target).parts[1:])
    while rest:
        step = at / rest.pop(0)
        link = (stat(container, str(step)) or {}).get("linkTarget") if hops else None
        if link:
            hops -= 1
            parts = PurePosixPath(link).parts
            rest = list(parts[1:] if link.startswith("/") else parts) + rest
            at = PurePosixPath("/") if link.startswith("/") else at
        else:
            at = PurePosixPath("/" + normpath(str(step)).lstrip("/"))
    return str(at)
