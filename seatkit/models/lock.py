"""profiles/NAME.models.lock: every file of each model folder (path, size, SHA-256), the hub
repository and revision it came from, and one aggregate hash per model.

The aggregate is the SHA-256 of the sorted `sha256  size  path` lines, so two folders with the
same aggregate hold the same bytes under the same names.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath

import yaml

from seatkit import safe_yaml, text
from seatkit.errors import SeatError
from seatkit.files import write_atomic
from seatkit.models import hashing
from seatkit.seat import layout, profiles, what_runs
from seatkit.seat.profiles import Profile
from seatkit.seat.sections import HUB_REVISION, ModelDir

LOCK_BYTES = 16 * 1024 * 1024  # a line per file: room for a model of many thousand shards
HUB_META = Path(".cache") / "huggingface"  # what `hf download --local-dir` keeps beside the files


@dataclass(frozen=True)
class File:
    path: str
    size: int
    sha256: str


@dataclass
class ModelLock:
    repository: str | None
    revision: str | None
    files: list[File] = field(default_factory=list)

    @property
    def sha256(self) -> str:
        lines = "".join(f"{f.sha256}  {f.size}  {f.path}\n" for f in sorted(self.files, key=lambda f: f.path))
        return hashlib.sha256(lines.encode()).hexdigest()

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)


def lock_path(profile: Profile) -> Path | None:
    """profiles/NAME.models.lock beside the profile's file; None for a profile made in memory."""
    return Path(profile.source).with_suffix(".models.lock") if profile.source else None


def pinning(profile: Profile) -> Path | None:
    """The lock that pins the profile's models: its own, else that of the nearest profile it extends
    whose models are the same (a variant that changes a flag keeps its base's pins, and one that
    changes a model keeps none of them)."""
    own = lock_path(profile)
    if own is None or own.exists():
        return own
    for parent in reversed(profile.extended):
        path = Path(parent).with_suffix(".models.lock")
        if path.exists():
            return path if profiles.load(parent).models == profile.models else own
    return own


def refuse_weightless(profile: Profile, locked: dict[str, ModelLock]) -> None:
    """The profile's own files may name no weights while its models lock pins them: random ones
    (load-format dummy) would pass for the locked, unless the profile is an experiment (marked)."""
    where = pinning(profile)
    named = where.name if where else "models lock"
    files = {f"{named} models.{k}": [f.path for f in m.files] for k, m in locked.items()}
    refused = what_runs.refused_weightless(profile.vllm_args, files)
    if refused and profile.experiment is None:
        raise SeatError(
            f"{profile.name}: " + "; ".join(refused),
            "drop load-format dummy, or make the profile an experiment (its results are then marked)",
        )


def model_dir(profile: Profile, key: str, environ=os.environ) -> Path:
    """Where the seat serves the model's files from: a docker seat's knob (what it mounts), else
    the profile's folder; a native seat reads no knob (spec serves host_dir, or SEAT_HOME's build),
    so none may send a verify to another folder than the one it serves."""
    model = profile.models[key]
    knob = f"SEAT_MODEL_{key.upper()}_DIR"
    if environ.get(knob) and profile.runtime == "docker":
        return Path(environ[knob])
    return layout.model(model.build) if model.build else Path(str(model.host_dir))


def hub_repository_folder(folder: Path) -> Path | None:
    """The hub cache's repository folder (models--ORG--NAME) when folder is one of its snapshots
    (models--ORG--NAME/snapshots/REV, whose files link into ../../blobs); else None."""
    real = folder.resolve()
    repo = real.parent.parent
    if real.parent.name == "snapshots" and repo.name.startswith("models--") and (repo / "blobs").is_dir():
        return repo
    return None


def mounted_alone(profile: Profile) -> bool:
    """A docker seat mounts each model folder alone: a link out of it dangles in the container."""
    return profile.runtime == "docker"


