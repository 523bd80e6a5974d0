"""Every file of an image against its base, read from outside: `seat build` adds the locked overlay
and the kit's own files, nothing else. Any other path that differs is code the lock does not pin:
a .pth file (site runs it at every interpreter start), a package's entry points (vLLM imports its
plugins through them), a module in the vllm package the lock does not list, a changed standard
library or shared library. What may differ is named by sources the image cannot forge: the base
`seat build` pinned, the lock and the kit's files; never by the image's labels or its own lock."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from collections.abc import Iterable
from pathlib import PurePosixPath
from posixpath import normpath

from seatkit import safe_yaml
from seatkit.files import write_atomic
from seatkit.image.container import created
from seatkit.image.dockerfile import IMAGE_FILES, SCRIPTS
from seatkit.seat import layout
from seatkit.seat.overlay_lock import Lock

KIT = "/opt/seatkit"  # where the Dockerfile copies the kit's scripts and the locks
MANIFEST_BYTES = 512 << 20  # a cached manifest: a line per file of a whole image
CHUNK = 1 << 20

Entry = list  # [kind, permission bits, content]: ("file", mode, sha256), ("link", 0, target), ("dir", 0, "")


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def additions(vllm_dir: str, lock: Lock, b12x_dir: str, b12x_lock: Lock | None) -> dict[str, str]:
    """Every file `seat build` may add or replace, by its SHA-256: the locked overlay (and b12x's),
    the kit's scripts and the locks it copies beside them."""
    out = {f"{vllm_dir}/{name}": digest for name, digest in lock.files.items()}
    out |= {f"{KIT}/{script}": _sha256((IMAGE_FILES / script).read_bytes()) for script in SCRIPTS}
    out[f"{KIT}/overlay.lock"] = _sha256(lock.dump().encode())
    if b12x_lock is not None:
        out |= {f"{b12x_dir}/{name}": digest for name, digest in b12x_lock.files.items()}
        out[f"{KIT}/b12x.lock"] = _sha256(b12x_lock.dump().encode())
    return out


def bytecode(folder: str, lock: Lock | None, paths: Iterable[str]) -> set[str]:
    """The compiled bytecode among paths of each locked .py file under folder
    (<dir>/__pycache__/<stem>.*.pyc): `seat build` removes the base's of each file it copies."""
    sources = {f"{folder}/{name}" for name in (lock.files if lock else ()) if name.endswith(".py")}
    found = set()
    for path in paths:
        at = PurePosixPath(path)
        if at.parent.name == "__pycache__" and at.suffix == ".pyc":
            if f"{at.parent.parent}/{at.name.split('.')[0]}.py" in sources:
                found.add(path)
    return found


class _Chunks(io.RawIOBase):
    """The engine's archive stream (an iterable of byte chunks) as a file tarfile can read."""

    def __init__(self, chunks: Iterable[bytes]):
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


def scan(container) -> dict[str, Entry]:
    """Every path of the container's root: a file by its permission bits and SHA-256, a link by
    where it points, a hard link as what it links to."""
    stream, _ = container.get_archive("/")
    entries: dict[str, Entry] = {}
    with tarfile.open(fileobj=io.BufferedReader(_Chunks(stream), CHUNK), mode="r|") as tar:
        for member in tar:
            path = normpath("/" + member.name.lstrip("/"))
            if member.isreg():
                digest, file = hashlib.sha256(), tar.extractfile(member)
                while file and (block := file.read(CHUNK)):
                    digest.update(block)
                entries[path] = ["file", member.mode & 0o7777, digest.hexdigest()]
            elif member.islnk():
                entries[path] = entries.get(normpath("/" + member.linkname.lstrip("/")), ["link", 0, ""])
            elif member.issym():
                entries[path] = ["link", 0, member.linkname]
            elif member.isdir():
                entries[path] = ["dir", 0, ""]
            else:
                entries[path] = ["other", member.mode & 0o7777, member.type.decode(errors="replace")]
    return entries


def manifest(image_id: str) -> dict[str, Entry]:
    """scan() of an image, kept in SEAT_HOME by its id: the id is the hash of its configuration,
    which names every layer by the hash of its content, so an id's files never change."""
    kept = layout.saved_images() / "files" / (image_id.replace(":", "_") + ".json")
    try:
        entries = safe_yaml.read_json(kept, "image file list", MANIFEST_BYTES)
        if isinstance(entries, dict):
            return entries
    except (OSError, ValueError):
        pass
    with created(image_id) as container:
        entries = scan(container)
    write_atomic(kept, json.dumps(entries))
    return entries


def _why(path: str, vllm_dir: str) -> str:
    """What a differing path does to the server, where it is one the kit knows."""
    if path.endswith(".pth"):
        return f"{path} (a .pth file: site runs it at every start)"
    if PurePosixPath(path).name == "entry_points.txt":
        return f"{path} (entry points: vLLM imports its plugins through them)"
    if path.startswith(vllm_dir + "/"):
        return f"{path} (in the vllm package, not in the lock)"
    return path


# What a running seat writes into its own layer besides bytecode (`docker diff` of the serving vLLM
# CPU seat: /tmp, its mount points, docker's init): scratch, caches and run-time state. A folder's
# own change is judged by what changed inside it.
RUN_TIME = ("/tmp", "/var/tmp", "/root/.cache", "/root/.config/vllm", "/dev/shm", "/run")
ENGINE = ("/sbin/docker-init", "/usr/sbin/docker-init")  # docker.init's binary, mounted at start
ALWAYS = ("/etc/ld.so.preload",)  # the loader preloads it into every program, from wherever it is
CODE = {"bin", "sbin", "lib", "lib32", "lib64", "libexec"}  # folders programs and libraries load from
KINDS = {0: "changed", 1: "added", 2: "removed"}  # docker's changes list (GET /containers/{id}/changes)


def _under(path: str, folders: Iterable[str]) -> bool:
    return any(path == f or path.startswith(f.rstrip("/") + "/") for f in folders)


def _layer_why(path: str, vllm_dir: str) -> str:
    """_why, for a path of a running container's own layer: what changing it does to the server."""
    parts = set(PurePosixPath(path).parts)
    if (
        path.endswith(".pth")
        or path.startswith(vllm_dir + "/")
        or PurePosixPath(path).name == "entry_points.txt"
    ):
        return _why(path, vllm_dir).replace("not in the lock", "changed in the running container")
    if path in ALWAYS:
        return f"{path} (preloaded into every program)"
    if _under(path, ("/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/ld.so.cache")):
        return f"{path} (where the loader finds shared libraries)"
    if parts & {"site-packages", "dist-packages"}:
        return f"{path} (where Python imports packages from)"
    if _under(path, (KIT,)):
        return f"{path} (the kit's start check and locks)"
    if parts & CODE:
        return f"{path} (where programs and libraries are loaded from)"
    return path


def layer(changes: list[dict] | None, vllm_dir: str, mounts: Iterable[str] = ()) -> list[str]:
    """A running (or stopped) container's changes against its image, from the engine (kind 0
    changed, 1 added, 2 removed): one finding per path outside the run-time places and the
    container's own mount points (docker makes those); .pth files and the loader's preload file
    wherever they are. A folder holding other changes is judged by them (its time changed)."""
    paths = {c["Path"]: c["Kind"] for c in changes or []}
    # Only a mount point docker made (an absolute path below /) stands for the folder under it.
    allowed = (*RUN_TIME, *(m for m in mounts if m.startswith("/") and m.strip("/")))
    holding = {str(parent) for path in paths for parent in PurePosixPath(path).parents}
    found = []
    for path, kind in sorted(paths.items()):
        folder = kind != 2 and path in holding
        # Bytecode too: the image sets PYTHONDONTWRITEBYTECODE, so the seat itself writes none.
        if path.endswith(".pth") or path in ALWAYS or not (folder or _under(path, allowed) or path in ENGINE):
            found.append(f"{_layer_why(path, vllm_dir)} {KINDS.get(kind, f'kind {kind}')}")
    return found


def written(container, vllm_dir: str) -> list[str]:
    """layer() on what the engine lists as written into the container since it was made (docker cp,
    an exec), against the mount points it was started with: the one judgement of a container's
    own layer (doctor's overlay row, `seat overlay verify --container`, the bench's mark)."""
    mounts = [m.get("Destination", "") for m in container.attrs.get("Mounts") or []]
    return layer(container.diff(), vllm_dir, mounts)


def differences(
    image: dict[str, Entry],
    base: dict[str, Entry],
    allowed: dict[str, str],
    judged: Iterable[str] = (),
    removable: Iterable[str] = (),
) -> dict[str, list[str]]:
    """The paths added, changed and removed against the base, beyond the allowed files (by their
    SHA-256) and the folders on their way; `judged` paths are checked elsewhere (the locked files,
    one by one against the lock); `removable` ones the image may lack (bytecode(): a missing .pyc
    only makes Python compile the source)."""
    skip, gone = set(judged), set(removable)
    folders = {str(parent) for path in allowed for parent in PurePosixPath(path).parents}
    found: dict[str, list[str]] = {"added": [], "changed": [], "removed": []}
    for path in sorted(image.keys() | base.keys()):
        mine, theirs = image.get(path), base.get(path)
        if path in skip or mine == theirs or mine is None and path in gone:
            continue
        if path in allowed and mine is not None and mine[0] == "file" and mine[2] == allowed[path]:
            continue
        if mine and mine[0] == "dir" and (theirs and theirs[0] == "dir" or path in folders):
            continue  # a folder's own mode and times run nothing
        found["added" if theirs is None else "removed" if mine is None else "changed"].append(path)
    return found


def problems(found: dict[str, list[str]], base_ref: str, vllm_dir: str, most: int = 5) -> list[str]:
    """One line per kind of difference, the paths the kit knows the danger of named first."""
    out = []
    for kind, paths in found.items():
        if paths:
            shown = sorted(paths, key=lambda p: _why(p, vllm_dir) == p)
            named = ", ".join(_why(p, vllm_dir) for p in shown[:most])
            more = f", +{len(paths) - most} more" if len(paths) > most else ""
            out.append(f"{len(paths)} path(s) {kind} against the base {base_ref}: {named}{more}")
    return out
