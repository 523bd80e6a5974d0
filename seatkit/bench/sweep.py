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

import threading
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime

from seatkit.bench import counters, metrics, plots, report, tokenizer
from seatkit.bench.counters import scrape
from seatkit.bench.levels import Stream, figures
from seatkit.bench.run import RunDir, chat_template, conditions, warm_up
from seatkit.bench.target import Options, Target
from seatkit.bench.workload import Prompt
from seatkit.errors import SeatError
from seatkit.serve import client

SCHEMA = "seatkit.bench.sweep/1"


class Window:
    """Scrapes /metrics when the last stream starts decoding and when the first one finishes."""

    def __init__(self, target: Target, level: int):
        self.target, self.level = target, level
        self.started, self.ended = threading.Event(), threading.Event()
        self.first_tokens, self.lock = 0, threading.Lock()
        self.edges: list[tuple[float, float, metrics.Snapshot | None]] = []  # (sent, answered, counters)
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

    def _timed(self) -> tuple[float, float, metrics.Snapshot | None]:
        sent = time.monotonic()
        snapshot = scrape(self.target)
        return sent, time.monotonic(), snapshot

    def close(self) -> dict | None:
        """The window's counter deltas and edges, or None when there was no steady window."""
        self.started.set()
        self.ended.set()
        self.thread.join()
        if len(self.edges) < 2:
            return None
        (t0, open_done, first), (t1, close_done, last) = self.edges
        if first is None or last is None:
            return None
        return {
            "start": t0,
            "end": t1,
            "delta": last - first,
            "opened": open_done,
            "scrape_ms": [(open_done - t0) * 1000, (close_done - t1) * 1000],
            "running": [first.gauges.get("running"), last.gauges.get("running")],
        }


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
            stream.done = target.stream(prompt, options.sampling, on_event=lambda c: window.event(stream, c))
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
    target = replace(target, chat=chat_template(target))  # the model's own chat format, as run.bench
    suites: dict[str, dict] = {}
    firsts: dict[str, Prompt] = {}
    for prompt in prompts:
        firsts.setdefault(prompt.suite, prompt)
    for prompt in firsts.values():
        if prompt.context:  # a context suite's prompt is padded against the server, as in run.bench
            progress(f"{prompt.name}: padding to {prompt.context} tokens")
            prompt = tokenizer.padded(target, prompt)
        warm_up(target, prompt, options, progress, prompt.suite)
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
