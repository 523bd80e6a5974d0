"""One measured request: streamed alone between two reads of the counters, its deltas decomposed
into factors, judged ours alone or not, and its alarms raised."""

from __future__ import annotations

import hashlib
import time
from contextlib import nullcontext

from seatkit.bench import decompose, metrics, telemetry
from seatkit.bench.counters import GaugeSampler, after, wait_idle
from seatkit.bench.target import Options, Target
from seatkit.bench.tokenizer import token_ids
from seatkit.bench.workload import Prompt
from seatkit.serve import client


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
    done, gauges, gpu_telemetry, cpu = _stream(target, prompt, options, around, cache_salt)
    cut = truncation(done, prompt.max_tokens)
    # The tokens that streamed, by the stream's own running usage where it has one: a final usage
    # that says otherwise is recorded beside it, never used.
    tokens = done.streamed_tokens if done.streamed_tokens is not None else done.completion_tokens
    record = {
        **_described(prompt, done, cache_salt),
        "repetition": decompose.repetition(_output_tokens(target, done)),
        "gauges": gauges,
        "gpu_telemetry": gpu_telemetry,
        "client_cpu_us_per_token": cpu * 1e6 / max(tokens, 1),
        "truncated": cut,
    }
    delta, record["gauges_after"], record["exclusive_problems"] = _overlap(
        target, None if cut else before, done, gauges, tokens
    )
    record["counter_deltas"] = {**delta.values, "per_position": delta.per_position, "success": delta.success}
    timing = (done.ttft_s, done.last_s, done.prompt_tokens, done.first_event_tokens)
    record["factors"] = decompose.factors(delta, tokens, *timing, target.k, reused_salt)
    record["alarms"] = decompose.alarms(record["factors"], target.k, record["repetition"])
    if record["usage_note"]:
        record["alarms"]["usage-disagrees"] = record["usage_note"]
    record["exclusive"] = not record["exclusive_problems"] and not cut
    return record


def _stream(
    target: Target, prompt: Prompt, options: Options, around, cache_salt: str | None
) -> tuple[client.Completion, dict, object, float]:
    """The request streamed with the samplers on: its completion, the gauges' peaks, the GPUs'
    telemetry and the client's CPU seconds."""
    sampler, gpus = GaugeSampler(target, options.sample_hz), telemetry.Sampler()
    sampler.start()
    gpus.start()
    cpu = time.process_time()
    try:
        with around():
            done = target.stream(
                prompt, options.sampling, extra={"cache_salt": cache_salt} if cache_salt else None
            )
    finally:
        gauges, gpu_telemetry = sampler.finish(), gpus.finish()
    return done, gauges, gpu_telemetry, time.process_time() - cpu


def _output_tokens(target: Target, done: client.Completion) -> list:
    """The output as tokens: the stream's ids where it sent them, else the server's tokenizer on
    its text, else its characters (a server with no /tokenize)."""
    if done.token_ids:
        return done.token_ids
    return token_ids(target, done.text) or list(done.text)


def _described(prompt: Prompt, done: client.Completion, cache_salt: str | None) -> dict:
    """What was asked and what came back, as the record states it."""
    return {
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
        "text_sha256": hashlib.sha256(done.text.encode()).hexdigest(),
        "final_usage_tokens": done.completion_tokens,
        "client_total_s": done.total_s,
        "streamed_tokens": done.streamed_tokens,
        "cache_salt": cache_salt,
        "usage_note": usage_note(done.streamed_tokens, done.completion_tokens),
    }


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


