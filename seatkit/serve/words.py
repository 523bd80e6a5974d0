"""The words of a launch: literals and references to knobs, and the knobs themselves.

A knob is a host value read from the environment, with the profile's value as default. Where its
value lands on a command line, the knob carries its grammar: a POSIX extended regular expression
over ASCII (seatkit.seat.grammar), checked in one bash loop that the script and `seat up` both run
(templates/preflight.sh.j2, knobs).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Ref:
    """A reference to a knob inside a word."""

    name: str


Word = tuple  # parts: str literals and Refs, joined into one argument


@dataclass(frozen=True)
class Knob:
    name: str
    default: str
    meaning: str
    shell_default: str | None = None  # a bash expression, for defaults that depend on the machine
    pattern: str | None = None  # the grammar its value must match; None: any value (a host path)
    what: str = ""  # the grammar in words, for the message that refuses a value