def scan(folder: Path, alone: bool = False) -> dict[str, int]:
    """Every file under folder (the hub's download metadata aside) and its size, under its name
    in the folder, through links that stay where the seat can read them: inside folder, or inside
    the hub cache repository whose snapshot it is (its files link into the repository's blobs/),
    unless a container mounts the folder alone. A link that leaves, or a link loop, is refused."""
    if not folder.is_dir():
        raise SeatError(
            f"model folder not found: {folder}",
            "download it (seat model fetch), or set the SEAT_MODEL_<KEY>_DIR knob",
        )
    hub = hub_repository_folder(folder)
    walk = _Walk(folder, folder.resolve() if alone or hub is None else hub, hub)
    top = os.stat(folder.resolve())
    walk.walk(folder.resolve(), PurePosixPath(), frozenset({(top.st_dev, top.st_ino)}))
    return walk.out


@dataclass
class _Walk:
    """One scan: where links may lead (root), and the files found, by their names in folder."""

    folder: Path
    root: Path
    hub: Path | None
    out: dict[str, int] = field(default_factory=dict)

    def walk(self, path: Path, rel: PurePosixPath, seen: frozenset) -> None:
        for entry in sorted(os.scandir(path), key=lambda e: e.name):
            name = rel / entry.name
            if name.parts[:2] == HUB_META.parts:
                continue
            if entry.is_symlink():
                self._inside(Path(entry.path), name)
            try:
                info = os.stat(entry.path)
            except OSError as exc:
                raise SeatError(
                    f"{self.folder}: {name.as_posix()} cannot be read ({exc.strerror})",
                    "a broken link or a vanished file: fetch the model again",
                ) from None
            if stat.S_ISDIR(info.st_mode):
                if (info.st_dev, info.st_ino) in seen:
                    raise SeatError(
                        f"{self.folder}: {name.as_posix()} links back to a folder above it",
                        "remove the link loop",
                    )
                self.walk(Path(entry.path), name, seen | {(info.st_dev, info.st_ino)})
            elif stat.S_ISREG(info.st_mode):
                self.out[name.as_posix()] = info.st_size

    def _inside(self, link: Path, name: PurePosixPath) -> None:
        """Nothing when the link's target stays where the seat can read it; else a SeatError
        saying where it leads."""
        try:
            target = link.resolve()
        except (RuntimeError, OSError):  # Python before 3.13 raises RuntimeError on a loop
            raise SeatError(
                f"{self.folder}: {name.as_posix()} is a link loop", "remove the link loop"
            ) from None
        if target.is_relative_to(self.root):
            return
        if self.root != self.hub:
            into_hub = self.hub is not None and target.is_relative_to(self.hub)
            hub = " (into the hub cache's blobs/, which it does not see)" if into_hub else ""
            raise SeatError(
                f"{self.folder}: {name.as_posix()} links outside the model folder, to {target}",
                "copy the files in (hf download --local-dir makes real files): "
                f"a container mounts the model folder alone{hub}",
            )
        raise SeatError(
            f"{self.folder}: {name.as_posix()} links outside its hub cache repository {self.root}, "
            f"to {target}",
            "a snapshot's files link into its own repository's blobs/ alone: fetch the model again",
        )


def identity(path: Path) -> list[int]:
    """What a file resolves to now: device, inode, size and mtime of the link's target. A link
    re-pointed to another blob of the same size changes it, though no byte was written."""
    info = os.stat(path)
    return [info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns]


def hub_revision(folder: Path) -> str | None:
    """The commit of a hub cache snapshot (its folder's name), else the one `hf download
    --local-dir` recorded (first line of each file's .metadata), when all agree."""
    if hub_repository_folder(folder) and re.fullmatch(HUB_REVISION, folder.resolve().name):
        return folder.resolve().name
    found = set()
    for meta in (folder / HUB_META / "download").rglob("*.metadata"):
        first = meta.read_text(errors="replace").splitlines()[:1]  # a killed download leaves non-text bytes
        if first and re.fullmatch(r"[0-9a-f]{40}", first[0]):
            found.add(first[0])
    return found.pop() if len(found) == 1 else None


