"""What pip says it installed in a venv (each *.dist-info/RECORD), and the judgement of a venv the
kit has just installed: every file is one a RECORD lists at its hash and size, one the kit wrote
(its exact bytes), or one `python -m venv` makes (its names, found by making one). Nothing else.

A RECORD is in the venv, so anyone who can edit a file there can edit its RECORD too: it is
believed only here, right after the kit's own install, and what it vouched for then is kept
outside the venv (venv_record) for every later check.

Lines without a hash are taken only where pip writes them so: the RECORD itself, and the .pyc
files it compiles at install (__pycache__/*.pyc), whose bytes the kit's record then keeps.
"""

from __future__ import annotations

import base64
import binascii
import csv
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from seatkit.errors import SeatError
from seatkit.serve.venv_tree import Tree

VENV = "python -m venv"
KIT = "seatkit"


@dataclass(frozen=True)
class Row:
    dist: str  # "numpy 2.3.5"
    algorithm: str | None  # None: the line has no hash
    digest: bytes
    size: int | None


def site_packages(venv: Path) -> list[Path]:
    return sorted(venv.glob("lib/python3*/site-packages"))


def _dist(folder: str) -> str:
    name, _, version = folder.removesuffix(".dist-info").rpartition("-")
    return f"{name} {version}" if name else folder


def _row(venv: Path, site: Path, record: Path, line: list[str]) -> tuple[str, Row]:
    """The file a RECORD line names (relative to the venv) and what it says of it; ValueError
    for a line pip does not write."""
    if len(line) != 3:
        raise ValueError(f"{len(line)} fields, not 3")
    path, hashed, size = line
    rel = os.path.relpath(os.path.normpath(os.path.join(site, path)), venv)
    if os.path.isabs(path) or rel == ".." or rel.startswith("../"):
        raise ValueError(f"{path} is outside the venv")
    dist = _dist(record.parent.name)
    if not hashed:
        return rel, Row(dist, None, b"", int(size) if size else None)
    algorithm, _, encoded = hashed.partition("=")
    if algorithm not in hashlib.algorithms_guaranteed:
        raise ValueError(f"{algorithm} is no hash Python knows")
    try:
        digest = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4))
    except (binascii.Error, ValueError):
        raise ValueError(f"{hashed} is not urlsafe base64") from None
    return rel, Row(dist, algorithm, digest, int(size) if size else None)


def rows(venv: Path) -> tuple[dict[str, list[Row]], list[str]]:
    """Every file the venv's RECORDs list, relative to the venv (one RECORD may list a file twice,
    and two distributions the same file), and the lines that cannot be taken."""
    out: dict[str, list[Row]] = {}
    problems = []
    for site in site_packages(venv):
        for record in sorted(site.glob("*.dist-info/RECORD")):
            try:
                lines = list(csv.reader(record.read_text().splitlines()))
            except (OSError, UnicodeError, csv.Error) as exc:
                problems.append(f"{record.relative_to(venv)} is unreadable ({exc})")
                continue
            for line in filter(None, lines):
                try:
                    rel, row = _row(venv, site, record, line)
                except ValueError as exc:
                    problems.append(f"{record.relative_to(venv)}: a line pip does not write ({exc})")
                    continue
                out.setdefault(rel, []).append(row)
    return out, problems


def _matches(venv: Path, rel: str, row: Row, sha256: str, size: int) -> bool:
    if row.size is not None and row.size != size:
        return False
    if row.algorithm == "sha256":
        return row.digest == bytes.fromhex(sha256)
    try:  # another hash a wheel may carry (sha384...): rare, read again
        with open(venv / rel, "rb") as fh:
            return hashlib.file_digest(fh, row.algorithm).digest() == row.digest  # type: ignore[arg-type]
    except OSError:  # gone or unreadable since it was hashed: not as recorded
        return False


def _hashless_ok(rel: str) -> bool:
    parts = rel.split("/")
    return (parts[-1] == "RECORD" and parts[-2].endswith(".dist-info")) or (
        len(parts) > 1 and parts[-2] == "__pycache__" and rel.endswith(".pyc")
    )


def _listed(venv: Path, rel: str, found: list[Row], sha256: str, size: int) -> tuple[str, str]:
    """The distribution a listed file is of, or why it is none's: at a hash and size a line gives,
    or hashless where pip writes it so. pip lists a .pyc it compiled without a hash, even where
    the wheel brought one of that name (numpy's) and its line with the wheel's hash stays."""
    matched = next((r.dist for r in found if r.algorithm and _matches(venv, rel, r, sha256, size)), None)
    if matched:
        return matched, ""
    compiled = next((r.dist for r in found if not r.algorithm), None)
    if compiled and _hashless_ok(rel):
        return compiled, ""
    dists = ", ".join(sorted({r.dist for r in found}))
    if any(r.algorithm for r in found):
        return "", f"{rel} of {dists} differs from its RECORD (hash or size)"
    return "", f"{rel}: the RECORD of {dists} lists it without a hash"


def judge(
    venv: Path, tree: Tree, digests: dict[str, str], kit: dict[str, bytes], made: Tree
) -> tuple[dict[str, str], list[str]]:
    """Who put each file of the venv there (a distribution, the kit, `python -m venv`), and what
    none of them accounts for. digests: each file's SHA-256 (hex), hashed after the walk."""
    listed, problems = rows(venv)
    owners: dict[str, str] = {}
    for rel, info in sorted(tree.files.items()):
        if rel in kit:
            if hashlib.sha256(kit[rel]).hexdigest() == digests[rel]:
                owners[rel] = KIT
            else:
                problems.append(f"{rel} is not what the kit wrote there")
        elif rel in listed:
            owner, problem = _listed(venv, rel, listed[rel], digests[rel], info.st_size)
            if owner:
                owners[rel] = owner
            else:
                problems.append(problem)
        elif rel in made.files:
            owners[rel] = VENV
        else:
            problems.append(f"{rel}: no RECORD lists it, and neither the kit nor `python -m venv` wrote it")
    problems += [
        f"{rel} is a link, which only `python -m venv` makes here"
        for rel in tree.links
        if rel not in made.links
    ]
    problems += [f"{rel} is a {kind}" for rel, kind in tree.odd.items()]
    missing = sorted(set(listed) - set(tree.files) - set(tree.links))
    problems += [f"{rel} of {listed[rel][0].dist} is missing (its RECORD lists it)" for rel in missing]
    return owners, problems


def refuse(venv: Path, problems: list[str]) -> SeatError:
    """The error of a venv just installed that its RECORDs do not account for."""
    return SeatError(
        f"{venv}, just installed, holds what pip's RECORDs do not account for: "
        + "; ".join(problems[:5])
        + (f"; and {len(problems) - 5} more" if len(problems) > 5 else ""),
        f"remove {venv} and run `seat setup` again; if this persists, a package of the plan writes "
        "files pip does not record: take it out of native.packages",
    )
