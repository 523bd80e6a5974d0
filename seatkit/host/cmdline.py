"""Kernel command-line token edits that can be undone exactly.

An edit only appends wanted tokens that are missing and, when allowed, removes tokens that give a
wanted key another value. It records both, so undo puts back the very list it started from and
never removes a token the kit did not add.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from seatkit.errors import SeatError


def key(token: str) -> str:
    return token.split("=", 1)[0]


def split(text: str) -> list[str]:
    return shlex.split(text)


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
        raise SeatError(f"the command line already has {' '.join(clash)}, which conflicts with "
                        f"{' '.join(wanted)}",
                        "pass --replace to replace them (their values are kept in the journal "
                        "and put back by rollback)")
    replaced = tuple((i, t) for i, t in enumerate(tokens) if t in clash)
    added = tuple(w for w in dict.fromkeys(wanted) if w not in tokens)
    return Edit(added, replaced)


def apply(tokens: list[str], edit: Edit) -> list[str]:
    dropped = {i for i, _ in edit.replaced}
    return [t for i, t in enumerate(tokens) if i not in dropped] + list(edit.added)


def undo(tokens: list[str], edit: Edit) -> list[str]:
    out = list(tokens)
    for token in edit.added:
        where = len(out) - 1 - out[::-1].index(token)  # ours were appended last
        del out[where]
    for index, token in sorted(edit.replaced):
        out.insert(index, token)
    return out
