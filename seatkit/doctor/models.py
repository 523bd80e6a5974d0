"""Model rows: every file's size against the lock, and the last full verify with its date."""

from __future__ import annotations

import time

from seatkit.doctor.rows import Row, fail, ok, warn
from seatkit.errors import SeatError
from seatkit.models import lock as locks
from seatkit.models import verify as verifier
from seatkit.seat.profiles import Profile

LAYER = "models"


def sizes(profile: Profile) -> Row:
    try:
        result = verifier.verify(profile, full=False)
    except SeatError as exc:
        return warn(LAYER, "lock sizes", exc.message, exc.hint)
    bad = {k: m for k, m in result["models"].items() if m["missing"] or m["changed"] or m["extra"]}
    if bad:
        return fail(
            LAYER,
            "lock sizes",
            "; ".join(f"{k}: {verifier.summary(m)}" for k, m in bad.items()),
            f"seat model fetch {profile.name}",
        )
    total = sum(m["bytes"] for m in result["models"].values())
    return ok(
        LAYER,
        "lock sizes",
        f"{sum(m['files'] for m in result['models'].values())} files, "
        f"{total / 1e9:.2f} GB, every size as locked",
    )


def last_verify(profile: Profile) -> Row:
    fix = f"seat model verify {profile.name}"
    try:
        record = verifier.last_full(profile.name)
        if record is not None:
            when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(record["time"]))
            then, passed = {k: m["sha256"] for k, m in record["models"].items()}, bool(record["ok"])
    except (
        SeatError,
        OSError,
        ValueError,
        KeyError,
        TypeError,
        AttributeError,
    ) as exc:  # a torn record is no record
        return warn(
            LAYER,
            "full verify",
            f"the record of the last full verify is unreadable: "
            f"{exc.message if isinstance(exc, SeatError) else type(exc).__name__}",
            fix,
        )
    if record is None:
        return warn(LAYER, "full verify", "never run on this machine", fix)
    try:
        current = locks.hashes(profile) or {}
    except SeatError as exc:
        return warn(LAYER, "full verify", exc.message, exc.hint)
    if then != current:
        return warn(LAYER, "full verify", f"{when}, against another lock", fix)
    if not passed:
        return fail(LAYER, "full verify", f"{when}: files differed", f"seat model fetch {profile.name}")
    try:
        touched = verifier.changed_since(profile, record["time"], record["models"])
    except SeatError as exc:
        return warn(LAYER, "full verify", exc.message, exc.hint)
    if touched:
        return warn(
            LAYER,
            "full verify",
            f"{when}: every hash matched, but {len(touched)} file(s) were "
            f"changed since (e.g. {', '.join(touched[:3])})",
            fix,
        )
    return ok(LAYER, "full verify", f"{when}: every hash matched, no file written since")


def rows(profile: Profile) -> list[Row]:
    return [sizes(profile), last_verify(profile)]