def _overlap(target: Target, before, done: client.Completion, gauges: dict, tokens: int):
    """Our request's counter deltas, the gauges after it, and why another request may have shared
    the server; nothing to judge without counters (`before` None: none, or a cut stream, which is
    the server's failure, not another client's)."""
    if before is None:
        return metrics.Snapshot(), {}, []
    closing = after(target, before)
    delta = closing - before
    running, waiting = (max(gauges[g], closing.gauges.get(g, 0.0)) for g in ("running", "waiting"))
    still = closing.gauges.get("running", 0.0) + closing.gauges.get("waiting", 0.0)
    ours = (delta, tokens, done.prompt_tokens, done.finish_reason, "length", running, waiting)
    problems = exclusivity(*ours, final_tokens=done.completion_tokens, still_running=still)
    if not {"running", "waiting"} & set(closing.gauges) and "prefix_queries" not in delta.values:
        problems.append(
            "the server exports neither the running and waiting gauges nor the prefix-cache queries, "
            "the only sources that show another client's prompt while it prefills: alone is unproven"
        )
    return delta, closing.gauges, problems


def exclusivity(
    delta: metrics.Snapshot,
    completion_tokens: int,
    prompt_tokens: int,
    finish_reason: str | None,
    expected_reason: str,
    peak_running: float,
    peak_waiting: float,
    final_tokens: int | None = None,
    still_running: float = 0.0,
) -> list[str]:
    """Why another request may have shared the server with ours; empty only when every source
    that could show one says none existed from before our first token to after our last: the
    success, generation and prompt counters, the prefix-cache queries (a prompt counts there when
    scheduled, long before its first token) and the running and waiting gauges, including once
    ours finished (another client's chunked prefill counts nowhere else yet). The server's count
    may match the stream's or its own final usage (which can differ: see usage_note)."""
    if _reset(delta, min(completion_tokens, final_tokens or completion_tokens), prompt_tokens):
        return [
            "the server's counters went backwards or counted less than our request alone: they were "
            "reset during it (an engine restart), so they cannot show whether it ran alone"
        ]
    problems = []
    finished = sum(delta.success.values())
    if finished != 1 or delta.success.get(expected_reason, 0) != 1:
        problems.append(
            f"{finished:g} requests finished during ours (expected 1 with reason {expected_reason})"
        )
    if finish_reason != expected_reason:
        problems.append(f"our finish reason was {finish_reason}, expected {expected_reason}")
    generated = delta.values.get("generation_tokens")
    if generated is not None and generated not in (completion_tokens, final_tokens):
        problems.append(f"server generated {generated:g} tokens, we received {completion_tokens}")
    prompted = delta.values.get("prompt_tokens")
    if prompted is not None and prompted != prompt_tokens:
        problems.append(f"server took {prompted:g} prompt tokens, ours had {prompt_tokens}")
    queried = delta.values.get("prefix_queries")
    if queried is not None and queried > prompt_tokens:
        problems.append(
            f"the prefix cache was queried for {queried:g} prompt tokens, ours had {prompt_tokens}: "
            "another prompt was scheduled"
        )
    if still_running > 0:
        problems.append(
            f"{still_running:g} requests were still running or waiting after ours finished: "
            "another request (a prompt still prefilling) overlapped ours"
        )
    elif peak_running > 1 or peak_waiting > 0:
        problems.append(f"gauges saw {peak_running:g} running and {peak_waiting:g} waiting")
    return problems


def _reset(delta: metrics.Snapshot, tokens: int, prompt_tokens: int) -> bool:
    """Counters only rise, and never by less than our own request adds: another client can only
    add to them, so a fall or a shortfall is a reset."""
    counted = [*delta.values.values(), *delta.per_position.values(), *delta.success.values()]
    generated, prompted = delta.values.get("generation_tokens"), delta.values.get("prompt_tokens")
    return (
        any(v < 0 for v in counted)
        or (generated is not None and generated < tokens)
        or (prompted is not None and prompted < prompt_tokens)
    )


def usage_note(streamed: int | None, final: int) -> str | None:
    """The stream's running usage against its final usage; None when they agree or one is missing."""
    if streamed is None or streamed == final:
        return None
    return (
        f"the final usage says {final} tokens, the stream's running usage {streamed}: the "
        "stream's count is used"
    )
