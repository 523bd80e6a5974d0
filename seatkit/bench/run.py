"""`seat bench`: batch-1 requests, strictly one after another, each decomposed from /metrics deltas.

Per request: read /metrics when the server is idle, stream the request, read /metrics again once
the success counter moved, then prove the deltas belong to this request alone (or discard it, count
it and run it again, a bounded number of times). The success, generation and prompt counters
before and after prove it without polling while the request streams: polling delays the stream
(see CAVEATS.md). A gauge sampler can still be turned on (Options.sample_hz) to measure that.
"""

from __future__ import annotations

import json
import os
import platform
import re
import uuid
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import requests

from seatkit import __version__
from seatkit.bench import aggregate, counters, load, plots
from seatkit.bench.report import markdown
from seatkit.bench.request import measure
from seatkit.bench.target import Options, Target, with_differences
from seatkit.bench.tokenizer import max_model_len, padded, token_hash, token_ids
from seatkit.bench.workload import Prompt
from seatkit.errors import SeatError
from seatkit.serve import client

SCHEMA = "seatkit.bench/2"  # /2: withheld figures, sources, cold/warm TTFT, harness figures
RERUNS = 3  # extra tries per measured request whose deltas were not ours alone


def conditions(target: Target, options: Options, prompts: list[Prompt]) -> dict:
    try:
        version = client.fetch("GET", f"{target.url}/version", counters.SCRAPE_S).json().get("version")
    except (SeatError, requests.RequestException, ValueError, AttributeError):
        version = None
    return {
        "url": target.url,
        "model": target.model,
        "engine_version": version,
        "device": seat_device(version, target.conditions),
        "k": target.k,
        "sampling": options.sampling,
        "ignore_eos": True,
        "reasoning": "off",
        "prompt_format": "the model's chat template (chat endpoint)"
        if target.chat
        else "raw text (the server applies no chat template)",
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


def chat_template(target: Target) -> bool:
    """Whether the server reads a user message in the model's own chat template (its /tokenize
    renders one), so prompts go to its chat endpoint, reasoning off, as the model is used."""
    return token_ids(target, "ping", chat=True) is not None


def seat_device(version: str | None, recorded: dict) -> str | None:
    """The seat's device as the seat says it (its record's, or a CPU build's version: vLLM's
    CPU wheels are versioned `X+cpu`); None when it does not say. Never the GPUs of the machine
    the bench client runs on: a --url seat is elsewhere, or on none of them."""
    if recorded.get("device"):
        return recorded["device"]
    return "cpu" if isinstance(version, str) and version.endswith("+cpu") else None


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
        n = 1
        while True:
            path = root / (base if n == 1 else f"{base}-{n}")
            try:
                path.mkdir()
                return path
            except FileExistsError:
                n += 1
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
    deltas, closing = record["counter_deltas"], record.get("gauges_after") or {}
    crowded = (
        record["gauges"]["running"] > 1
        or record["gauges"]["waiting"] > 0
        or sum(deltas["success"].values()) > 1
        or closing.get("running", 0) + closing.get("waiting", 0) > 0
        or (deltas.get("prefix_queries") or 0) > record["factors"]["prompt_tokens"]
    )
    hint = (
        "stop other clients; a batch-1 bench needs the server alone"
        if crowded
        else "no other request was seen: the server counts differently from its stream, so its "
        "counters can't be split per request (report it with requests.jsonl)"
    )
    said = (
        f"every one of {1 + RERUNS} tries overlapped another request, so none was kept"
        if crowded
        else f"in {1 + RERUNS} tries the counters never matched the stream alone"
    )
    return SeatError(f"{name}: {said}: " + "; ".join(problems), hint)


def _verify(target: Target, when: str) -> str | None:
    """The seat's identity, re-proved around each group: a stranger's numbers are never kept; why
    it could not be proven, which the run carries as its mark, or None."""
    if target.verify is None:
        return None
    try:
        return target.verify()
    except SeatError as exc:
        raise SeatError(f"{when}: {exc.message}", exc.hint) from None


def _ready(
    target: Target, prompt: Prompt, limit: int | None, skipped: dict, progress: Callable[[str], None]
) -> Prompt | None:
    """The prompt padded to its context; None (and why, in skipped) when the server can't take it."""
    if not prompt.context:
        return prompt
    if limit and prompt.context + prompt.max_tokens > limit:
        skipped[prompt.name] = (
            f"context {prompt.context} + output {prompt.max_tokens} exceeds the server's max_model_len {limit}"
        )
        progress(f"{prompt.name}: skipped ({skipped[prompt.name]})")
        return None
    progress(f"{prompt.name}: padding to {prompt.context} tokens")
    return padded(target, prompt)


def _hashes(target: Target, prompt: Prompt) -> dict:
    """What the model was given: the text's hash, and its tokens as the model read them (in its
    chat template when the bench sends it there)."""
    tokens, ids_sha = token_hash(target, prompt.text, target.chat)
    return {
        "text_sha256": prompt.sha256,
        "file_sha256": prompt.file_sha256,
        "tokens": tokens,
        "token_ids_sha256": ids_sha,
        "context": prompt.context,
        "padding": prompt.padding,
    }


def warm_up(
    target: Target, prompt: Prompt, options: Options, progress: Callable[[str], None], what: str
) -> None:
    for i in range(options.warmups):
        progress(f"{what}: warm-up {i + 1}/{options.warmups}")
        target.stream(prompt, options.sampling)


def _repeat(
    target: Target,
    prompt: Prompt,
    options: Options,
    i: int,
    salt: str | None,
    out: RunDir,
    progress: Callable[[str], None],
) -> tuple[dict, int, str | None]:
    """Repeat i, tried again while its counters were not ours alone: its last record (ours alone,
    or cut short), how many tries were discarded, and the cache salt it used."""
    for attempt in range(1 + RERUNS):
        # Even repeats on a new salt (a cold prefix cache), each retry too (the discarded try
        # warmed the last one); odd ones on the salt before them (warm).
        salt = f"seatkit-{uuid.uuid4().hex}" if i % 2 == 0 else salt
        record = measure(target, prompt, options, cache_salt=salt, reused_salt=i % 2 == 1)
        record.update(repeat=i, attempt=attempt)
        out.add(record)
        step = f"{prompt.suite}/{prompt.name}: {i + 1}/{options.repeats}"
        if record["truncated"]:
            progress(f"{step} truncated: {record['truncated']}")
            return record, attempt, salt
        progress(
            f"{step} {record['factors']['decode_tok_s'] or 0:.1f} tok/s"
            + ("" if record["exclusive"] else " (discarded: not alone)")
        )
        if record["exclusive"]:
            return record, attempt, salt
    raise not_alone(prompt.name, record)


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
    if counters.scrape(target) is None:
        progress("no /metrics with spec-decode counters: client timing only, no decomposition")
    target = replace(target, chat=chat_template(target))
    if not target.chat:
        progress(
            "the server has no chat template: prompts go as raw text, which an instruct model may loop on"
        )
    meter = load.Meter(target.url)
    hashes: dict[str, dict] = {}
    skipped: dict[str, str] = {}
    truncated: list[str] = []
    discarded = 0
    records = []
    unproven = []
    limit = max_model_len(target)
    for prompt in prompts:
        ready = _ready(target, prompt, limit, skipped, progress)
        if ready is None:
            continue
        prompt = ready
        hashes[prompt.name] = _hashes(target, prompt)
        unproven.append(_verify(target, f"before {prompt.name}"))
        warm_up(target, prompt, options, progress, f"{prompt.suite}/{prompt.name}")
        salt = None
        for i in range(options.repeats):
            record, tries, salt = _repeat(target, prompt, options, i, salt, out, progress)
            discarded += tries
            if record["truncated"]:  # recorded, never measured, never blamed on others
                truncated.append(f"{prompt.name} repeat {i + 1}: {record['truncated']}")
            else:
                records.append(record)
        unproven.append(_verify(target, f"after {prompt.name}"))
    summary = {
        "schema": SCHEMA,
        "created": datetime.now(UTC).isoformat(),
        "conditions": with_differences(conditions(target, options, prompts), *unproven),
        "machine": meter.read(),
        "prompts": hashes,
        "discarded": discarded,
        "skipped": skipped,
        "truncated": truncated,
        "alarms": aggregate.alarm_summary(records),
        "suites": aggregate.summarize(records),
        "fits": plots.fits(records),
        "reference": reference.name if reference else None,
    }
    out.finish(summary, markdown(summary))
    if records:
        plots.draw(records, summary, out.path / "plots", reference)
    return summary
