"""`seat bench`: batch-1 requests, strictly one after another, each decomposed from /metrics deltas.

Per request: read /metrics when the server is idle, stream the request, read /metrics again once
the success counter moved, then prove the deltas belong to this request alone (or discard it, count
it and run it again, a bounded number of times). The success, generation and prompt counters
before and after prove it without polling while the request streams: polling delays the stream
(see CAVEATS.md). A gauge sampler can still be turned on (Options.sample_hz) to measure that.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
import platform
import re
import statistics
import threading
import time
import uuid
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

import requests

from seatkit import __version__
from seatkit.bench import decompose, metrics, padding, plots, telemetry
from seatkit.bench import summary as schema
from seatkit.bench.report import markdown
from seatkit.bench.workload import Prompt
from seatkit.errors import SeatError
from seatkit.serve import client
from seatkit.text import printable

SCHEMA = "seatkit.bench/2"  # /2: withheld figures, sources, cold/warm TTFT, harness figures
SCRAPE_S = 10.0  # a whole /metrics, /tokenize or /v1/models answer, not one read of it
RERUNS = 3  # extra tries per measured request whose deltas were not ours alone


@dataclass
class Target:
    url: str  # never holds credentials: of_url moves them into headers
    model: str
    headers: dict = field(default_factory=dict)
    k: int | None = None
    conditions: dict = field(default_factory=dict)
    verify: Callable[[], object] | None = None  # raises when the server is not the seat started


@dataclass
class Options:
    warmups: int = 2
    repeats: int = 5
    sampling: dict = field(default_factory=lambda: {"temperature": 0.0, "top_p": 1.0, "seed": 0})
    sample_hz: float = 0.0  # gauge scrapes per second while a request streams; 0: none


def scrape(target: Target) -> metrics.Snapshot | None:
    """The server's counters now; None when it has no /metrics."""
    try:
        answer = client.fetch("GET", f"{target.url}/metrics", SCRAPE_S, headers=target.headers)
    except requests.RequestException as exc:
        raise SeatError(f"cannot read {target.url}/metrics: {exc}") from None
    if answer.status_code == 404:
        return None
    snapshot = metrics.parse(answer.text, target.model)
    return snapshot if snapshot.values or snapshot.success else None


class GaugeSampler(threading.Thread):
    """Peaks of the running and waiting gauges while our request streams."""

    def __init__(self, target: Target, hz: float):
        super().__init__(daemon=True)
        self.target, self.hz, self.stop_event = target, hz, threading.Event()
        self.peak = {"running": 0.0, "waiting": 0.0}
        self.samples = 0

    def run(self):
        while self.hz and not self.stop_event.wait(1 / self.hz):
            try:
                snapshot = scrape(self.target)
            except SeatError:
                continue
            if snapshot:
                self.samples += 1
                for key in self.peak:
                    self.peak[key] = max(self.peak[key], snapshot.gauges.get(key, 0.0))

    def finish(self) -> dict:
        self.stop_event.set()
        self.join()
        return {**self.peak, "samples": self.samples, "hz": self.hz}


def wait_idle(target: Target, timeout: float = 60.0) -> metrics.Snapshot | None:
    deadline = time.monotonic() + timeout
    while True:
        snapshot = scrape(target)
        if snapshot is None or not (snapshot.gauges.get("running") or snapshot.gauges.get("waiting")):
            return snapshot
        if time.monotonic() > deadline:
            raise SeatError(
                f"{target.url} stayed busy for {timeout:.0f} s: another client is using it",
                "a batch-1 bench needs the server to itself",
            )
        time.sleep(0.2)


def after(
    target: Target, before: metrics.Snapshot, timeout: float = 10.0, finishes: int = 1
) -> metrics.Snapshot:
    """Counters once the frontend has recorded our requests' finishes."""
    deadline = time.monotonic() + timeout
    while True:
        after = scrape(target)
        if after is None:
            raise SeatError(
                f"{target.url}/metrics vanished during the bench",
                "the server restarted or something else now answers on its port",
            )
        if sum((after - before).success.values()) >= finishes or time.monotonic() > deadline:
            return after
        time.sleep(0.05)


def max_model_len(target: Target) -> int | None:
    try:
        models = client.fetch("GET", f"{target.url}/v1/models", SCRAPE_S, headers=target.headers).json()
        limit = next(m.get("max_model_len") for m in models["data"] if m["id"] == target.model)
        return limit if isinstance(limit, int) and not isinstance(limit, bool) else None
    except (SeatError, requests.RequestException, ValueError, KeyError, TypeError, StopIteration):
        return None


