"""Model rows: every file's size against the lock, and the last full verify with its date."""

from __future__ import annotations

from seatkit.doctor.rows import Row, fail, ok, warn
from seatkit.errors import SeatError
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
    """Whether the last full verify vouches for every model as it is now: `seat up`'s own test
    (verify.unvouched), whose answer is the run's mark."""
    why = [reason for key in profile.models if (reason := verifier.unvouched(profile, key))]
    if why:
        return warn(LAYER, "full verify", "; ".join(why), f"seat model verify {profile.name}")
    return ok(LAYER, "full verify", "every hash matched, no file written since")


def rows(profile: Profile) -> list[Row]:
    return [sizes(profile), last_verify(profile)]
