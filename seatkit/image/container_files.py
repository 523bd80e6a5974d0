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


def stat(container, path: str) -> dict | None:
    """The engine's stat of a path in the container (mode, linkTarget), None when there is none."""
    api = container.client.api
    answer = api.head(api._url("/containers/{0}/archive", container.id), params={"path": path})
    header = answer.headers.get("X-Docker-Container-Path-Stat")
    return json.loads(base64.b64decode(header)) if answer.ok and header else None


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
