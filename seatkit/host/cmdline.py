"""Kernel command-line token edits that keep every byte the kit does not own, and can be undone.

Tokens are split the way the kernel's own parser (next_arg) splits them: at whitespace outside
double quotes, quotes kept in the token, no escapes. An edit only appends wanted tokens that are
missing and, when allowed, removes tokens that give a wanted key another value; it records both,
so undo puts back the very list it started from and never removes a token the kit did not add.
"""

from __future__ import annotations

from dataclasses import dataclass

from seatkit.errors import SeatError

# The kernel's isspace(): space, \t \n \v \f \r, and 0xA0 (lib/ctype.c marks it as space).
SPACE = frozenset(b" \t\n\v\f\r\xa0")
QUOTE = ord('"')
# x86-64 COMMAND_LINE_SIZE counts the closing NUL: the longest line the kernel keeps whole.
COMMAND_LINE_MAX = 2047


def key(token: str) -> str:
    return token.split("=", 1)[0]


def spans(data: bytes) -> list[tuple[int, int]]:
    """Byte ranges of the tokens, as the kernel splits them (an open quote runs to the end)."""
    out, i, n = [], 0, len(data)
    while i < n:
        while i < n and data[i] in SPACE:
            i += 1
        if i == n:
            break
        start, quoted = i, False
        while i < n and (quoted or data[i] not in SPACE):
            quoted ^= data[i] == QUOTE
            i += 1
        out.append((start, i))
    return out


def _text(data: bytes) -> str:
    return data.decode("utf-8", "surrogateescape")  # any byte survives the round trip


def to_bytes(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def value(token: str) -> str:
    """A parameter's value as the kernel hands it over: one pair of surrounding quotes removed."""
    found = token.split("=", 1)[1] if "=" in token else ""
    return found[1:-1] if len(found) > 1 and found[0] == found[-1] == '"' else found.strip('"')


def split(text: str | bytes) -> list[str]:
    data = to_bytes(text) if isinstance(text, str) else text
    return [_text(data[s:e]) for s, e in spans(data)]


def check_length(line: bytes, where: str) -> None:
    if len(line) > COMMAND_LINE_MAX:
        raise SeatError(
            f"the resulting kernel command line ({where}) would be {len(line)} bytes; the "
            f"kernel keeps {COMMAND_LINE_MAX} (COMMAND_LINE_SIZE 2048 on x86-64) and "
            "silently cuts the rest, where seatkit's tokens are",
            "shorten the existing command line first",
        )


@dataclass(frozen=True)
class Edit:
    added: tuple[str, ...] = ()
    replaced: tuple[tuple[int, str], ...] = ()  # (index in the original list, token) removed

    @property
    def empty(self) -> bool:
        return not self.added and not self.replaced

    def to_json(self) -> dict:
        return {"added": list(self.added), "replaced": [list(r) for r in self.replaced]}

    @classmethod
    def from_json(cls, data: dict) -> Edit:
        return cls(tuple(data["added"]), tuple((i, t) for i, t in data["replaced"]))


def conflicts(tokens: list[str], wanted: list[str]) -> list[str]:
    keys = {key(w) for w in wanted}
    return [t for t in tokens if key(t) in keys and t not in wanted]


def plan(tokens: list[str], wanted: list[str], replace: bool) -> Edit:
    if len({key(w) for w in wanted}) != len(set(wanted)):
        raise SeatError(f"wanted tokens {wanted} give one key two values")
    clash = conflicts(tokens, wanted)
    if clash and not replace:
        raise SeatError(
            f"the command line already has {' '.join(clash)}, which conflicts with {' '.join(wanted)}",
            "pass --replace to replace them (their values are kept in the journal and put back by rollback)",
        )
    replaced = tuple((i, t) for i, t in enumerate(tokens) if t in clash)
    added = tuple(w for w in dict.fromkeys(wanted) if w not in tokens)
    return Edit(added, replaced)


def edit_bytes(data: bytes, edit: Edit) -> bytes:
    """The edit made on the file's own bytes: replaced tokens cut out with the space before them,
    added ones appended after the last token; every other byte (quotes, tabs, CRLF, non-UTF-8) kept."""
    if data.count(QUOTE) % 2:
        raise SeatError(
            "the command line has an unbalanced double quote: the kernel would read "
            "everything after it, seatkit's tokens too, as one quoted value",
            "close the quote first",
        )
    found = spans(data)
    for index, token in edit.replaced:
        if _text(data[slice(*found[index])]) != token:
            raise SeatError(f"token {index} is not {token!r}: the file changed since the plan")
    cuts = []
    for index in sorted(i for i, _ in edit.replaced):
        start, end = found[index]
        before = found[index - 1][1] if index else None
        cuts.append(
            (before, end)
            if before is not None
            else (start, found[index + 1][0] if index + 1 < len(found) else end)
        )
    out, last = bytearray(), 0
    for start, end in cuts:
        out += data[last:start]
        last = end
    out += data[last:]
    if edit.added:
        tail = spans(bytes(out))
        at = tail[-1][1] if tail else 0
        added = " ".join(edit.added).encode()
        out[at:at] = (b" " + added) if tail else added
    return bytes(out)
