"""A concurrency level's figures: each stream's own, the streams' over the steady window (every
stream decoding, until the first finish), and the counters' over that window, with the alarms
where they cannot stand (seatkit.bench.sweep says how the window is read)."""

from __future__ import annotations

from dataclasses import dataclass, field

from seatkit.bench import metrics
from seatkit.bench.aggregate import stats
from seatkit.serve import client

MIN_STEPS = 10  # per stream in the counters' window: fewer, and one step at a window's edge skews it
CLIENT_TIMING = 0.25  # window vs whole-request stream rates: past this, the client read late
STREAMS_TOLERANCE = 0.05  # the streams' aggregate against the counters' n x tokens/step / ms/step


@dataclass
class Stream:
    sent: float = 0.0
    chunks: list[tuple[float, int]] = field(default_factory=list)  # (client time, tokens so far)
    done: client.Completion | None = None
    error: str | None = None


def _rate(points: list[tuple[float, int]]) -> float | None:
    """Tokens per second between a stream's first and last chunk in the window: whole steps, and
    immune to a burst in between (a fitted slope is not: bursts bend it)."""
    if len(points) < 2 or points[-1][0] == points[0][0]:
        return None
    (t0, n0), (t1, n1) = points[0], points[-1]
    return (n1 - n0) / (t1 - t0)


def _late_reads(rates: list[float | None], whole: dict | None, n: int) -> str | None:
    """Why the streams' window rate cannot be trusted, or None. A starved client reads a stream's
    tokens late and in bursts: inside the window they then bunch up, or thin out, against the
    same streams' rates over whole requests."""
    if not all(rates):
        return (
            "a stream's tokens reached the client in one burst inside the window: its rate there "
            "is unknown (the client was starved of CPU)"
        )
    total = sum(r for r in rates if r)
    if whole and abs(total / (n * whole["median"]) - 1) > CLIENT_TIMING:
        return (
            f"inside the window the streams ran at {total:.0f} tok/s, over whole requests "
            f"{n} x {whole['median']:.0f}: the client read its streams late (a busy host)"
        )
    return None


def figures(
    n: int, streams: list[Stream], edges: dict | None, total: metrics.Snapshot | None, cpu_s: float
) -> dict:
    """A level's figures: the streams' own, the steady window's (every stream decoding), and the
    counters' over that window; alarms where they cannot stand."""
    done = [s.done for s in streams if s.done is not None]
    if len(done) < len(streams):  # level() raised for a stream that failed
        raise ValueError("a level's figures need every stream's completion")
    tokens = sum(d.completion_tokens for d in done)
    first_sent = min(s.sent for s in streams)
    out: dict = {
        "concurrency": n,
        "completion_tokens": tokens,
        "per_request_decode_tok_s": stats(
            [(d.completion_tokens - 1) / (d.last_s - d.ttft_s) if d.last_s > d.ttft_s else None for d in done]
        ),
        "client_ttft_ms": stats([d.ttft_s * 1000 for d in done]),
        "level_tok_s": tokens
        / (max(s.sent + d.last_s for s, d in zip(streams, done, strict=True)) - first_sent),
        "client_cpu_us_per_token": cpu_s * 1e6 / max(tokens, 1),
        "alarms": {},
    }
    if total is not None:
        out.update(_level_counters(total, tokens))
    if not all(s.chunks for s in streams):
        out["alarms"]["no-text"] = "a stream finished without text: it has no decode to window"
        return out
    if not _stream_window(out, n, streams, edges, first_sent) or edges is None:
        return out
    _counter_window(out, n, edges, tokens)
    running = [r for r in edges["running"] if r is not None]  # None: the server has no gauge
    if running and max(running) < n:
        out["alarms"]["client-bottleneck"] = (
            f"the server's running gauge read {max(running):g}, never {n}: the client "
            "did not keep the level busy"
        )
    return out


def _level_counters(total: metrics.Snapshot, tokens: int) -> dict:
    """The server's TTFT and token counts over the whole level."""
    v = total.values
    return {
        "server_ttft_ms": (
            v["ttft_seconds"] / v["ttft_count"] * 1000
            if (v.get("ttft_count") or 0) > 0 and v.get("ttft_seconds", -1) >= 0
            else None
        ),  # none, or a histogram gone backwards
        "usage_vs_counters": {
            "usage": tokens,
            "generation_tokens": v.get("generation_tokens"),
            "finished": sum(total.success.values()),
        },
    }


