"""`seat bench --concurrency 1,2,4,8,16`: levels of N simultaneous streams, each read over its
steady window, so a throughput curve comes with the two factors that shape it.

Per level, N streams of the same prompt start together. The steady window opens when every stream
has its first token (no request starts inside it) and closes at the first finish; /metrics is read
at those two moments only (a scrape delays streams: see CAVEATS.md). Over the window:

- tokens per step = Δ generation tokens / Δ inter-token-latency count: per request step, tokens
  delivered (the finishing request's last step counts what it delivered, not what was accepted);
- ms per step = Δ inter-token-latency sum / its count: the engine's step time at this batch;
- aggregate tok/s = the sum over streams of each stream's rate in the window (tokens between its
  first and last chunk there, over client time); the counters' own figure, N x tokens per step /
  s per step, is kept beside it.

Steps that other streams take between the first finish and the closing scrape (at most a step or
two, at N - 1) fall inside the counters' window; the stream rates stop at the first finish.
The running-request gauge at the window's edges must reach N; when it does not, or when a stream
finished before the last one started, the client (not the server) set the pace, and an alarm says so.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from seatkit.bench import counters, metrics, plots, report, tokenizer
from seatkit.bench.counters import scrape
from seatkit.bench.run import RunDir, conditions
from seatkit.bench.target import Options, Target
from seatkit.bench.workload import Prompt
from seatkit.errors import SeatError
from seatkit.serve import client

SCHEMA = "seatkit.bench.sweep/1"
MIN_STEPS = 10  # per stream in the counters' window: fewer, and one step at a window's edge skews it
CLIENT_TIMING = 0.25  # window vs whole-request stream rates: past this, the client read late


@dataclass
class Stream:
    sent: float = 0.0
    chunks: list[tuple[float, int]] = field(default_factory=list)  # (client time, tokens so far)
    done: client.Completion | None = None
    error: str | None = None


class Window:
    """Scrapes /metrics when the last stream starts decoding and when the first one finishes."""

    def __init__(self, target: Target, level: int):
        self.target, self.level = target, level
        self.started, self.ended = threading.Event(), threading.Event()
        self.first_tokens, self.lock = 0, threading.Lock()
        self.edges: list[tuple[float, float, metrics.Snapshot]] = []  # (sent, answered, counters)
        self.opened_after_a_finish = False
        self.thread = threading.Thread(target=self._scrape, daemon=True)
        self.thread.start()

    def event(self, stream: Stream, completion: client.Completion) -> None:
        """Called on every streamed event of every stream (from the streams' threads)."""
        if completion.chunks > len(stream.chunks):
            stream.chunks.append((time.monotonic(), completion.completion_tokens))
            if len(stream.chunks) == 1:
                with self.lock:
                    self.first_tokens += 1
                    if self.first_tokens == self.level:
                        self.opened_after_a_finish = self.ended.is_set()
                        self.started.set()
        if completion.finish_reason:
            self.ended.set()

    def _scrape(self) -> None:
        self.started.wait()
        if self.opened_after_a_finish:
            return
        try:  # a failed scrape leaves no window; the level's closing scrape reports the error
            self.edges.append(self._timed())
            self.ended.wait()
            self.edges.append(self._timed())
        except SeatError:
            return

    def _timed(self) -> tuple[float, float, metrics.Snapshot]:
        sent = time.monotonic()
        snapshot = scrape(self.target)
        return sent, time.monotonic(), snapshot

    def close(self) -> dict | None:
        """The window's counter deltas and edges, or None when there was no steady window."""
        self.started.set()
        self.ended.set()
        self.thread.join()
        if len(self.edges) < 2 or any(snapshot is None for *_, snapshot in self.edges):
            return None
        (t0, open_done, first), (t1, close_done, last) = self.edges
        return {
            "start": t0,
            "end": t1,
            "delta": last - first,
            "opened": open_done,
            "scrape_ms": [(open_done - t0) * 1000, (close_done - t1) * 1000],
            "running": [first.gauges.get("running"), last.gauges.get("running")],
        }


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
    if whole and abs(sum(rates) / (n * whole["median"]) - 1) > CLIENT_TIMING:
        return (
            f"inside the window the streams ran at {sum(rates):.0f} tok/s, over whole requests "
            f"{n} x {whole['median']:.0f}: the client read its streams late (a busy host)"
        )
    return None


def _spread(values: list[float]) -> dict | None:
    values = [v for v in values if v is not None]
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def level(target: Target, prompt: Prompt, options: Options, n: int) -> dict:
    """N streams started together; the level's figures, its window, and its alarms."""
    before = counters.wait_idle(target)
    window = Window(target, n)
    streams = [Stream() for _ in range(n)]
    gate = threading.Barrier(n)

    def go(stream: Stream) -> None:
        gate.wait()
        stream.sent = time.monotonic()
        try:
            stream.done = client.stream(
                target.url,
                target.model,
                prompt.text,
                prompt.max_tokens,
                target.headers,
                sampling=options.sampling,
                on_event=lambda c: window.event(stream, c),
            )
        except SeatError as exc:
            stream.error = exc.message
            window.ended.set()

    cpu = time.process_time()
    threads = [threading.Thread(target=go, args=(s,), daemon=True) for s in streams]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    cpu = time.process_time() - cpu
    edges = window.close()
    failed = [s.error for s in streams if s.error]
    if failed:
        raise SeatError(f"{n} streams: {len(failed)} failed: {failed[0]}")
    total = counters.after(target, before, timeout=30.0, finishes=n) - before if before else None
    return figures(n, streams, edges, total, cpu)


STREAMS_TOLERANCE = 0.05  # the streams' aggregate against the counters' n x tokens/step / ms/step


def figures(
    n: int, streams: list[Stream], edges: dict | None, total: metrics.Snapshot | None, cpu_s: float
) -> dict:
    done = [s.done for s in streams]
    tokens = sum(d.completion_tokens for d in done)
    first_sent = min(s.sent for s in streams)
    out = {
        "concurrency": n,
        "completion_tokens": tokens,
        "per_request_decode_tok_s": _spread(
            [(d.completion_tokens - 1) / (d.last_s - d.ttft_s) if d.last_s > d.ttft_s else None for d in done]
        ),
        "client_ttft_ms": _spread([d.ttft_s * 1000 for d in done]),
        "level_tok_s": tokens / (max(s.sent + s.done.last_s for s in streams) - first_sent),
        "client_cpu_us_per_token": cpu_s * 1e6 / max(tokens, 1),
        "alarms": {},
    }
    if total is not None:
        v = total.values
        out["server_ttft_ms"] = (
            v["ttft_seconds"] / v["ttft_count"] * 1000
            if (v.get("ttft_count") or 0) > 0 and v.get("ttft_seconds", -1) >= 0
            else None
        )  # none, or a histogram gone backwards
        out["usage_vs_counters"] = {
            "usage": tokens,
            "generation_tokens": v.get("generation_tokens"),
            "finished": sum(total.success.values()),
        }
    if not all(s.chunks for s in streams):
        out["alarms"]["no-text"] = "a stream finished without text: it has no decode to window"
        return out
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
        return out
    rates = [_rate([c for c in s.chunks if start <= c[0] <= end]) for s in streams]
    out["window"] = {
        "opens_s": start - first_sent,
        "closes_s": end - first_sent,
        "seconds": end - start,
        "rule": "every stream decoding -> first finish",
    }
    out["aggregate_tok_s"] = sum(r for r in rates if r) if all(rates) else None
    out["stream_tok_s_in_window"] = _spread(rates)
    late = _late_reads(rates, out["per_request_decode_tok_s"], n)
    if late:
        out["alarms"]["client-timing"] = late
    if edges is None:
        return out
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
    elif not (steps <= generated <= tokens) or not (step_s or 0) > 0:
        # Each request step delivers at least one token, and the window is inside the level.
        out["alarms"]["counters-vs-usage"] = (
            f"over the window the counters give {generated:g} tokens in {steps:g} steps of "
            f"{step_s or 0:g} s in all, the streams {tokens} tokens in the whole level: another "
            "client's requests, counters that went backwards, or a server that counts differently"
        )
    else:
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
    running = [r for r in edges["running"] if r is not None]  # None: the server has no gauge
    if running and max(running) < n:
        out["alarms"]["client-bottleneck"] = (
            f"the server's running gauge read {max(running):g}, never {n}: the client "
            "did not keep the level busy"
        )
    return out


def sweep(
    target: Target,
    prompts: list[Prompt],
    options: Options,
    levels: list[int],
    out: RunDir,
    progress: Callable[[str], None] = lambda m: None,
) -> dict:
    """Each suite's first prompt at each level; returns the summary written to `out`."""
    if scrape(target) is None:
        progress("no /metrics: aggregate tok/s only, no tokens/step or ms/step")
    suites: dict[str, dict] = {}
    firsts: dict[str, Prompt] = {}
    for prompt in prompts:
        firsts.setdefault(prompt.suite, prompt)
    for prompt in firsts.values():
        if prompt.context:  # a context suite's prompt is padded against the server, as in run.bench
            progress(f"{prompt.name}: padding to {prompt.context} tokens")
            prompt = tokenizer.padded(target, prompt)
        for i in range(options.warmups):
            progress(f"{prompt.suite}: warm-up {i + 1}/{options.warmups}")
            client.stream(
                target.url,
                target.model,
                prompt.text,
                prompt.max_tokens,
                target.headers,
                sampling=options.sampling,
            )
        rows = []
        for n in levels:
            progress(f"{prompt.suite}: {n} concurrent streams" if n > 1 else f"{prompt.suite}: 1 stream")
            row = level(target, prompt, options, n)
            out.add({"suite": prompt.suite, "prompt": prompt.name, **row})
            rows.append(row)
        suites[prompt.suite] = {
            "prompt": prompt.name,
            "content": prompt.content,
            "context": prompt.context,
            "output_tokens": prompt.max_tokens,
            "levels": rows,
        }
    summary = {
        "schema": SCHEMA,
        "created": datetime.now(UTC).isoformat(),
        "conditions": {**conditions(target, options, prompts), "concurrency": levels},
        "suites": suites,
    }
    out.finish(summary, report.sweep_markdown(summary))
    plots.draw_sweep(summary, out.path / "plots")
    return summary
