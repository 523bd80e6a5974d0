"""The words of a launch: literals and references to knobs, and the knobs themselves.

A knob is a host value read from the environment, with the profile's value as default. Where its
value lands on a command line, the knob carries its grammar: a POSIX extended regular expression
over ASCII (seatkit.seat.grammar), which `seat up` checks in Python and the script in one bash loop.
"""

from __future__ import annotations

from dataclasses import dataclass

from seatkit.errors import SeatError
from seatkit.seat import grammar


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

    def check(self, value: str) -> str:
        """The value, or a SeatError saying what it must look like (the script says the same)."""
        if self.pattern is not None and not grammar.matches(self.pattern, value):
            raise SeatError(f"{self.name}={value!r} is not {self.what}", f"fix or unset {self.name}")
        return value
