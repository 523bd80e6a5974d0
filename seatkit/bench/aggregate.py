"""A run's kept requests summed up per suite and prompt: each figure's median, spread and count,
what was withheld and why, each figure's source, and what other harnesses would have printed."""

from __future__ import annotations

import math
import statistics


def stats(given: list[float | None]) -> dict | None:
    """Median, min, max, spread (coefficient of variation) and count of the values given."""
    values = [v for v in given if v is not None]
    if not values:
        return None
    mean = statistics.fmean(values)
    finite = all(math.isfinite(v) for v in values)  # else stdev fails; the schema names the figure
    # The sample estimator (n - 1): the population one reads low on a few values. One value has
    # no spread to measure: None (unknown), never 0.
    known = mean and finite and len(values) > 1
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "cv": statistics.stdev(values) / mean if known else None,
        "n": len(values),
    }


FIGURES = (
    *("decode_tok_s", "tokens_per_step", "ms_per_step", "drafter_tokens_per_step", "draft_acceptance"),
    *("accepted_per_drafted_step", "ttft_ms", "client_ttft_ms", "prefill_tok_s", "warm_ttft_ms"),
    *("drafted_tokens_per_step", "no_draft_share"),
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
        honest = [r for r in rows if "loop" not in r.get("alarms", {})]  # a loop's speed is no record
        best = max(honest or rows, key=lambda r: r["factors"]["decode_tok_s"] or 0)
        positions = [
            r["factors"]["acceptance_unconditional"]
            for r in rows
            if r["factors"].get("acceptance_unconditional")
        ]
        out[suite] = {
            "content": rows[0]["content"],
            "requests": len(rows),
            "looped": len(rows) - len(honest),  # its speed is not the speed of real text
            "context": rows[0].get("context", 0),
            "padding": rows[0].get("padding"),
            "output_tokens": rows[0].get("max_tokens"),
            **{name: stats([r["factors"].get(name) for r in rows]) for name in FIGURES},
            "acceptance_by_position": [statistics.median(p) for p in zip(*positions, strict=False)]
            if positions
            else [],
            "withheld": _withheld(rows),
            "sources": _sources(rows),
            "harness_figures": harness_figures(rows),
            "prefix_cache": {
                state: sum(r["factors"].get("prefix_cache") == state for r in rows)
                for state in ("cold", "warm", "unknown")
            },
            "best_run": {
                "label": "best run (a record is a maximum; the median is the typical figure)"
                if honest
                else "best run, but every request looped: not a speed of real text",
                "prompt": best["prompt"],
                "decode_tok_s": best["factors"]["decode_tok_s"],
                "tokens_per_step": best["factors"].get("tokens_per_step"),
                "ms_per_step": best["factors"].get("ms_per_step"),
            },
            "outputs": {  # greedy repeats that wrote different text did different work
                name: len({r.get("text_sha256") for r in rows if r["prompt"] == name})
                for name in dict.fromkeys(r["prompt"] for r in rows)
            },
            "prompts": {
                name: {
                    fig: stats([r["factors"].get(fig) for r in rows if r["prompt"] == name])
                    for fig in FIGURES
                }
                for name in dict.fromkeys(r["prompt"] for r in rows)
            },
        }
    from seatkit.bench import summary  # its models take a while to build: only a finished run pays

    return summary.check_suites(out, "the run's summary")


def apart_beyond_spread(a: dict | None, b: dict | None) -> bool:
    """Two figures' stats differ beyond about two standard deviations of their ratio; a side with
    an unknown spread (one value) cannot be shown to agree, so it counts as differing."""
    if not a or not b or not a["median"] or not b["median"]:
        return False
    if a["cv"] is None or b["cv"] is None:
        return a["median"] != b["median"]
    gap = max(a["median"], b["median"]) / min(a["median"], b["median"]) - 1
    return gap > 2 * math.hypot(a["cv"], b["cv"])


def prompts_apart(suite: dict, figure: str = "tokens_per_step") -> list[str]:
    """The suite's prompts when any two differ beyond their spread in `figure`: the suite's median
    then describes none of them (two clusters' midpoint), so each is shown. Empty otherwise."""
    prompts = suite.get("prompts") or {}
    stats = [p.get(figure) for p in prompts.values()]
    differ = any(apart_beyond_spread(x, y) for i, x in enumerate(stats) for y in stats[i + 1 :])
    return list(prompts) if differ else []


def repeat_cv(suite: dict, figure: str) -> float | None:
    """The spread of `figure` between repeats: the suite's CV, but where its prompts differ beyond
    their spread that CV is the distance between them, not noise, so the largest of the prompts'
    own CVs (None when one of them is unknown)."""
    if not prompts_apart(suite, figure):
        return (suite.get(figure) or {}).get("cv")
    cvs = [(p.get(figure) or {}).get("cv") for p in suite["prompts"].values()]
    known = [cv for cv in cvs if cv is not None]
    return max(known) if len(known) == len(cvs) else None


def alarm_summary(records: list[dict]) -> dict[str, dict]:
    """Each kind of alarm: how many kept requests raised it, and one of its messages."""
    out: dict[str, dict] = {}
    for record in records:
        for kind, message in record["alarms"].items():
            out.setdefault(kind, {"requests": 0, "example": message})["requests"] += 1
    return out