def padded(target: Target, prompt: Prompt) -> Prompt:
    """The prompt padded to its context target, counted by the server's own tokenizer."""

    def count(text: str) -> int:
        tokens, _ = token_hash(target, text)
        if tokens is None:
            raise SeatError(f"{target.url} has no /tokenize: a context can't be built to a token target")
        return tokens

    return replace(prompt, text=padding.pad(prompt.text, prompt.padding, prompt.context, count))


def token_hash(target: Target, text: str) -> tuple[int | None, str | None]:
    """Token count and SHA-256 of the token ids, from the server's /tokenize when it has one."""
    try:
        answer = client.fetch(
            "POST",
            f"{target.url}/tokenize",
            SCRAPE_S,
            headers=target.headers,
            json={"model": target.model, "prompt": text},
        )
        found = answer.json() if answer.ok else None
    except (requests.RequestException, ValueError):
        return None, None
    if found is None:
        return None, None
    ids = _token_ids(found)
    if ids is None:
        raise SeatError(
            f'{target.url}/tokenize answered neither vLLM\'s {{"tokens": [ids]}} nor '
            f'TGI\'s [{{"id": id}}, ...]: {printable(repr(found)[:120])}',
            "is this an LLM server? bench it with --url only if it speaks vLLM's API",
        )
    return len(ids), hashlib.sha256(json.dumps(ids).encode()).hexdigest()


def _token_ids(found) -> list[int] | None:
    """Token ids from vLLM's /tokenize ({"tokens": [...]}) or TGI's ([{"id": ...}, ...])."""
    if isinstance(found, dict):
        found = found.get("tokens")
    elif isinstance(found, list) and all(isinstance(t, dict) for t in found):
        found = [t.get("id") for t in found]
    if isinstance(found, list) and all(isinstance(t, int) and not isinstance(t, bool) for t in found):
        return found
    return None


def measure(
    target: Target,
    prompt: Prompt,
    options: Options,
    around=nullcontext,
    cache_salt: str | None = None,
    reused_salt: bool = False,
) -> dict:
    """One request with its counter deltas, factors, exclusivity verdict and alarms.

    `around` is entered just before the request is sent and left just after its last byte
    (`seat bench --nsys` starts and stops a trace there). A new `cache_salt` keeps the server's
    prefix cache out of the request's TTFT; the same salt again (`reused_salt`) measures the warm
    TTFT."""
    before = wait_idle(target)
    sampler, gpus = GaugeSampler(target, options.sample_hz), telemetry.Sampler()
    sampler.start()
    gpus.start()
    cpu = time.process_time()
    try:
        with around():
            done = client.stream(
                target.url,
                target.model,
                prompt.text,
                prompt.max_tokens,
                target.headers,
                sampling=options.sampling,
                extra={"cache_salt": cache_salt} if cache_salt else None,
                deadline=client.allowed_seconds(prompt.max_tokens, prompt.context),
            )
    finally:
        gauges, gpu_telemetry = sampler.finish(), gpus.finish()
    cpu = time.process_time() - cpu
    cut = truncation(done, prompt.max_tokens)
    # The tokens that streamed, by the stream's own running usage where it has one: a final usage
    # that says otherwise is recorded beside it, never used.
    tokens = done.streamed_tokens if done.streamed_tokens is not None else done.completion_tokens
    record = {
        "suite": prompt.suite,
        "prompt": prompt.name,
        "content": prompt.content,
        "prompt_sha256": prompt.sha256,
        "prompt_file_sha256": prompt.file_sha256,
        "context": prompt.context,
        "padding": prompt.padding,
        "max_tokens": prompt.max_tokens,
        "finish_reason": done.finish_reason,
        "chunks": done.chunks,
        "gauges": gauges,
        "text_sha256": hashlib.sha256(done.text.encode()).hexdigest(),
        "repetition": decompose.repetition(done.text),
        "gpu_telemetry": gpu_telemetry,
        "client_cpu_us_per_token": cpu * 1e6 / max(tokens, 1),
        "truncated": cut,
        "final_usage_tokens": done.completion_tokens,
        "client_total_s": done.total_s,
        "streamed_tokens": done.streamed_tokens,
        "cache_salt": cache_salt,
        "usage_note": decompose.usage_note(done.streamed_tokens, done.completion_tokens),
    }
    if before is None or cut:  # a cut stream is the server's failure, not another client's
        delta = metrics.Snapshot()
        record["exclusive_problems"] = []
    else:
        delta = after(target, before) - before
        record["exclusive_problems"] = decompose.exclusivity(
            delta,
            tokens,
            done.prompt_tokens,
            done.finish_reason,
            "length",
            gauges["running"],
            gauges["waiting"],
            final_tokens=done.completion_tokens,
        )
    record["counter_deltas"] = {**delta.values, "per_position": delta.per_position, "success": delta.success}
    record["factors"] = decompose.factors(
        delta,
        tokens,
        done.ttft_s,
        done.last_s,
        done.prompt_tokens,
        done.first_event_tokens,
        target.k,
        reused_salt,
    )
    record["alarms"] = decompose.alarms(
        record["factors"], target.k, done.text, target.conditions.get("draft_method")
    )
    if record["usage_note"]:
        record["alarms"]["usage-disagrees"] = record["usage_note"]
    record["exclusive"] = not record["exclusive_problems"] and not cut
    return record


