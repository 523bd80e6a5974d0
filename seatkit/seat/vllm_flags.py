"""A server flag as vLLM's parser reads it (FlexibleArgumentParser over argparse), so that every
judgment of a flag judges the one vLLM will act on, whatever its spelling.

vLLM turns underscores into dashes in a flag's name (up to its first '.'), takes `--flag=value`,
gathers `--flag.key value` (and `--flag.key+ value`, one list item) into the flag's JSON, and
argparse takes an unambiguous abbreviation of a long flag (`--trust-remote` is
`--trust-remote-code`) unless the word is a real flag of its own.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Flag:
    name: str  # as vLLM reads it: dashes, without the leading '--'
    key: str  # the first dotted config key after the name, '' when none (`-` read as `_`)
    carried: str | None  # the value after '=', None when the word carries none


def read(flag: str) -> Flag:
    """A flag without its leading dashes (a vllm_args key, or a command's word past its '--')."""
    spelled, eq, carried = flag.partition("=")
    name, _, key = spelled.partition(".")
    key = key.split(".")[0].removesuffix("+").replace("-", "_")
    return Flag(name.replace("_", "-"), key, carried if eq else None)


def resolved(name: str, names: Iterable[str]) -> str | None:
    """Which of `names` argparse takes the flag `name` for: itself, or the one it abbreviates;
    None when neither."""
    names = list(names)
    if name in names:
        return name
    return next((n for n in names if name and n.startswith(name)), None)


def flag_like(value) -> bool:
    """Whether a value, its own word after its flag, is one argparse may read as a flag: a word
    that starts with '-' and is no negative number (-O3 among them: vLLM makes it
    --optimization-level 3)."""
    text = str(value) if isinstance(value, (str, int, float)) and not isinstance(value, bool) else ""
    return text.startswith("-") and not re.fullmatch(r"-\d+|-\d*\.\d+", text)
