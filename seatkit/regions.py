"""Marked regions of hand-written files that `seat render` keeps in step with their source.

A region is the lines between a line containing BEGIN and the next line containing END; the marker
lines stay as written, so each file comments them in its own syntax.
"""

from __future__ import annotations

from seatkit.errors import SeatError

BEGIN = "begin: rendered"
END = "end: rendered"


def replace(text: str, body: str, where: str) -> str:
    """text with its marked region's lines replaced by body."""
    lines = text.splitlines(keepends=True)
    # Exactly one of each, in order: a second region or prose quoting a marker would otherwise
    # have hand-written lines overwritten (or a stale copy pass `seat render --check`).
    starts = [i for i, line in enumerate(lines) if BEGIN in line]
    stops = [i for i, line in enumerate(lines) if END in line]
    if len(starts) != 1 or len(stops) != 1 or stops[0] < starts[0]:
        raise SeatError(
            f"{where} must hold exactly one region marked '{BEGIN}' ... '{END}' (found "
            f"{len(starts)} begin and {len(stops)} end lines)",
            "keep the two marker lines, in order, and no other line quoting them; then run `seat render`",
        )
    start, stop = starts[0], stops[0]
    body = body if body.endswith("\n") or not body else body + "\n"
    return "".join(lines[: start + 1]) + body + "".join(lines[stop:])
