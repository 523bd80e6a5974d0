"""One request's decode speed split into its two factors, from counter deltas and client timing.

    decode tok/s = tokens per step / seconds per step

Steps are the server's decode steps (Δ inter-token-latency count: one observation per engine
output after the first token). The first token belongs to prefill: decode tokens are n - 1.
Decode time is the server's own (Δ request decode time) when it exports it: a streamed response can
reach the client in bursts, which distorts client timing. The client's figure is kept beside it,
and is the fallback when the server has no such counter.

Both factors share the numerator and denominator of tok/s, so the identity is exact per request:
tokens per step = decode tokens delivered / steps, seconds per step = decode time / steps. The
counters' 1 + accepted / steps is the drafter's acceptance: vLLM counts drafts accepted in the last
step before max_tokens cuts them, so it can exceed what was delivered.
TTFT is the server's (Δ time_to_first_token histogram) when it exports it, the client's beside it.
"""

from __future__ import annotations

from collections.abc import Sequence

from seatkit.bench.metrics import Snapshot

CLIENT_TOLERANCE = 0.05


def _ratio(a: float, b: float) -> float | None:
    return a / b if a is not None and b else None


LOOP_WIDTH = 8  # tokens per n-gram: a loop repeats whole phrases, ordinary text rarely 8 tokens
# Two-fifths of the output's n-grams seen before in it: a loop, whatever it drafts. A line written
# twice scores just under a half (the first copy's n-grams and the seam are new), so not a half.
LOOP_SHARE = 0.4


def repetition(tokens: Sequence, width: int = LOOP_WIDTH) -> float:
    """Share of the output's token n-grams it already said: 0 for output that never repeats, near
    1 for a loop. On tokens, not words: a loop written without spaces ("a_a_a_") is caught."""
    grams = [tuple(tokens[i : i + width]) for i in range(len(tokens) - width + 1)]
    return 1 - len(set(grams)) / len(grams) if grams else 0.0


def server_ttft_s(delta: Snapshot) -> float | None:
    """Our request's TTFT from the server's histogram, when exactly one observation landed."""
    seconds = delta.values.get("ttft_seconds")
    if delta.values.get("ttft_count") == 1 and seconds is not None and seconds >= 0:
        return seconds
    return None


def _cache_state(hits: float | None, queries: float | None) -> str:
    """cold or warm by the prefix-cache deltas; unknown unless they counted our prompt sanely (a
    counter that never moves, or went backwards, proves nothing about a cold cache)."""
    if hits is None or hits < 0 or (queries is not None and not 0 <= hits <= queries):
        return "unknown"
    if queries is not None and queries <= 0:
        return "unknown"
    return "warm" if hits > 0 else ("cold" if queries is not None else "unknown")


def _disagreement(v: dict, steps_from: str, decode_tokens: int, k: int | None) -> str | None:
    """Why the step counters can't stand beside the stream's count; None when they agree."""
    steps, accepted = v.get("steps") or v.get("drafts") or 0, v.get("accepted") or 0
    excess = steps + accepted - decode_tokens  # drafts accepted in the last step, cut by max_tokens
    if excess >= 0 and (k is None or excess <= k):
        return None
    said = f"steps + accepted drafts give {steps + accepted:g} decode tokens, the stream {decode_tokens}"
    if steps_from == "drafts" and excess < 0:
        return (
            f"{said}: without the inter-token histogram the steps are the drafts counter, and "
            "steps that drafted nothing (ngram with no match) are not in it"
        )
    return (
        f"{said}: the spec-decode counters are not this request's alone (a server that "
        "publishes them on a period, or counts differently)"
    )


DRAFT_FIGURES = (
    *("draft_acceptance", "accepted_per_drafted_step", "tokens_per_drafted_step", "steps_without_drafts"),
    *("drafted_length", "drafted_tokens_per_step", "no_draft_share"),
)
# Every figure of the step counters: withheld together where they disagree with the stream.
COUNTER_FIGURES = (
    *("tokens_per_step", "ms_per_step", "drafter_tokens_per_step", "cut_by_max_tokens", "itl_ms_per_step"),
    *DRAFT_FIGURES,
)


