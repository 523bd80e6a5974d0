"""The oracle's truth: its tokenizer, the tokens its drafter gives each step (a fixed mean, or a
chain drafter's per-position acceptance), and what a batch-1 request of it truly delivers."""

from __future__ import annotations

import hashlib
import math
import random
import re

_PIECES = re.compile(r"[A-Za-z]+|\d+|[^\sA-Za-z\d]")


def tokens(text: str) -> list[int]:
    """The oracle's tokenizer: letters, digits and each other mark a token (so a loop written
    without spaces is many tokens, as a real tokenizer makes it), each a stable id."""
    return [int(hashlib.sha256(p.encode()).hexdigest()[:6], 16) for p in _PIECES.findall(text)]


def step_sizes(decode_tokens: int, tokens_per_step: float) -> list[int]:
    """Tokens the drafter gives per step, tracking i * tokens_per_step (an exact mean over the run),
    until they cover decode_tokens; the last step may give more than are left (max_tokens cuts it)."""
    sizes, total, i = [], 0, 0
    while total < decode_tokens:
        i += 1
        size = max(1, math.floor(i * tokens_per_step + 1e-9) - total)
        sizes.append(size)
        total += size
    return sizes


def schedule_sizes(decode_tokens: int, acceptance: tuple[float, ...], k: int, seed: int) -> list[int]:
    """Tokens per step of a chain drafter that keeps position i on a share acceptance[i] of the steps
    whatever k: one random v per step (seeded: a rerun is the same), positions up to k kept while v
    is under their rate (nested); requests spread as real ones do, around a known mean."""
    rng, sizes, total = random.Random(seed), [], 0
    while total < decode_tokens:
        v = rng.random()
        sizes.append(1 + sum(v < rate for rate in acceptance[:k]))
        total += sizes[-1]
    return sizes


def truth(max_tokens: int, tokens_per_step: float, step_ms: float) -> dict:
    """What a batch-1 request of max_tokens truly delivers: decode tokens over decode steps."""
    sizes = step_sizes(max_tokens - 1, tokens_per_step)
    decode_s = len(sizes) * step_ms / 1000
    return {
        "tokens_per_step": (max_tokens - 1) / len(sizes),
        "ms_per_step": step_ms,
        "decode_tok_s": (max_tokens - 1) / decode_s,
        "decode_steps": len(sizes),
        "drafter_tokens_per_step": sum(sizes) / len(sizes),
    }
