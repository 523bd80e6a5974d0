"""The main job on the embedded default: set up, start, stream one completion, stop.

Whatever happens after the start, the seat is stopped before this returns, so no process is left.
"""

from __future__ import annotations

import time

from rich.console import Console

from seatkit.serve import client, launch, profile as profiles, runtime, spec as specs

PROMPT = ("def rate_limiter(capacity, refill_per_second):\n"
          "    \"\"\"A token bucket: allow() is true while tokens remain.\"\"\"\n")


def run(name: str, max_tokens: int, out: Console, err: Console) -> client.Completion:
    profile = profiles.load(name)
    if profile.runtime == "native":
        runtime.setup(profile, say=lambda m: err.print(f"[dim]setup:[/] {m}"))
    spec = specs.build(profile)
    start = time.monotonic()
    with err.status(f"starting {name}") as status:
        seat, waited = launch.up(spec, tick=lambda stage, t: status.update(
            f"starting {name}: waiting for {stage} ({t:.0f} s)"))
    try:
        err.print(f"{name} up after {waited:.1f} s at {seat.url}; streaming {max_tokens} tokens:")
        done = client.stream(seat.url, seat.model, PROMPT, max_tokens, launch.headers(seat),
                             on_text=lambda text: out.print(text, end="", markup=False,
                                                            highlight=False))
        out.print()
        out.print(f"prompt tokens {done.prompt_tokens}, completion tokens {done.completion_tokens} "
                  f"in {done.chunks} chunks ({done.completion_tokens / max(done.chunks, 1):.2f} "
                  f"tokens per chunk: speculative decoding emits several per step), "
                  f"TTFT {done.ttft_s * 1000:.0f} ms, total {done.total_s:.2f} s, "
                  f"finish {done.finish_reason}")
    finally:
        launch.stop(seat, grace=30)
        err.print(f"{name} stopped; whole run {time.monotonic() - start:.0f} s")
    return done