def _draft_disagreement(v: dict, per_position: list[float], steps: float) -> str | None:
    """Why the drafts counters can't be this request's (a reset, a counter gone backwards); None
    when every one is possible: 0 <= drafts <= steps, 0 <= accepted <= drafted tokens, and each
    position accepted at most once per draft."""
    drafts, drafted = v.get("drafts") or 0, v.get("draft_tokens") or 0
    accepted = v.get("accepted") or 0
    if 0 <= drafts <= steps and 0 <= accepted <= drafted and all(0 <= p <= drafts for p in per_position):
        return None
    return (
        f"the drafts counters moved impossibly ({drafts:g} drafts of {drafted:g} tokens, "
        f"{accepted:g} accepted, in {steps:g} steps): reset or not this request's alone"
    )


def factors(
    delta: Snapshot,
    completion_tokens: int,
    ttft_s: float,
    last_s: float,
    prompt_tokens: int,
    first_event_tokens: int | None = None,
    k: int | None = None,
    reused_salt: bool = False,
) -> dict:
    """Every derived quantity of one request; None where the counters cannot give it, with the
    reason in `withheld` where its inputs disagree. `sources` names each figure's clock and source.
    `reused_salt`: the request repeated the one before it, cache_salt and all (meant to be warm).
    """
    out = _timing(delta, completion_tokens, ttft_s, last_s, prompt_tokens, first_event_tokens)
    _withhold_ttft(out, _held(first_event_tokens), reused_salt)
    server_timed = out["timing_source"] == "server"
    out["client_vs_server"] = (
        _ratio(out["client_decode_tok_s"], out["decode_tok_s"]) if server_timed else None
    )
    out["sources"] = _sources(out, delta.values)
    if not out["decomposition"]:
        if delta.has_spec:  # counters that exist but moved impossibly: say so on the row
            why = (
                f"the step counters moved by {out['decode_steps'] or 0:g} during a request of "
                f"{out['decode_tokens']} decode tokens: they are not this request's alone (a server "
                "that publishes them on a period, or counts differently)"
            )
            out["withheld"].update({name: why for name in COUNTER_FIGURES})
        return out
    _split(out, delta, k)
    return out


def _held(first_event_tokens: int | None) -> int | None:
    """A first event that carries more than the first token held it back for a decode step: the
    client clock then starts one step late, so its decode counts only the tokens after that event."""
    return first_event_tokens if first_event_tokens and first_event_tokens > 1 else None


def _timing(
    delta: Snapshot,
    n: int,
    ttft_s: float,
    last_s: float,
    prompt_tokens: int,
    first_event_tokens: int | None,
) -> dict:
    """The request's clocks (server's where it exports them, the client's beside them), its
    prefix-cache state and its raw draft counters."""
    decode_tokens = n - 1
    v = delta.values
    held = _held(first_event_tokens)
    client_decode_s = last_s - ttft_s
    client_decode_tokens = n - held if held else decode_tokens
    server_decode_s = v.get("decode_seconds")
    if server_decode_s is not None and server_decode_s <= 0:
        server_decode_s = None  # a counter that went backwards: the client's clock stands
    decode_s = server_decode_s if server_decode_s else client_decode_s
    server_ttft = server_ttft_s(delta)
    first_token_s = server_ttft if server_ttft is not None else ttft_s
    hits, queries = v.get("prefix_hits"), v.get("prefix_queries")
    drafts = v.get("drafts")
    steps = v.get("steps") or drafts
    client_rate = _ratio(client_decode_tokens, client_decode_s)
    return {
        "completion_tokens": n,
        "prompt_tokens": prompt_tokens,
        "decode_tokens": decode_tokens,
        "ttft_ms": first_token_s * 1000,
        "client_ttft_ms": ttft_s * 1000,
        "ttft_source": "server" if server_ttft is not None else "client",
        "decode_ms": decode_s * 1000,
        "timing_source": "server" if server_decode_s else "client",
        "decode_tok_s": _ratio(decode_tokens, server_decode_s) if server_decode_s else client_rate,
        "client_decode_tok_s": client_rate,
        "prefill_tok_s": _ratio(prompt_tokens, first_token_s),
        "first_event_tokens": first_event_tokens,
        "prefix_cache": _cache_state(hits, queries),
        "prefix_cache_hit_tokens": hits,
        "prefix_cache_query_tokens": queries,
        "warm_ttft_ms": None,
        "drafts": drafts,
        "draft_tokens": v.get("draft_tokens"),
        "accepted": v.get("accepted"),
        "accepted_per_position": [delta.per_position[i] for i in sorted(delta.per_position)],
        "decode_steps": steps,
        # Each step delivers at least one token: other step counts are counters that lie.
        "decomposition": bool(delta.has_spec and steps and 0 < steps <= decode_tokens),
        "withheld": {},
    }