def truncation(done: client.Completion, max_tokens: int) -> str | None:
    """Why a stream is not a whole measurement (ignore_eos asks for exactly max_tokens); None if whole."""
    tokens = done.streamed_tokens if done.streamed_tokens is not None else done.completion_tokens
    if done.cut:
        return f"the stream broke after {tokens} tokens ({done.cut})"
    if done.finish_reason is None:
        return f"the stream ended without a finish reason after {tokens} tokens"
    if tokens < max_tokens:
        return f"{tokens} of {max_tokens} tokens arrived under ignore_eos"
    return None


def _stats(values: list[float]) -> dict | None:
    values = [v for v in values if v is not None]
    if not values:
        return None
    mean = statistics.fmean(values)
    finite = all(math.isfinite(v) for v in values)  # else pstdev fails; the schema names the figure
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "cv": statistics.pstdev(values) / mean if mean and finite else None,
        "n": len(values),
    }


FIGURES = (
    "decode_tok_s",
    "tokens_per_step",
    "ms_per_step",
    "drafter_tokens_per_step",
    "draft_acceptance",
    "accepted_per_drafted_step",
    "ttft_ms",
    "client_ttft_ms",
    "prefill_tok_s",
    "warm_ttft_ms",
)


def _withheld(rows: list[dict]) -> dict[str, str]:
    """Each figure some request withheld: in how many, and why (the first reason given)."""
    out = {}
    for name in FIGURES:
        reasons = [r["factors"].get("withheld", {}).get(name) for r in rows]
        given = [why for why in reasons if why]
        if given:
            out[name] = f"withheld in {len(given)} of {len(rows)} requests: {given[0]}"
    return out


def _sources(rows: list[dict]) -> dict[str, str]:
    """Each figure's clock and source over a suite's requests (more than one where they differ)."""
    names = dict.fromkeys(k for r in rows for k in r["factors"].get("sources", {}))
    return {
        k: " or ".join(
            dict.fromkeys(r["factors"]["sources"][k] for r in rows if k in r["factors"].get("sources", {}))
        )
        for k in names
    }


LDB_SUSTAINED = "llm_decode_bench sustained C=1"


def harness_figures(rows: list[dict]) -> dict:
    """What other harnesses would have printed, from the same requests. llm_decode_bench's
    sustained C=1 mode restarts one stream as it finishes and divides every token (its usage
    deltas, the prefill's first token too) by a window spanning the restarts: over back-to-back
    requests that is all tokens over all request time, TTFT gaps included. Its restarts repeat one
    prompt, so its TTFTs are prefix-cache hits: the warm requests stand in where there are any."""
    warm = [r for r in rows if r["factors"].get("prefix_cache") == "warm"]
    used = warm or rows
    timed = [r for r in used if r.get("client_total_s")]
    if not timed:
        return {}
    tokens = sum(r["factors"]["completion_tokens"] for r in timed)
    return {
        LDB_SUSTAINED: {
            "decode_tok_s": tokens / sum(r["client_total_s"] for r in timed),
            "requests": len(timed),
            "prefix_cache": "warm" if warm else "cold or unknown (reads low against ldb's warm restarts)",
            "definition": "all tokens of back-to-back requests over their time from send to last byte, "
            "TTFT included (client clock)",
        }
    }


