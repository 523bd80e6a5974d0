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
    try:
        start = next(i for i, line in enumerate(lines) if BEGIN in line)
        stop = next(i for i in range(start + 1, len(lines)) if END in lines[i])
    except StopIteration:
        raise SeatError(f"{where} has no region marked '{BEGIN}' ... '{END}'",
                        "restore the two marker lines, then run `seat render`") from None
    body = body if body.endswith("\n") or not body else body + "\n"
    return "".join(lines[:start + 1]) + body + "".join(lines[stop:])