def _withhold_ttft(out: dict, held: int | None, reused_salt: bool) -> None:
    """A TTFT that is not the cold prefill's is withheld, with why: a held first token, a likely
    prefix-cache hit nothing counted, or a counted hit (then it is the warm TTFT)."""
    withheld, cache = out["withheld"], out["prefix_cache"]
    if held and out["ttft_source"] == "client":
        why = (
            f"the first event carried {held} tokens: the first token was held for a decode "
            "step, so the client's TTFT is late by that step"
        )
        withheld.update(ttft_ms=why, prefill_tok_s=why)
        out.update(ttft_ms=None, prefill_tok_s=None)
    if cache == "unknown" and reused_salt:  # likely a hit, and nothing to tell: not cold either
        why = (
            "the request had the cache_salt of the request before and no prefix-cache counter "
            "counted it: it may be a prefix-cache hit"
        )
        withheld.update(ttft_ms=why, prefill_tok_s=why)
        out.update(ttft_ms=None, prefill_tok_s=None)
    if cache == "warm":  # a prefix-cache hit: a warm TTFT, never the cold figure
        hits, queries = out["prefix_cache_hit_tokens"], out["prefix_cache_query_tokens"]
        why = f"a prefix-cache hit ({hits:g} of {queries:g} prompt tokens cached): see warm TTFT"
        out["warm_ttft_ms"] = out["ttft_ms"]
        withheld.update(ttft_ms=why, prefill_tok_s=why)
        out.update(ttft_ms=None, prefill_tok_s=None)


def _sources(out: dict, v: dict) -> dict[str, str]:
    """Each figure's clock and source."""
    steps_from = "inter-token histogram" if v.get("steps") else "drafts counter"
    return {
        "decode_tok_s": (
            "server clock (request decode time)"
            if out["timing_source"] == "server"
            else "client clock (stream)"
        )
        + ", stream's token count",
        "ttft_ms": "server clock (TTFT histogram)"
        if out["ttft_source"] == "server"
        else "client clock (stream)",
        "tokens_per_step": f"stream's token count / {steps_from}",
        "ms_per_step": "decode tok/s and tokens/step",
        "draft_acceptance": "spec-decode counters",
        "prefix_cache": "no prefix-cache counters"
        if out["prefix_cache_hit_tokens"] is None
        else "prefix-cache counters"
        if out["prefix_cache"] != "unknown"
        else "prefix-cache counters that did not count our "
        "prompt (frozen, reset or inconsistent): cache state unknown",
    }