def summarize(records: list[dict]) -> dict:
    """Per suite and per prompt: median, min, max and CV of each figure; the best run labelled."""
    kept = [r for r in records if r["exclusive"]]
    out = {}
    for suite in dict.fromkeys(r["suite"] for r in kept):
        rows = [r for r in kept if r["suite"] == suite]
        best = max(rows, key=lambda r: r["factors"]["decode_tok_s"] or 0)
        positions = [
            r["factors"]["acceptance_unconditional"]
            for r in rows
            if r["factors"].get("acceptance_unconditional")
        ]
        out[suite] = {
            "content": rows[0]["content"],
            "requests": len(rows),
            "context": rows[0].get("context", 0),
            "padding": rows[0].get("padding"),
            "output_tokens": rows[0].get("max_tokens"),
            **{name: _stats([r["factors"].get(name) for r in rows]) for name in FIGURES},
            "acceptance_by_position": [statistics.median(p) for p in zip(*positions)] if positions else [],
            "withheld": _withheld(rows),
            "sources": _sources(rows),
            "harness_figures": harness_figures(rows),
            "prefix_cache": {
                state: sum(r["factors"].get("prefix_cache") == state for r in rows)
                for state in ("cold", "warm", "unknown")
            },
            "best_run": {
                "label": "best run (a record is a maximum; the median is the typical figure)",
                "prompt": best["prompt"],
                "decode_tok_s": best["factors"]["decode_tok_s"],
                "tokens_per_step": best["factors"].get("tokens_per_step"),
                "ms_per_step": best["factors"].get("ms_per_step"),
            },
            "prompts": {
                name: {
                    fig: _stats([r["factors"].get(fig) for r in rows if r["prompt"] == name])
                    for fig in FIGURES
                }
                for name in dict.fromkeys(r["prompt"] for r in rows)
            },
        }
    return schema.check_suites(out, "the run's summary")


def _alarm_summary(records: list[dict]) -> dict[str, dict]:
    """Each kind of alarm: how many kept requests raised it, and one of its messages."""
    out: dict[str, dict] = {}
    for record in records:
        for kind, message in record["alarms"].items():
            out.setdefault(kind, {"requests": 0, "example": message})["requests"] += 1
    return out


def conditions(target: Target, options: Options, prompts: list[Prompt]) -> dict:
    try:
        version = client.fetch("GET", f"{target.url}/version", SCRAPE_S).json().get("version")
    except (SeatError, requests.RequestException, ValueError, AttributeError):
        version = None
    return {
        "url": target.url,
        "model": target.model,
        "engine_version": version,
        "k": target.k,
        "sampling": options.sampling,
        "ignore_eos": True,
        "reasoning": "off",
        "warmups": options.warmups,
        "repeats": options.repeats,
        "suites": sorted({p.suite for p in prompts}),
        "output_tokens": sorted({p.max_tokens for p in prompts}),
        "client": {
            "seatkit": __version__,
            "host": platform.node(),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
        },
        **target.conditions,
    }


def folder_name(name: str) -> str:
    """A run name as one safe path component: 'org/model' -> 'org-model', '../..' -> 'run'."""
    safe = re.sub(r"\.{2,}", ".", re.sub(r"[^A-Za-z0-9._-]+", "-", name)).strip(".-")
    return safe[:80] or "run"


