"""A bench summary as a markdown report and as the rows of the terminal table."""

from __future__ import annotations

from seatkit.bench import aggregate, alarms, load
from seatkit.seat import what_runs


def _fmt(stats: dict | None, scale: float = 1.0, digits: int = 1, withheld: str | None = None) -> str:
    if not stats:
        return "withheld" if withheld else "n/a"
    cv = f", CV {stats['cv']:.1%}" if stats.get("cv") is not None else ""
    return (
        f"{stats['median'] * scale:.{digits}f} ({stats['min'] * scale:.{digits}f}–"
        f"{stats['max'] * scale:.{digits}f}{cv})"
    )


def _cell(s: dict, name: str, scale: float = 1.0, digits: int = 1) -> str:
    return _fmt(s.get(name), scale, digits, (s.get("withheld") or {}).get(name))


def _clock(s: dict) -> str:
    """Which clock timed decode and TTFT, short: the sources line under the table says the rest."""
    src = s.get("sources") or {}
    short = lambda text: "server" if text.startswith("server") else "client" if text else "?"  # noqa: E731
    return f"decode {short(src.get('decode_tok_s', ''))}, TTFT {short(src.get('ttft_ms', ''))}"


def positions(rates: list[float]) -> str:
    """Acceptance by draft position, in % of drafted steps: the input of `seat bench advise`."""
    return " ".join(f"{100 * p:.0f}" for p in rates) or "n/a"


def sampling(values: dict) -> str:
    """The request's sampling as words: `temperature 0.0, top_p 1.0, seed 0`."""
    return ", ".join(f"{k} {v}" for k, v in values.items() if v is not None) or "the server's defaults"


def _warmups(n: int) -> str:
    return "no warm-up" if not n else f"{n} warm-up{'s' if n != 1 else ''}"


# Each fit in words: what against what, and the unit of its slope (both fits are in ms).
FITS = {
    "ms_per_step_vs_drafted_tokens": ("ms per step against drafted tokens per step", "drafted token"),
    "ttft_ms_vs_prompt_tokens": ("TTFT against prompt length", "prompt token"),
}


def rows(summary: dict) -> list[tuple[str, ...]]:
    """suite, content, tok/s, tokens/step, ms/step, acceptance (and by position), cold TTFT,
    clocks, requests:
    medians (min–max, CV); a figure withheld says so (the reason is under the table)."""
    return [
        (
            what_runs.marked(suite, what_runs.mark(summary["conditions"]), short=True),
            s["content"],
            _cell(s, "decode_tok_s"),
            _cell(s, "tokens_per_step", digits=2),
            _cell(s, "ms_per_step", digits=2),
            _cell(s, "draft_acceptance", 100, 1),
            positions(s.get("acceptance_by_position") or []),
            _cell(s, "ttft_ms"),
            _clock(s),
            str(s["requests"]),
        )
        for suite, s in summary["suites"].items()
    ]


HEADER = (
    *("suite", "content", "decode tok/s", "tokens/step (delivered)", "ms/step", "draft acceptance %"),
    *("accepted by position %", "TTFT ms (cold)", "clock", "requests"),
)


# Each figure by the name the table and the reader use, never the record's field name.
LABELS = {
    "decode_tok_s": "decode tok/s",
    "tokens_per_step": "tokens/step",
    "ms_per_step": "ms/step",
    "drafter_tokens_per_step": "the drafter's tokens/step",
    "draft_acceptance": "draft acceptance",
    "accepted_per_drafted_step": "tokens accepted per drafted step",
    "ttft_ms": "cold TTFT",
    "client_ttft_ms": "the client's TTFT",
    "prefill_tok_s": "prefill tok/s",
    "warm_ttft_ms": "warm TTFT",
    "no_draft_share": "steps that drafted nothing",
    "prefix_cache": "prefix cache state",
}


def _label(name: str) -> str:
    return LABELS.get(name, name.replace("_", " "))


def _prompt(name: str, figures: dict) -> str:
    said = [f"{_fmt(figures.get('tokens_per_step'), digits=2)} tokens/step"]
    if figures.get("draft_acceptance"):
        said.append(f"{_fmt(figures['draft_acceptance'], 100.0)} % accepted")
    if figures.get("no_draft_share"):
        said.append(f"{_fmt(figures['no_draft_share'], 100.0, 0)} % of steps drafted nothing")
    return f"{name} {', '.join(said)}"