def _split(out: dict, delta: Snapshot, k: int | None) -> None:
    """The two factors and the drafter's figures from the step and draft counters, withheld
    where those counters disagree with the stream."""
    v, withheld = delta.values, out["withheld"]
    decode_tokens, steps = out["decode_tokens"], out["decode_steps"]
    drafts, draft_tokens, accepted = out["drafts"], out["draft_tokens"], out["accepted"]
    disagreement = _disagreement(v, "steps" if v.get("steps") else "drafts", decode_tokens, k)
    per_pos = out["accepted_per_position"]
    unconditional = [a / drafts for a in per_pos] if drafts else []  # no drafts: no curve
    conditional = [
        u / prev if u is not None and prev else None
        for u, prev in zip(unconditional, [1.0] + unconditional[:-1], strict=False)
    ]
    tokens_per_step = decode_tokens / steps
    out.update(
        {
            "accepted_per_drafted_step": _ratio(accepted, drafts),
            "tokens_per_drafted_step": 1 + accepted / drafts if drafts else None,
            "tokens_per_step": tokens_per_step,
            "drafter_tokens_per_step": 1 + accepted / steps,
            "cut_by_max_tokens": steps + accepted - decode_tokens,
            "itl_ms_per_step": _ratio(v.get("step_seconds", 0) * 1000, steps),
            "drafted_length": _ratio(draft_tokens, drafts),
            "draft_acceptance": _ratio(accepted, draft_tokens),
            "acceptance_unconditional": unconditional,
            "acceptance_conditional": conditional,
            "steps_without_drafts": steps - (drafts or 0),
            # The drafting policy as figures, never a fault: an adaptive drafter drafts fewer
            # than k tokens, or none, on some steps.
            "drafted_tokens_per_step": _ratio(draft_tokens, steps),
            "no_draft_share": (steps - (drafts or 0)) / steps,
            # tok/s = tokens/step / s/step, exactly, whichever clock timed the decode
            "ms_per_step": tokens_per_step / out["decode_tok_s"] * 1000 if out["decode_tok_s"] else None,
            "counters_vs_usage": _ratio(steps + accepted, decode_tokens),
        }
    )
    drafts_wrong = _draft_disagreement(v, per_pos, steps)
    if drafts_wrong and not disagreement:
        withheld.update({name: drafts_wrong for name in DRAFT_FIGURES})
        out.update({name: None for name in DRAFT_FIGURES})
        out.update(acceptance_unconditional=[], acceptance_conditional=[])
    if disagreement:
        withheld.update({name: disagreement for name in COUNTER_FIGURES})
        out.update({name: None for name in COUNTER_FIGURES})
        out.update(acceptance_unconditional=[], acceptance_conditional=[])


def alarms(f: dict, k: int | None, repeated: float) -> dict[str, str]:
    """Signs that a number should not be trusted as it stands, by kind (bench/alarms.yaml says
    what each means)."""
    out = {}
    if not f["decomposition"]:
        out["no-decomposition"] = (
            "no speculative-decoding counters in /metrics, or a step count "
            "outside 1..decode tokens: the two factors are unavailable"
        )
        return out
    if f["prompt_tokens"] >= 4096 and f["draft_acceptance"] is not None and f["draft_acceptance"] < 0.02:
        out["zero-acceptance"] = "acceptance near 0 at long context: the drafter may see zero-filled drafts"
    # Drafting fewer than k tokens, or none, on some steps is a policy (ngram's match length, an
    # adaptive or confidence-scheduled drafter): reported as figures. Only more than k is a fault.
    drafted = f["drafted_length"]
    beyond = [i + 1 for i, p in enumerate(f.get("acceptance_unconditional") or []) if i >= (k or 0) and p]
    if k and drafted is not None and drafted > k + 0.01:
        out["drafted-length"] = f"drafted length {drafted:.2f} exceeds k={k}"
    elif k and beyond:  # a mean under k hides steps that drafted more: a position past k accepted
        out["drafted-length"] = (
            f"tokens accepted at draft position {beyond[-1]}, beyond k={k}: the seat drafts more than k"
        )
    if f["client_vs_server"] and abs(f["client_vs_server"] - 1) > CLIENT_TOLERANCE:
        out["client-bursts"] = (
            f"the stream reached the client in bursts (client-timed "
            f"{f['client_decode_tok_s']:.0f} tok/s against the server's "
            f"{f['decode_tok_s']:.0f}): the server's timing is used"
        )
    if repeated > LOOP_SHARE:  # a loop is easy to draft at any acceptance: the figures are marked
        out["loop"] = (
            f"the output loops ({repeated:.0%} of its {LOOP_WIDTH}-token runs repeat earlier ones): "
            "its speed is not the speed of real text"
        )
    if "tokens_per_step" in f["withheld"]:
        out["counters-vs-usage"] = f"{f['withheld']['tokens_per_step']}; tokens/step and ms/step withheld"
    return out