def new_folder(root: Path, name: str) -> Path:
    """root/<UTC time>-<name>, new: a second run in the same second gets -2, -3, ..."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    base = f"{stamp}-{folder_name(name)}"
    try:
        root.mkdir(parents=True, exist_ok=True)
        for n in itertools.count(1):
            path = root / (base if n == 1 else f"{base}-{n}")
            try:
                path.mkdir()
                return path
            except FileExistsError:
                continue
    except OSError as exc:  # --out is a file, read-only, or under one
        raise SeatError(
            f"cannot make a run folder in {root}: {exc.strerror}", "point --out at a folder you can write"
        ) from None


class RunDir:
    """runs/<time>-<name>/: requests.jsonl flushed per request, then summary.json and report.md."""

    def __init__(self, root: Path, name: str):
        self.path = new_folder(root, name)
        self._requests = (self.path / "requests.jsonl").open("a")

    def add(self, record: dict) -> None:
        self._requests.write(json.dumps(record) + "\n")
        self._requests.flush()
        os.fsync(self._requests.fileno())

    def finish(self, summary: dict, report: str) -> None:
        self._requests.close()
        (self.path / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
        (self.path / "report.md").write_text(report)


def not_alone(name: str, record: dict) -> SeatError:
    """The refusal after every try's counters disagreed with its stream, naming the disagreement:
    other clients only where the counters saw other requests."""
    problems = record["exclusive_problems"]
    crowded = (
        record["gauges"]["running"] > 1
        or record["gauges"]["waiting"] > 0
        or sum(record["counter_deltas"]["success"].values()) > 1
    )
    hint = (
        "stop other clients; a batch-1 bench needs the server alone"
        if crowded
        else "no other request was seen: the server counts differently from its stream, so its "
        "counters can't be split per request (report it with requests.jsonl)"
    )
    return SeatError(
        f"{name}: in {1 + RERUNS} tries the counters never matched the stream alone: " + "; ".join(problems),
        hint,
    )


def _verify(target: Target, when: str) -> None:
    """The seat's identity, re-proved around each group: a stranger's numbers are never kept."""
    if target.verify is None:
        return
    try:
        target.verify()
    except SeatError as exc:
        raise SeatError(f"{when}: {exc.message}", exc.hint) from None


def bench(
    target: Target,
    prompts: list[Prompt],
    options: Options,
    out: RunDir,
    progress: Callable[[str], None] = lambda m: None,
    reference=None,
) -> dict:
    """Warm-ups, then measured repeats of every prompt; returns the summary written to `out`.
    `reference`, a reference card, is drawn over the acceptance-by-position plot."""
    if scrape(target) is None:
        progress("no /metrics with spec-decode counters: client timing only, no decomposition")
    hashes, skipped, truncated = {}, {}, []
    discarded = 0
    records = []
    limit = max_model_len(target)
    for prompt in prompts:
        if prompt.context:
            if limit and prompt.context + prompt.max_tokens > limit:
                skipped[prompt.name] = (
                    f"context {prompt.context} + output {prompt.max_tokens} "
                    f"exceeds the server's max_model_len {limit}"
                )
                progress(f"{prompt.name}: skipped ({skipped[prompt.name]})")
                continue
            progress(f"{prompt.name}: padding to {prompt.context} tokens")
            prompt = padded(target, prompt)
        tokens, ids_sha = token_hash(target, prompt.text)
        hashes[prompt.name] = {
            "text_sha256": prompt.sha256,
            "file_sha256": prompt.file_sha256,
            "tokens": tokens,
            "token_ids_sha256": ids_sha,
            "context": prompt.context,
            "padding": prompt.padding,
        }
        _verify(target, f"before {prompt.name}")
        for i in range(options.warmups):
            progress(f"{prompt.suite}/{prompt.name}: warm-up {i + 1}/{options.warmups}")
            client.stream(
                target.url,
                target.model,
                prompt.text,
                prompt.max_tokens,
                target.headers,
                sampling=options.sampling,
                deadline=client.allowed_seconds(prompt.max_tokens, prompt.context),
            )
        salt = None
        for i in range(options.repeats):
            for attempt in range(1 + RERUNS):
                # Even repeats on a new salt (a cold prefix cache), each retry too (the discarded
                # try warmed the last one); odd ones on the salt before them (warm).
                salt = f"seatkit-{uuid.uuid4().hex}" if i % 2 == 0 else salt
                record = measure(target, prompt, options, cache_salt=salt, reused_salt=i % 2 == 1)
                record.update(repeat=i, attempt=attempt)
                out.add(record)
                f = record["factors"]
                if record["truncated"]:  # recorded, never measured, never blamed on others
                    truncated.append(f"{prompt.name} repeat {i + 1}: {record['truncated']}")
                    progress(
                        f"{prompt.suite}/{prompt.name}: {i + 1}/{options.repeats} "
                        f"truncated: {record['truncated']}"
                    )
                    break
                progress(
                    f"{prompt.suite}/{prompt.name}: {i + 1}/{options.repeats} "
                    f"{f['decode_tok_s'] or 0:.1f} tok/s"
                    + ("" if record["exclusive"] else " (discarded: not alone)")
                )
                if record["exclusive"]:
                    records.append(record)
                    break
                discarded += 1
            else:
                raise not_alone(prompt.name, record)
        _verify(target, f"after {prompt.name}")
    summary = {
        "schema": SCHEMA,
        "created": datetime.now(UTC).isoformat(),
        "conditions": conditions(target, options, prompts),
        "prompts": hashes,
        "discarded": discarded,
        "skipped": skipped,
        "truncated": truncated,
        "alarms": _alarm_summary(records),
        "suites": summarize(records),
        "fits": plots.fits(records),
        "reference": reference.name if reference else None,
    }
    out.finish(summary, markdown(summary))
    if records:
        plots.draw(records, summary, out.path / "plots", reference)
    return summary
