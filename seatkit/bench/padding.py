"""Deterministic padding for long-context prompts, sized to a token target by the server's tokenizer."""

from __future__ import annotations

import random
from collections.abc import Callable
from functools import cache

from seatkit import paths, safe_yaml

KINDS = ("repetitive", "realistic")


@cache
def _banks() -> dict:
    return safe_yaml.read(paths.REPO / "bench" / "padding.yaml", "padding file")


def text(kind: str, units: int) -> str:
    """`units` paragraphs (repetitive) or sentences (realistic); the same bytes everywhere."""
    banks = _banks()
    if kind == "repetitive":
        return "\n\n".join([banks["repetitive"]] * units)
    if kind != "realistic":
        raise ValueError(f"padding kind must be one of {KINDS}, got {kind!r}")
    rng = random.Random(banks["seed"])
    pick = lambda bank: bank[rng.randrange(len(bank))]  # noqa: E731 - one draw from a bank
    return " ".join(
        f"{pick(banks['subjects'])} {pick(banks['verbs'])} {pick(banks['objects'])} "
        f"{pick(banks['places'])} {pick(banks['times'])} {pick(banks['endings'])}"
        for _ in range(units)
    )


def pad(base: str, kind: str, target_tokens: int, count: Callable[[str], int]) -> str:
    """The longest padding + base that stays within `target_tokens`, found by bisection."""
    joined = lambda units: f"{text(kind, units)}\n\n{base}"  # noqa: E731
    if count(joined(1)) > target_tokens:
        return base
    low, high = 1, 2
    while count(joined(high)) <= target_tokens:
        low, high = high, high * 2
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if count(joined(middle)) <= target_tokens else (low, middle)
    return joined(low)
