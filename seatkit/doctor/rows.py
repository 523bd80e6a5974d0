"""One row of the diagnosis, and how rows add up to an exit code."""

from __future__ import annotations

from dataclasses import dataclass

ORDER = {"OK": 0, "WARN": 1, "FAIL": 2}


@dataclass(frozen=True)
class Row:
    layer: str
    check: str
    status: str  # OK, WARN or FAIL; a check that cannot run is a WARN that says why
    evidence: str
    fix: str = ""


def ok(layer: str, check: str, evidence: str) -> Row:
    return Row(layer, check, "OK", evidence)


def warn(layer: str, check: str, evidence: str, fix: str) -> Row:
    return Row(layer, check, "WARN", evidence, fix)


def fail(layer: str, check: str, evidence: str, fix: str) -> Row:
    return Row(layer, check, "FAIL", evidence, fix)


def cannot(layer: str, check: str, why: str, fix: str = "") -> Row:
    return Row(layer, check, "WARN", f"cannot check: {why}", fix)


def worst(rows: list[Row]) -> str:
    return max((r.status for r in rows), key=ORDER.__getitem__, default="OK")


def exit_code(rows: list[Row]) -> int:
    """The kit's rule: 1 when a check failed; a WARN (a check that cannot run here, a figure off
    the card) is said, not failed, so a healthy seat exits 0."""
    return 1 if worst(rows) == "FAIL" else 0