def _stream_window(out: dict, n: int, streams: list[Stream], edges: dict | None, first_sent: float) -> bool:
    """The streams' rates over the window where every one decodes; False when there is none."""
    # Client side of the window: every stream has its first token, until the first finish. The
    # opening scrape runs just then, and a server whose exposition shares its streams' loop holds
    # them up meanwhile: they resume in a burst. The window opens once the burst is out (as long
    # again as the scrape took, after it answered), so the scrape's cost stays out of the rates.
    start = max(s.chunks[0][0] for s in streams)
    if edges is not None and "opened" in edges:
        start = max(start, edges["opened"] + (edges["opened"] - edges["start"]))
    end = min(s.chunks[-1][0] for s in streams)
    if end <= start:
        out["alarms"]["client-bottleneck"] = (
            f"a stream finished before the last of {n} started: they never all decoded at once; "
            "the client set the pace (more client CPU, or longer outputs)"
        )
        return False
    rates = [_rate([c for c in s.chunks if start <= c[0] <= end]) for s in streams]
    out["window"] = {
        "opens_s": start - first_sent,
        "closes_s": end - first_sent,
        "seconds": end - start,
        "rule": "every stream decoding -> first finish",
    }
    out["aggregate_tok_s"] = sum(r for r in rates if r) if all(rates) else None
    out["stream_tok_s_in_window"] = stats(rates)
    late = _late_reads(rates, out["per_request_decode_tok_s"], n)
    if late:
        out["alarms"]["client-timing"] = late
    return True


def _counter_window(out: dict, n: int, edges: dict, tokens: int) -> None:
    """tokens/step and ms/step from the counters over the window, checked against the streams."""
    d = edges["delta"].values
    steps, step_s = d.get("steps"), d.get("step_seconds")
    out["window"].update(
        {
            "counter_seconds": edges["end"] - edges["start"],
            "steps": steps,
            "running_gauge": edges["running"],
            "scrape_ms": edges.get("scrape_ms"),
        }
    )
    generated = d.get("generation_tokens", 0)
    if not steps or steps < MIN_STEPS * n:
        out["alarms"]["short-window"] = (
            f"the counters' window held {steps or 0:g} request steps, under {MIN_STEPS} per "
            "stream: no tokens/step or ms/step (longer outputs, or a client that keeps up)"
        )
        return
    if not (steps <= generated <= tokens) or not (step_s or 0) > 0:
        # Each request step delivers at least one token, and the window is inside the level.
        out["alarms"]["counters-vs-usage"] = (
            f"over the window the counters give {generated:g} tokens in {steps:g} steps of "
            f"{step_s or 0:g} s in all, the streams {tokens} tokens in the whole level: another "
            "client's requests, counters that went backwards, or a server that counts differently"
        )
        return
    out["tokens_per_step"] = d.get("generation_tokens", 0) / steps
    out["ms_per_step"] = step_s * 1000 / steps
    if d.get("accepted") is not None:
        out["drafter_tokens_per_step"] = 1 + d["accepted"] / steps
    out["counters_tok_s"] = n * out["tokens_per_step"] / (out["ms_per_step"] / 1000)
    agg = out["aggregate_tok_s"]
    if agg and abs(agg / out["counters_tok_s"] - 1) > STREAMS_TOLERANCE:
        # Two windows (the streams' and the counters', which holds the scrapes) that should
        # agree: when they do not, neither figure is printed as if it stood alone.
        scraped = ", ".join(f"{ms:.0f} ms" for ms in edges.get("scrape_ms") or []) or "untimed"
        out["alarms"]["streams-vs-counters"] = (
            f"the streams give {agg:.0f} tok/s, the counters {out['counters_tok_s']:.0f} "
            f"(n x tokens/step / ms/step): {agg / out['counters_tok_s'] - 1:+.1%} apart; the "
            f"counters' window holds the scrapes ({scraped}) and a loaded host's stalls"
        )
