"""How the words of a launch are written in bash: literals quoted, knobs as "${NAME}"."""

from __future__ import annotations

import shlex

from seatkit.serve.words import Ref, Word


def shell_word(word: Word, quote=shlex.quote) -> str:
    """One shell word: literals single-quoted, knobs as "${NAME}"."""
    parts = [f'"${{{p.name}}}"' if isinstance(p, Ref) else quote(p) for p in word if p != ""]
    return "".join(parts) or "''"


def _is_flag(word: Word) -> bool:
    return isinstance(word[0], str) and word[0].startswith("--")


def always_quoted(text: str) -> str:
    """Single-quoted even when shlex would not (commas in values trip ShellCheck)."""
    return "'" + text.replace("'", "'\"'\"'") + "'"


def quoted_word(word: Word) -> str:
    """A shell word whose literals are always single-quoted."""
    return shell_word(word, always_quoted)


def argv_lines(words: list[Word]) -> list[str]:
    """Shell words, a flag and its value on one line, for a readable command array."""
    lines: list[str] = []
    for i, word in enumerate(words):
        follows_flag = i > 0 and _is_flag(words[i - 1]) and not _is_flag(word)
        if follows_flag and lines:
            lines[-1] += " " + shell_word(word)
        else:
            lines.append(shell_word(word))
    return lines


def double_quoted(expression: str) -> str:
    return f'"{expression}"'


def oneline(text: str) -> str:
    return " ".join(text.split())
