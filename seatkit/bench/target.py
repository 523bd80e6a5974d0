"""What a bench measures (a server, its model, how to reach it, what it runs under) and how
(warm-ups, repeats, sampling)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from seatkit.bench.workload import Prompt
from seatkit.serve import client


@dataclass
class Target:
    url: str  # never holds credentials: of_url moves them into headers
    model: str
    headers: dict = field(default_factory=dict)
    k: int | None = None
    conditions: dict = field(default_factory=dict)
    # Around each group: raises when the server is not the seat started; else why that cannot be
    # proven (the run's mark: what cannot be compared counts as different), or None.
    verify: Callable[[], str | None] | None = None
    chat: bool = False  # prompts go to its chat endpoint (the model's own template), not raw

    def stream(self, prompt: Prompt, sampling: dict, **kw) -> client.Completion:
        """The prompt streamed to this server as every bench sends it, within the time its
        length and context allow."""
        deadline = client.allowed_seconds(prompt.max_tokens, prompt.context)
        args = (self.url, self.model, prompt.text, prompt.max_tokens, self.headers)
        return client.stream(*args, sampling=sampling, deadline=deadline, chat=self.chat, **kw)


@dataclass
class Options:
    warmups: int = 2
    repeats: int = 5
    sampling: dict = field(default_factory=lambda: {"temperature": 0.0, "top_p": 1.0, "seed": 0})
    sample_hz: float = 0.0  # gauge scrapes per second while a request streams; 0: none


def with_differences(conditions: dict, *why: str | None) -> dict:
    """conditions, with each reason given added once to the differences their provenance holds
    (the mark, seatkit.seat.what_runs.mark)."""
    record = conditions.get("provenance") or {}
    differs = list(record.get("differs") or [])
    added = [r for r in dict.fromkeys(why) if r and r not in differs]
    return {**conditions, "provenance": {**record, "differs": differs + added}} if added else conditions
