"""What an alarm means for its run, and whether the figures above it stand (bench/alarms.yaml)."""

from __future__ import annotations

from functools import cache

from seatkit import paths, safe_yaml


@cache
def _known() -> dict:
    return safe_yaml.read(paths.REPO / "bench" / "alarms.yaml", "alarm list")


def stands(kind: str) -> bool:
    """Whether the figures stand despite this alarm (an unknown kind is doubted)."""
    return bool(_known().get(kind, {}).get("stand"))


def explained(kind: str) -> str:
    """The meaning and the verdict on the figures, as one line to print under the alarm."""
    known = _known().get(kind)
    if not known:
        return "no explanation is on file for this alarm: treat the figures as doubtful"
    return f"{' '.join(known['means'].split())} Do the figures above stand? {known['figures']}"
