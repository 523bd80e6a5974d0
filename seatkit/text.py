"""Text from outside (a server's error body, a URL) made safe to print and to keep."""

from __future__ import annotations

import re
from urllib.parse import unquote, urlsplit, urlunsplit

# C0 and C1 controls and DEL, except newline and tab: a server's body can't drive the terminal.
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    return _CONTROLS.sub("", text)


def one_line(text: str) -> str:
    """Text that can neither fake another line nor reorder this one: newlines, tabs, controls and
    bidi marks shown as escapes (\\n, \\u202e)."""
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)


def split_credentials(url: str) -> tuple[str, tuple[str, str] | None]:
    """The URL without its user:password@ part, and that pair (None when there is none)."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url, None
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host + (f":{parts.port}" if parts.port else "")
    return (
        urlunsplit(parts._replace(netloc=netloc)),
        (unquote(parts.username or ""), unquote(parts.password or "")),
    )


def plain(value) -> str:
    """A reading as a person reads it: never a Python literal ({}, [], None, True)."""
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items()) or "none set"
    if isinstance(value, (list, tuple, set)):
        return " ".join(map(str, value)) or "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return "unknown" if value is None else str(value)


def counted(n: int, noun: str) -> str:
    """'1 request', '2 requests': a count as a sentence says it (regular plurals only)."""
    return f"{n} {noun}" + ("" if n == 1 else "s")
