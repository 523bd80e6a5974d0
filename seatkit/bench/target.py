"""What a bench measures (a server, its model, how to reach it, what it runs under) and how
(warm-ups, repeats, sampling)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class Target:
    url: str  # never holds credentials: of_url moves them into headers
    model: str
    headers: dict = field(default_factory=dict)
    k: int | None = None
    conditions: dict = field(default_factory=dict)
    verify: Callable[[], object] | None = None  # raises when the server is not the seat started
    chat: bool = False  # prompts go to its chat endpoint (the model's own template), not raw


@dataclass
class Options:
    warmups: int = 2
    repeats: int = 5
    sampling: dict = field(default_factory=lambda: {"temperature": 0.0, "top_p": 1.0, "seed": 0})
    sample_hz: float = 0.0  # gauge scrapes per second while a request streams; 0: none