def notes(summary: dict) -> list[str]:
    """Per suite, in plain words: how it drafted (a policy, not a fault), prompts that differ
    beyond their spread, repeats that wrote different text, every figure withheld (and why); then
    a busy machine."""
    out = []
    for suite, s in summary["suites"].items():
        drafted, none = s.get("drafted_tokens_per_step"), s.get("no_draft_share")
        if drafted and none:
            k = summary["conditions"].get("k")
            out.append(
                f"{suite}: drafted {drafted['median']:.2f} tokens a step"
                + (f" (k {k})" if k else "")
                + f"; {none['median']:.0%} of steps drafted nothing"
            )
        apart = aggregate.prompts_apart(s)
        if apart:
            each = "; ".join(_prompt(p, s["prompts"][p]) for p in apart)
            out.append(f"{suite}: its prompts differ beyond their spread, so its median is neither's: {each}")
        out += [
            f"{suite}: {p}'s repeats wrote {n} different outputs, so they did not all do the same work"
            for p, n in (s.get("outputs") or {}).items()
            if n > 1
        ]
        out += [f"{suite}: {_label(name)} {why}" for name, why in (s.get("withheld") or {}).items()]
    busy = load.busy_note(
        summary.get("machine"),
        max(
            (cv for s in summary["suites"].values() if (cv := aggregate.repeat_cv(s, "ms_per_step"))),
            default=None,
        ),
        (summary.get("conditions") or {}).get("device"),
    )
    return out + ([busy] if busy else [])


def sources(summary: dict) -> list[str]:
    """Per suite, where each figure came from (report.md's section; the terminal leaves it out)."""
    return [
        f"{suite}: {_label(name)} from {src}"
        for suite, s in summary["suites"].items()
        for name, src in (s.get("sources") or {}).items()
    ]


def markdown(summary: dict) -> str:
    c = summary["conditions"]
    lines = [
        what_runs.marked(f"# Bench report ({summary['schema']})", what_runs.mark(c)),
        "",
        f"Model `{c['model']}` at {c['url']}, engine {c.get('engine_version') or 'unknown'}, "
        f"k={c.get('k')}, sampling {sampling(c['sampling'])}, ignore_eos, reasoning {c['reasoning']}, "
        f"prompts in {c.get('prompt_format') or 'raw text'}, "
        f"{_warmups(c['warmups'])} then {c['repeats']} measured repeats per prompt.",
        f"Requests discarded because another request shared the server: {summary['discarded']}.",
        f"Streams cut short (recorded, never measured): {len(summary.get('truncated', []))}.",
        "",
        "Medians, with (min–max, coefficient of variation). Code and prose are never blended.",
        "",
        "| " + " | ".join(HEADER) + " |",
        "|" + "---|" * len(HEADER),
    ]
    lines += ["| " + " | ".join(row) + " |" for row in rows(summary)]
    lines += [
        "",
        "tokens/step is decode tokens delivered / decode steps (bonus token included), so "
        "tok/s = tokens/step / s/step holds exactly for each request. Each column's median is "
        "taken on its own, possibly of other requests, so the medians need not multiply out. The "
        "drafter's figure, 1 + accepted / steps from the counters, also holds drafts accepted in "
        "the last step and cut by max_tokens:",
        "",
    ]
    lines += [
        f"- {suite}: {_fmt(s.get('drafter_tokens_per_step'), digits=3)}"
        for suite, s in summary["suites"].items()
    ]
    lines += [
        "",
        "TTFT is the server's (its time_to_first_token histogram) where it has one; the "
        "client's, which adds delivery, is kept beside it. Cold: no prefix-cache hit (each "
        "cold request has its own cache_salt); warm: a hit, by the prefix-cache counters:",
        "",
    ]
    lines += [
        f"- {suite}: cold {_cell(s, 'ttft_ms')} ms; "
        + (
            f"warm {_cell(s, 'warm_ttft_ms')} ms; "
            if s.get("warm_ttft_ms") or (s.get("withheld") or {}).get("warm_ttft_ms")
            else "no warm request; "
        )
        + f"client {_fmt(s.get('client_ttft_ms'))} ms; requests cold/warm/unknown "
        + "/".join(str((s.get("prefix_cache") or {}).get(k, 0)) for k in ("cold", "warm", "unknown"))
        for suite, s in summary["suites"].items()
    ]
    return "\n".join(lines + _sections(summary) + _alarms_and_prompts(summary)) + "\n"


def _sections(summary: dict) -> list[str]:
    """Sources and withheld figures, best runs, acceptance by position, fits, truncated, skipped."""
    lines: list[str] = []
    lines += ["", "## Notes and withheld figures", ""] + [f"- {n}" for n in notes(summary) or ["none"]]
    lines += ["", "## Sources", ""] + [f"- {n}" for n in sources(summary)]
    lines += ["", "## Best runs", ""]
    for suite, s in summary["suites"].items():
        b = s["best_run"]
        lines.append(f"- {suite}: {b['decode_tok_s']:.1f} tok/s on {b['prompt']} — {b['label']}")
    lines += ["", "## Acceptance by draft position (median, unconditional)", ""]
    for suite, s in summary["suites"].items():
        shown = ", ".join(f"{p:.1%}" for p in s["acceptance_by_position"]) or "n/a"
        lines.append(f"- {suite}: {shown}")
    lines += ["", "## Fits", ""]
    for name, line in summary.get("fits", {}).items():
        what, per = FITS.get(name, (name, "unit"))
        shown = (
            f"{line['intercept']:.2f} ms + {line['slope']:.4f} ms per {per}, over {line['points']} requests"
            if line
            else f"not fitted: the {per}s did not spread enough"
        )
        lines.append(f"- {what}: {shown}")
    if summary.get("truncated"):
        lines += ["", "## Truncated streams", ""] + [f"- {why}" for why in summary["truncated"]]
    if summary.get("skipped"):
        lines += ["", "## Skipped", ""] + [f"- {n}: {why}" for n, why in summary["skipped"].items()]
    return lines