def make(
    profile: Profile, on_bytes: hashing.OnBytes | None = None, workers: int | None = None
) -> dict[str, ModelLock]:
    """Hash every file of every model folder of the profile."""
    locks = {}
    for key, model in profile.models.items():
        folder = model_dir(profile, key)
        sizes = scan(folder, mounted_alone(profile))
        digests = hashing.hash_files([folder / p for p in sizes], workers, on_bytes)
        revision = model.revision or hub_revision(folder)
        locks[key] = ModelLock(
            model.repository, revision, [File(p, sizes[p], digests[folder / p]) for p in sizes]
        )
    return locks


def total_bytes(profile: Profile) -> int:
    alone = mounted_alone(profile)
    return sum(sum(scan(model_dir(profile, key), alone).values()) for key in profile.models)


def dump(profile: Profile, locks: dict[str, ModelLock]) -> str:
    head = (
        f"# Model weights of profile {profile.name}, pinned by `seat model lock {profile.name}`:\n"
        "# every file's size and SHA-256, and an aggregate per model. `seat model verify` checks\n"
        "# them; preflight (`seat up` and the script) checks every size. Data, not code.\n"
    )
    body = {
        "profile": profile.name,
        "models": {
            key: {
                "repository": lock.repository,
                "revision": lock.revision,
                "sha256": lock.sha256,
                "size": lock.size,
                "files": [asdict(f) for f in lock.files],
            }
            for key, lock in locks.items()
        },
    }
    return head + yaml.safe_dump(body, sort_keys=False, width=200)


def write(profile: Profile, locks: dict[str, ModelLock]) -> Path:
    path = lock_path(profile)
    if path is None:
        raise SeatError(f"profile {profile.name} has no file to keep a lock beside")
    write_atomic(path, dump(profile, locks))
    return path


def read(profile: Profile) -> dict[str, ModelLock] | None:
    """The profile's lock (pinning); None when it has none. A lock that names other models is an error."""
    path = pinning(profile)
    if path is None or not path.exists():
        return None
    where = f"{path}"
    try:
        data = safe_yaml.read(path, "models lock", LOCK_BYTES)
        locks = {
            key: ModelLock(
                m["repository"],
                m["revision"],
                [File(str(f["path"]), int(f["size"]), str(f["sha256"])) for f in m["files"]],
            )
            for key, m in data["models"].items()
        }
        stated = {key: m["sha256"] for key, m in data["models"].items()}
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError):  # OverflowError: a size of .inf
        raise SeatError(
            f"{where}: not a models lock: a field is missing or holds the wrong kind of value",
            f"run `seat model lock {profile.name}` again",
        ) from None
    for key, lock in locks.items():
        if lock.sha256 != stated[key]:
            raise SeatError(
                f"{where}: model {key}'s aggregate hash does not match its files",
                "the lock was edited by hand; lock again",
            )
    if set(locks) != set(profile.models):
        raise SeatError(
            f"{where} locks models {text.one_line(', '.join(sorted(map(str, locks))))}, "
            f"the profile has {', '.join(sorted(profile.models))}",
            f"run `seat model lock {profile.name}` again",
        )
    for key, lock in locks.items():
        _same_origin(profile.models[key], lock, key, where)
    return locks


def _same_origin(model: ModelDir, lock: ModelLock, key: str, where: str) -> None:
    for name in ("repository", "revision"):
        stated, locked = getattr(model, name), getattr(lock, name)
        if stated is not None and stated != locked:
            raise SeatError(
                f"{where}: model {key} was locked "
                + (f"at {name} {locked}" if locked else f"with no {name}")
                + f", the profile names {stated}",
                "fetch that revision and lock again",
            )


def hashes(profile: Profile) -> dict[str, str] | None:
    """Each model's aggregate hash, for bench conditions; None without a lock."""
    locks = read(profile)
    return {key: lock.sha256 for key, lock in locks.items()} if locks else None
