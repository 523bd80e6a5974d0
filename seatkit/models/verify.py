"""`seat model verify`: each model folder against the lock (missing, changed, extra files).

Sizes alone cost a directory walk (preflight runs them every time); full hashing reads every byte
and is opt-in. Every full verify is recorded under SEAT_HOME/verified/ for `seat doctor` and `seat setup`.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from seatkit import safe_yaml
from seatkit.errors import SeatError
from seatkit.files import write_atomic
from seatkit.models import hashing
from seatkit.models.lock import ModelLock, identity, model_dir, mounted_alone, read, scan
from seatkit.seat import layout
from seatkit.seat.profiles import Profile


def compare(
    folder: Path,
    lock: ModelLock,
    full: bool,
    workers: int | None = None,
    on_bytes: hashing.OnBytes | None = None,
    alone: bool = False,
) -> dict[str, list[str]]:
    """missing, changed (size, or SHA-256 when full) and extra files of one folder (alone: a
    container mounts it alone, so no link may leave it)."""
    found = scan(folder, alone) if folder.is_dir() else {}
    locked = {f.path: f for f in lock.files}
    changed = [p for p, f in locked.items() if p in found and found[p] != f.size]
    if full:
        same_size = [folder / p for p, f in locked.items() if p in found and found[p] == f.size]
        digests = hashing.hash_files(same_size, workers, on_bytes)
        changed += [
            p.relative_to(folder).as_posix()
            for p, d in digests.items()
            if d != locked[p.relative_to(folder).as_posix()].sha256
        ]
    return {
        "missing": sorted(set(locked) - set(found)),
        "changed": sorted(changed),
        "extra": sorted(set(found) - set(locked)),
    }


def require_lock(profile: Profile) -> dict[str, ModelLock]:
    locks = read(profile)
    if locks is None:
        raise SeatError(
            f"profile {profile.name} has no models lock",
            f"run `seat model lock {profile.name}` where its models are complete",
        )
    return locks


def verify(
    profile: Profile, full: bool = True, workers: int | None = None, on_bytes: hashing.OnBytes | None = None
) -> dict:
    """Per model: its folder, the lock's aggregate and the problems; a full verify is recorded."""
    locks = require_lock(profile)
    models: dict[str, dict] = {}
    result = {"profile": profile.name, "full": full, "time": time.time(), "models": models}
    for key, lock in locks.items():
        folder = model_dir(profile, key)
        # Taken before hashing: a file changed while it is read is seen next time.
        seen = _identities(folder, lock) if full else {}
        problems = compare(folder, lock, full, workers, on_bytes, mounted_alone(profile))
        models[key] = {
            "dir": str(folder),
            "sha256": lock.sha256,
            "files": len(lock.files),
            "bytes": lock.size,
            **problems,
        }
        if full:
            models[key]["identities"] = seen
    result["ok"] = not any(m["missing"] or m["changed"] or m["extra"] for m in models.values())
    if full:
        _record(result)
    return result


def _identities(folder: Path, lock: ModelLock) -> dict[str, list[int]]:
    out = {}
    for f in lock.files:
        try:
            out[f.path] = identity(folder / f.path)
        except OSError:  # missing: the verify says so
            pass
    return out


def require_match(profile: Profile, workers: int | None = None) -> dict:
    """A full verify that raises, naming what differs, unless every file is as locked."""
    result = verify(profile, full=True, workers=workers)
    if not result["ok"]:
        raise SeatError(
            "the model files differ from the models lock: "
            + "; ".join(f"{k}: {summary(m)}" for k, m in result["models"].items()),
            f"seat model verify {profile.name} lists them",
        )
    return result


def bytes_to_hash(profile: Profile) -> int:
    return sum(lock.size for lock in require_lock(profile).values())


def _record_path(profile: str) -> Path:
    return layout.model_verified(profile)


def _record(result: dict) -> None:
    write_atomic(_record_path(result["profile"]), json.dumps(result, indent=2))


def last_full(profile: str) -> dict | None:
    """The last recorded full verify of the profile's models, if any."""
    path = _record_path(profile)
    return safe_yaml.read_json(path, "verify record") if path.exists() else None


def changed_since(profile: Profile, key: str, verified: dict, environ=os.environ) -> list[str]:
    """KEY/PATH of the model's files written since its full verify (ctime: a rewrite of the same
    size, a rename over it), gone since, or that resolve to another file than the verify hashed (a
    link re-pointed to another blob of the same size)."""
    folder, then = model_dir(profile, key, environ), verified["time"]
    identities = verified["models"][key]["identities"]
    present = scan(folder, mounted_alone(profile)) if folder.is_dir() else {}
    found = []
    for path in present:
        try:
            changed = (folder / path).stat().st_ctime > then or identities.get(path) != identity(
                folder / path
            )
        except OSError:  # gone since the walk
            changed = True
        if changed:
            found.append(f"{key}/{path}")
    return found + [f"{key}/{path}" for path in sorted(set(identities) - set(present))]


def unvouched(profile: Profile, key: str, environ=os.environ) -> str | None:
    """Why the last full verify does not vouch for the model's folder as it is now (None: it does)."""
    try:
        record, locks = last_full(profile.name), read(profile)
        if not locks or key not in locks:
            return f"model {key}: no models lock pins its files"
        if not record or key not in record["models"]:
            return f"model {key}: never fully verified against its lock here"
        model, folder = record["models"][key], str(model_dir(profile, key, environ))
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(record["time"]))
        if model["sha256"] != locks[key].sha256:
            return f"model {key}: locked again since its last full verify ({when})"
        if Path(model["dir"]).resolve() != Path(folder).resolve():  # the same folder by another path is it
            return f"model {key}: read from {folder}, its last full verify ({when}) hashed {model['dir']}"
        if any(model[problem] for problem in ("missing", "changed", "extra")):
            return f"model {key}: its last full verify ({when}) found {summary(model)}"
        changed = changed_since(profile, key, record, environ)
        if changed:
            return f"model files changed since their last full verify ({when}): {', '.join(changed[:3])}"
        return None
    except (SeatError, OSError, ValueError, KeyError, TypeError, AttributeError):  # a torn record
        return f"model {key}: its last full verify's record is unreadable"


def unvouched_models(profile: Profile, environ=os.environ) -> str | None:
    """Why a seat of the profile would serve weights that no full verify vouches for (None: every
    model's are), for its run record; `seat up --verify-models` hashes them first, so they are."""
    found = [why for key in profile.models if (why := unvouched(profile, key, environ))]
    if not found:
        return None
    return "; ".join(found) + f" (seat model verify {profile.name}, or seat up --verify-models)"


def summary(problems: dict[str, list[str]]) -> str:
    return (
        "; ".join(
            f"{len(v)} {k} (e.g. {', '.join(v[:3])})"
            for k, v in problems.items()
            if k in ("missing", "changed", "extra") and v
        )
        or "as locked"
    )