def _alarms_and_prompts(summary: dict) -> list[str]:
    lines: list[str] = []
    lines += [
        "",
        "Plots: plots/factor_split.png (each suite's tokens/step against its ms/step), and the rest of plots/*.png",
        "",
        "## Alarms",
        "",
    ]
    lines += [
        f"- {kind} ({a['requests']} requests{'; a note: the figures stand' if alarms.stands(kind) else ''}), "
        f"e.g.: {a['example']}\n  {alarms.explained(kind)}"
        for kind, a in summary["alarms"].items()
    ] or ["- none"]
    lines += [
        "",
        "## Prompts",
        "",
        "| prompt | text sha256 | tokens | token ids sha256 |",
        "|---|---|---|---|",
    ]
    for name, h in summary["prompts"].items():
        lines.append(
            f"| {name} | `{h['text_sha256'][:16]}` | {h['tokens']} | "
            f"`{(h['token_ids_sha256'] or 'n/a')[:16]}` |"
        )
    return lines


SWEEP_HEADER = ("streams", "tok/s", "per request", "TTFT ms", "tokens/step", "ms/step", "gauge")


def _n(value: float | None, digits: int = 1) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def sweep_rows(suite: dict, conditions: dict) -> list[tuple[str, ...]]:
    """streams (marked as the run's conditions say), aggregate tok/s, per-request decode tok/s
    median (min-max), TTFT (server / client median), window tokens/step and ms/step, the running
    gauge at the window's close."""
    out: list[tuple[str, ...]] = []
    for row in suite["levels"]:
        per = row["per_request_decode_tok_s"]
        gauge = [g for g in row.get("window", {}).get("running_gauge") or [] if g is not None]
        out.append(
            (
                what_runs.marked(str(row["concurrency"]), what_runs.mark(conditions), short=True),
                _n(row.get("aggregate_tok_s")),
                f"{per['median']:.0f} ({per['min']:.0f}-{per['max']:.0f})" if per else "n/a",
                f"{_n(row.get('server_ttft_ms'), 0)} / {_n(row['client_ttft_ms']['median'], 0)}",
                _n(row.get("tokens_per_step"), 3),
                _n(row.get("ms_per_step"), 2),
                f"{max(gauge):g}" if gauge else "n/a",
            )
        )
    return out


def client_cost(levels: list[dict]) -> str:
    """What the client spent at the highest level: its CPU time per token streamed."""
    top = levels[-1]
    return (
        f"client cost at {top['concurrency']} streams: {top['client_cpu_us_per_token']:.1f} CPU us per token"
    )


def sweep_markdown(summary: dict) -> str:
    c = summary["conditions"]
    lines = [
        what_runs.marked(f"# Concurrency sweep ({summary['schema']})", what_runs.mark(c)),
        "",
        f"Model `{c['model']}` at {c['url']}, engine {c.get('engine_version') or 'unknown'}, "
        f"k={c.get('k')}, sampling {sampling(c['sampling'])}, ignore_eos, levels {c['concurrency']}.",
        "",
        "Each level: N streams of one prompt started together. The steady window opens when "
        "every stream has its first token and closes at the first finish; tokens/step and "
        "ms/step are counter deltas over it (Δ generation tokens and Δ inter-token latency "
        "sum over its count), aggregate tok/s the sum of each stream's rate inside it. "
        "TTFT: the server's histogram mean / the client's median. Gauge: running requests "
        "at the window's close.",
        "",
    ]
    for name, suite in summary["suites"].items():
        lines += [
            f"## {name}: {suite['prompt']} ({suite['content']}, context {suite['context']}, "
            f"{suite['output_tokens']} output tokens)",
            "",
            "| " + " | ".join(SWEEP_HEADER) + " |",
            "|" + "---|" * len(SWEEP_HEADER),
        ]
        lines += ["| " + " | ".join(r) + " |" for r in sweep_rows(suite, c)]
        lines += ["", client_cost(suite["levels"]), ""]
        for row in suite["levels"]:
            w = row.get("window")
            if w:
                lines.append(
                    f"- {row['concurrency']} streams: window {w['opens_s']:.3f}-"
                    f"{w['closes_s']:.3f} s after the first send"
                    + (f", {w['steps']:g} request steps in the counters' window" if w.get("steps") else "")
                    + (
                        f"; the edge scrapes took {w['scrape_ms'][0]:.1f} / "
                        f"{w['scrape_ms'][1]:.1f} ms (the stream rates start after the "
                        "opening one's cost)"
                        if w.get("scrape_ms")
                        else ""
                    )
                )
            for kind, message in row["alarms"].items():
                lines.append(f"- {row['concurrency']} streams: alarm {kind}: {message}")
        lines.append("")
    return "\n".join(lines) + "Plot: plots/sweep.png\n"
