"""`seat bench compare A B`: two runs or reference cards, factor by factor.

    log(tok/s ratio) = log(tokens-per-step ratio) - log(ms-per-step ratio)

Entries are paired by suite (run against run) or by content and context (anything against a card);
sides with no content in common are paired by context, across contents (code against prose: the
paper's Table 4 question). `CARD#FIGURE` or `RUN#SUITE` picks one entry of a side. The verdict
weighs each side's spread; past the noise it names the factor that carries the gap first, what
usually moves that factor on these sides' runtime, and which differing conditions can explain it.

"X % apart" is symmetric: the larger figure over the smaller, minus one, whichever side is A.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from seatkit import safe_yaml
from seatkit.bench import cards, summary
from seatkit.errors import SeatError
from seatkit.seat import what_runs

FACTORS = ("decode_tok_s", "tokens_per_step", "ms_per_step")
CONDITIONS = (
    "model",
    "draft",
    "k",
    "draft_policy",
    "temperature",
    "content",
    "prompt",
    "context",
    "padding",
    "output_tokens",
    "device",
    "host_settings",
    "image",
    "b12x_kernels",
    "statistic",
    "model_lock",
)
OPTIONAL = {"model_lock"}  # compared only when both sides record it (cards do not)
UNKNOWN = "unknown"
SUMMARY_BYTES = 64 * 1024 * 1024  # per-prompt figures of a long suite list
# Conditions shown under another name.
CONDITION_NOTES = {"b12x_kernels": "b12x kernels"}
MOVES_TEXT = {
    "ms_per_step": "usually moves ms/step",
    "tokens_per_step": "usually moves tokens/step",
    "both": "can move either factor",
}
SWEEP_SCHEMA = "seatkit.bench.sweep/1"  # sweep.SCHEMA (sweep imports the bench's runner)
BENCH_SCHEMA = "seatkit.bench/2"  # run.SCHEMA; /1 summaries predate the withholding checks
WHAT_MOVES = {
    "ms_per_step": "host settings (IOMMU, P2P registry keys, ReBAR, HMM), the "
    "interconnect, the image and its kernels, power limits and clocks",
    "tokens_per_step": "content (code or prose), drafting policy and k, temperature, "
    "the model and its draft head, repetitive padding",
}
# On a CPU seat no GPU host setting applies; a shared machine's load is the usual cause.
WHAT_MOVES_CPU = {
    "ms_per_step": "on a CPU seat, load from other processes on a shared "
    "machine (noise), threads and the CPU's clocks; GPU host settings "
    "do not apply"
}
# Which factor a differing condition can move (both: it can move either).
EXPLAINS = {
    "host_settings": "ms_per_step",
    "image": "ms_per_step",
    "b12x_kernels": "ms_per_step",
    "device": "ms_per_step",
    "content": "both",
    "prompt": "both",
    "draft": "tokens_per_step",
    "draft_policy": "tokens_per_step",
    "temperature": "tokens_per_step",
    "padding": "tokens_per_step",
    "k": "both",
    "model": "both",
    "context": "both",
    "output_tokens": "both",
    "statistic": "both",
    "model_lock": "both",
}
HEADLINE = {"ms_per_step": "step time: the rig", "tokens_per_step": "acceptance (tokens/step)"}


def apart(ratio: float) -> float:
    """The symmetric gap: the larger over the smaller, minus one (87 % apart either way round)."""
    return math.exp(abs(math.log(ratio))) - 1


@dataclass
class Entry:
    side: str
    key: str
    label: str
    conditions: dict
    values: dict[str, float]
    spread: dict[str, float]  # relative standard deviation per factor, where known
    derived: list[str] = field(default_factory=list)
    missing: dict[str, str] = field(default_factory=dict)  # factor -> why this side lacks it
    harness: dict | None = None  # a card's: the tool and mode that produced its figures
    matched: dict | None = None  # a run's: the figures other harnesses would print (run.py)
    caveat: str | None = None  # why this side's figures deserve less trust (an older summary)


def _derive(values: dict[str, float]) -> list[str]:
    """Fill the third factor from the other two (tok/s = tokens/step / step time)."""
    tps, tau, ms = (values.get(k) for k in FACTORS)
    if tps and tau and not ms:
        values["ms_per_step"] = tau / tps * 1000
        return ["ms_per_step"]
    if tps and ms and not tau:
        values["tokens_per_step"] = tps * ms / 1000
        return ["tokens_per_step"]
    if tau and ms and not tps:
        values["decode_tok_s"] = tau / ms * 1000
        return ["decode_tok_s"]
    return []


def _relative_sd(values: list[float]) -> float:
    mean = sum(values) / len(values)
    return (sum((v - mean) ** 2 for v in values) / len(values)) ** 0.5 / mean


def card_entries(card: cards.Card) -> list[Entry]:
    out = []
    for figure in card.figures:
        values = {k: getattr(figure, k) for k in FACTORS if getattr(figure, k) is not None}
        if not values:
            continue
        spread = {k: _relative_sd(v) for k, v in figure.repeats.items() if k in FACTORS}
        # A published min-max range spans about four standard deviations.
        spread |= {k: (hi - lo) / 4 / ((hi + lo) / 2) for k, (lo, hi) in figure.range.items() if k in FACTORS}
        derived = _derive(values)
        conditions = {**card.conditions_of(figure), "device": "gpu" if card.rig.get("gpus") else None}
        missing = {k: "not on the card" for k in FACTORS if k not in values}
        harness = figure.harness or card.harness
        out.append(
            Entry(
                card.name,
                figure.id,
                f"{figure.id}: {figure.what}",
                conditions,
                values,
                spread,
                derived,
                missing,
                harness.model_dump() if harness else None,
            )
        )
    return out


def run_entries(folder: Path) -> list[Entry]:
    path = folder / "summary.json"
    try:
        data = safe_yaml.read_json(path, "bench summary", SUMMARY_BYTES)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        raise SeatError(f"{path} is not a file", "give the folder of a finished `seat bench run`") from None
    if isinstance(data, dict) and data.get("schema") == SWEEP_SCHEMA:
        raise SeatError(
            f"{folder} is a concurrency sweep: compare splits batch-1 runs",
            "compare two sweeps by their report.md tables, level by level",
        )
    try:
        return _run_entries(folder, summary.check(data, str(path)))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise SeatError(
            f"{folder / 'summary.json'} is not a bench summary ({type(exc).__name__}: {exc})",
            "give the folder of a finished `seat bench run`",
        ) from None


def _run_entries(folder: Path, data: dict) -> list[Entry]:
    if data.get("schema") == SWEEP_SCHEMA:
        raise SeatError(
            f"{folder} is a concurrency sweep: compare splits batch-1 runs",
            "compare two sweeps by their report.md tables, level by level",
        )
    c = data["conditions"]
    schema = data.get("schema")
    old = (
        None
        if schema == BENCH_SCHEMA
        else (
            f"{folder.name} is an older bench summary ({schema or 'no schema'}): its figures predate "
            "the checks that withhold one whose inputs disagree; re-run it to trust them"
        )
    )
    out = []
    for suite, s in data["suites"].items():
        values = {k: s[k]["median"] for k in FACTORS if s.get(k)}
        bad = [k for k, v in values.items() if not (isinstance(v, (int, float)) and 0 < v < math.inf)]
        if bad:
            raise ValueError(f"suite {suite}: {', '.join(bad)} not a positive number")
        spread = {k: s[k]["cv"] for k in FACTORS if s.get(k) and s[k]["cv"] is not None}
        conditions = {
            "model": c.get("base_model") or c["model"],
            "draft": c.get("draft_model") or c.get("draft_method"),
            "k": c.get("k"),
            "draft_policy": c.get("draft_policy"),
            "temperature": c["sampling"].get("temperature"),
            "content": s["content"],
            "context": s.get("context", 0),
            "padding": s.get("padding"),
            "output_tokens": s.get("output_tokens"),
            "host_settings": c.get("host_settings"),
            "image": _image(c),
            "b12x_kernels": c.get("b12x_kernels"),
            "statistic": "median",
            "model_lock": _lock_text(c.get("model_locks")),
            "prompt": ", ".join(s.get("prompts") or {}) or None,
            "device": None if "gpus" not in c else ("gpu" if c["gpus"] else "cpu"),
        }
        withheld = s.get("withheld") or {}
        missing = {k: withheld.get(k, "not measured") for k in FACTORS if k not in values}
        # A factor the bench withheld stays withheld: its inputs disagreed, so no other two give it.
        derived = [] if set(withheld) & set(FACTORS) else _derive(values)
        missing = {k: why for k, why in missing.items() if k not in values}
        out.append(
            Entry(
                folder.name,
                suite,
                what_runs.marked(suite, c, short=True),
                conditions,
                values,
                spread,
                derived,
                missing,
                matched=s.get("harness_figures") or {},
                caveat=old,
            )
        )
    return out


def _image(c: dict) -> str | None:
    """The image a run's seat ran (by digest when labelled), or the runtime that needs none."""
    labels = c.get("image_labels") or {}
    digest = labels.get("org.opencontainers.image.base.digest")
    if c.get("image"):
        return f"{c['image']}@{digest}" if digest else c["image"]
    return f"none ({c['runtime']} runtime)" if c.get("runtime") == "native" else None


def _lock_text(locks: dict | None) -> str | None:
    """Each model's lock hash, short: `base=1a2b3c4d5e6f draft=...`."""
    return " ".join(f"{k}={v[:12]}" for k, v in sorted(locks.items())) if locks else None


def entries(source: str) -> list[Entry]:
    """A run directory (has summary.json) or a reference card (name or path), all of it or the
    one suite or figure named after a '#'."""
    source, hashed, pick = source.partition("#")
    path = Path(source)
    if (path / "summary.json").exists():
        found = run_entries(path)
    elif path.is_dir():
        raise SeatError(f"{path} has no summary.json", "give a finished run directory or a card")
    else:
        found = card_entries(cards.load(source))
    if hashed and not pick:  # `CARD#`: a pick left empty is a typo, never the whole side
        raise SeatError(
            f"{source}#: no suite or figure named after the '#'",
            f"name one ({', '.join(e.key for e in found)}), or drop the '#' for all",
        )
    if not pick:
        return found
    chosen = [e for e in found if e.key == pick]
    if not chosen:
        raise SeatError(
            f"{source} has no suite or figure {pick!r} with a decode figure to compare",
            f"these have one: {', '.join(e.key for e in found)}",
        )
    return chosen


def _pairs(a: list[Entry], b: list[Entry], by_suite: bool) -> list[tuple[Entry, Entry]]:
    """Like with like: by suite, else by content and context; sides with no content in common by
    context alone (code against prose)."""
    keys = [
        lambda e: (e.conditions.get("content"), e.conditions.get("context") or 0),
        lambda e: e.conditions.get("context") or 0,
    ]
    if by_suite:
        keys.insert(0, lambda e: e.key)
    for key in keys:
        pairs = [(x, y) for x in a for y in b if key(x) == key(y)]
        if pairs:
            return pairs
    return []


MOVE_FLOOR = 0.01  # a factor never counts as moved by less than 1 %


def _noise(factor: str, a: Entry, b: Entry) -> float | None:
    """About two standard deviations of a ratio, from both sides' spreads (None when neither has one)."""
    spreads = [e.spread[factor] for e in (a, b) if factor in e.spread]
    return 2 * math.sqrt(sum(s * s for s in spreads)) if spreads else None


def _threshold(factor: str, a: Entry, b: Entry) -> tuple[float, str]:
    """How far a factor may move by chance: its own spread, else tok/s's, never under the floor."""
    own = _noise(factor, a, b)
    noise = own if own is not None else _noise("decode_tok_s", a, b)
    source = (
        "its own spread"
        if own is not None
        else ("the tok/s spread" if noise is not None else "the 1 % floor")
    )
    return max(noise or 0.0, MOVE_FLOOR), source


SUSTAINED = {("llm_decode_bench", "sustained", 1): "llm_decode_bench sustained C=1"}  # run.LDB_SUSTAINED


def _matched(x: Entry, y: Entry) -> tuple[Entry, Entry, str | None]:
    """A run against a card from another harness: the run's figure as that harness would have
    printed it (tok/s, and ms/step from it: tokens/step is the same either way), or a refusal."""
    for run, card, swap in ((x, y, False), (y, x, True)):
        h = card.harness
        if run.matched is None or not h or h["mode"] == "per-request":
            continue
        name = SUSTAINED.get((h["tool"], h["mode"], h["concurrency"]))
        figure = (run.matched or {}).get(name) if name else None
        if figure is None:
            ldb = (h["tool"], h["mode"]) == ("llm_decode_bench", "sustained")  # CAVEATS.md says how
            counts = "TTFT gaps between restarts as decode" if ldb else "tokens its own way"
            why = (
                f"refused: {card.label} is {h['tool']} {h['mode']} mode at C={h['concurrency']}, "
                f"whose figure counts {counts}; "
                + (
                    "this run has no per-request record to rebuild it from (re-run it with this kit)"
                    if name
                    else "the kit cannot rebuild that harness's figure"
                )
            )
            return x, y, why
        values = dict(run.values, decode_tok_s=figure["decode_tok_s"])
        derived = [d for d in run.derived if d != "ms_per_step"]
        if values.get("tokens_per_step"):
            values["ms_per_step"] = values["tokens_per_step"] / figure["decode_tok_s"] * 1000
            derived.append("ms_per_step")
        spread = {k: v for k, v in run.spread.items() if k == "tokens_per_step"}
        matched = replace(
            run, values=values, derived=derived, spread=spread, label=f"{run.label} (as {name})"
        )
        note = (
            f"harness-matched: {run.label}'s tok/s as {name} would print it "
            f"({figure['definition']}; prefix cache {figure['prefix_cache']})"
        )
        return (card, matched, note) if swap else (matched, card, note)
    return x, y, None


def _harness_text(h: dict | None) -> str:
    return f"{h['tool']} {h['mode']} C={h['concurrency']}" if h else "an unnamed harness"


def _harness_caveat(x: Entry, y: Entry) -> str | None:
    """Two cards from different harnesses: neither figure can be rebuilt as the other's, so their
    tok/s (and the ms/step derived from it) are not defined alike; None when they match."""
    if x.matched is not None or y.matched is not None or not (x.harness or y.harness):
        return None
    a, b = _harness_text(x.harness), _harness_text(y.harness)
    if a == b:
        return None
    return (
        f"the harnesses differ (A: {a}, B: {b}): their tok/s are not defined alike "
        "(CAVEATS.md, Harnesses), so part of a step-time gap can be the harness, not the rig"
    )


def _explains(differing: list[str], factor: str) -> list[str]:
    return [k for k in differing if EXPLAINS.get(k) in (factor, "both")]


def _verdict(ratios: dict[str, float], a: Entry, b: Entry, differing: list[str] = ()) -> dict:
    if all(abs(r - 1) < 1e-9 for r in ratios.values()):
        return {
            "within_noise": True,
            "noise": _noise("decode_tok_s", a, b),
            "moved": [],
            "same": True,
            "text": "the same: tok/s, tokens/step and ms/step are identical",
        }
    log = {k: math.log(r) for k, r in ratios.items()}
    noise = _noise("decode_tok_s", a, b)
    gap = apart(ratios["decode_tok_s"])
    cpu = "cpu" in (a.conditions.get("device"), b.conditions.get("device"))
    # Each factor is judged against its own spread: one can move beyond its noise while tok/s,
    # noisier, stays inside its own, and both can move at once (even in opposite directions).
    limits = {f: _threshold(f, a, b) for f in ("tokens_per_step", "ms_per_step")}
    moved = [f for f, (limit, _) in limits.items() if apart(ratios[f]) > limit]
    if noise is not None and gap <= noise and not moved:
        return {
            "within_noise": True,
            "noise": noise,
            "moved": [],
            "text": f"within noise: {gap:.1%} apart, spread allows {noise:.1%}",
        }
    # Each factor's part of log(tok/s ratio): + log tokens/step ratio, - log ms/step ratio.
    parts = {"tokens_per_step": log["tokens_per_step"], "ms_per_step": -log["ms_per_step"]}
    shares = {
        f: p / log["decode_tok_s"] if abs(log["decode_tok_s"]) > 1e-12 else None for f, p in parts.items()
    }
    factor = max(parts, key=lambda f: abs(parts[f]))
    if noise is None:
        lead = f"tok/s {gap:.1%} apart (neither side gives a spread)"
    elif gap <= noise:
        lead = f"tok/s {gap:.1%} apart, inside its spread ({noise:.1%})"
    else:
        lead = f"tok/s {gap:.1%} apart (spread allows {noise:.1%})"
    if len(moved) == 2:
        lead += "; both factors moved"
    elif not moved:
        lead += f"; neither factor moved beyond its own spread, {_name(factor)} carries the most"
    # The main factor first, then any other that moved.
    named = sorted(set(moved) | {factor}, key=lambda f: -abs(parts[f]))
    said = []
    for f in named:
        limit, source = limits[f]
        share = (
            "none of it (the factors cancel)"
            if shares[f] is None
            else f"{shares[f]:.0%} of the gap"
            if shares[f] >= 0
            else f"{shares[f]:.0%} of the gap: it works against it"
        )
        # Symmetric like tok/s: the same size whichever side is A, the direction named.
        side = f"{apart(ratios[f]):.1%} apart, {'higher' if ratios[f] > 1 else 'lower'} on A"
        how = f"moved: {side} (beyond {source}, {limit:.1%})" if f in moved else side
        what = (WHAT_MOVES_CPU if cpu else {}).get(f, WHAT_MOVES[f])
        text = f"{_name(f)} {how} and carries {share}; what usually moves it: {what}"
        causes = _explains(differing, f)
        if causes:
            text += f"; differing conditions that can explain it: {', '.join(causes)}"
        elif f == "ms_per_step" and cpu:
            text += "; no differing condition explains it: on a shared CPU machine, likely noise"
        said.append(text)
    headline = HEADLINE[factor]
    if "content" in differing:
        if factor == "tokens_per_step":
            headline = "acceptance: the text, not the rig"
        headline += (
            f" (content differs: {a.conditions.get('content')} vs "
            f"{b.conditions.get('content')}, and content usually moves tokens/step)"
        )
    return {
        "within_noise": False,
        "noise": noise,
        "moved": moved,
        "factor": factor,
        "share": shares[factor],
        "shares": shares,
        "text": f"{headline}. {lead}. " + ". ".join(said),
    }


def split(x: Entry, y: Entry, differing: list[str] = ()) -> dict:
    """x against y: each factor's ratio, the log split of the tok/s ratio, and the verdict."""
    common = [k for k in FACTORS if k in x.values and k in y.values]
    out: dict = {"ratios": {k: x.values[k] / y.values[k] for k in common}}
    if "decode_tok_s" in out["ratios"] and len(common) == 3:
        r = out["ratios"]
        out["log_split"] = {
            "tok_s": math.log(r["decode_tok_s"]),
            "tokens_per_step": math.log(r["tokens_per_step"]),
            "minus_ms_per_step": -math.log(r["ms_per_step"]),
        }
        out["verdict"] = _verdict(r, x, y, differing)
    else:
        lacking = [
            f"{side} gives no {_name(k)} ({e.missing.get(k, 'not given')})"
            for side, e in (("A", x), ("B", y))
            for k in FACTORS[1:]
            if k not in e.values
        ]
        gap = (
            f"tok/s {apart(out['ratios']['decode_tok_s']):.1%} apart, not split: "
            if "decode_tok_s" in out["ratios"]
            else "not split: "
        )
        out["verdict"] = {"text": gap + "; ".join(lacking)}
    return out


def run_split(folder: Path, summary: dict, a: str, b: str) -> dict:
    """Suite a against suite b of one run, split like two runs are."""
    found = {e.key: e for e in _run_entries(folder, summary)}
    return split(found[a], found[b])


def _name(factor: str) -> str:
    return factor.replace("_", " ")


@dataclass
class Comparison:
    a: str
    b: str
    rows: list[dict]
    differing: dict[str, list[str]]  # condition -> "A vs B" for any pair
    conditions: dict[str, str] = field(default_factory=dict)  # every condition: "A vs B"
    refused: str | None = None


def _said(value) -> str:
    return UNKNOWN if value is None else str(value)


def _side(side: list[Entry], key: str) -> str:
    """A condition over one side's entries: its values, or unknown where the side does not say."""
    return ", ".join(dict.fromkeys(_said(e.conditions.get(key)) for e in side)) or UNKNOWN


def compare(a: str, b: str, force: bool = False) -> Comparison:
    left, right = entries(a), entries(b)
    by_suite = all((Path(s.partition("#")[0]) / "summary.json").exists() for s in (a, b))
    pairs = _pairs(left, right, by_suite)
    listed = {k: f"{_side(left, k)} vs {_side(right, k)}" for k in CONDITIONS}
    # Unpaired sides differ wherever their listed values do.
    differing = (
        {} if pairs else {k: [text] for k, text in listed.items() if _side(left, k) != _side(right, k)}
    )
    # A model one side does not name cannot be shown to be the same.
    if any(e.conditions.get("model") is None for e in left + right):
        differing["model"] = [listed["model"]]
    rows = []
    for x, y in pairs:
        diff = {
            k: f"{_said(x.conditions.get(k))} vs {_said(y.conditions.get(k))}"
            for k in CONDITIONS
            if x.conditions.get(k) != y.conditions.get(k)
            and not (k in OPTIONAL and None in (x.conditions.get(k), y.conditions.get(k)))
        }
        for k, text in diff.items():
            name = CONDITION_NOTES.get(k, k)
            note = "" if k == "model" else MOVES_TEXT.get(EXPLAINS.get(k), "")  # refused anyway
            text = f"{text} ({note})" if note else text
            differing.setdefault(name, [])
            if text not in differing[name]:
                differing[name].append(text)
        x, y, harness = _matched(x, y)
        if isinstance(harness, str) and harness.startswith("refused"):
            rows.append(
                {
                    "a": x.label,
                    "b": y.label,
                    "conditions_differ": sorted(diff),
                    "a_values": x.values,
                    "b_values": y.values,
                    "derived": {"a": x.derived, "b": y.derived},
                    "ratios": {},
                    "missing": {"a": x.missing, "b": y.missing},
                    "harness": harness,
                    "verdict": {"text": harness},
                }
            )
            continue
        row = {
            "a": x.label,
            "b": y.label,
            "conditions_differ": sorted(diff),
            "a_values": x.values,
            "b_values": y.values,
            "derived": {"a": x.derived, "b": y.derived},
            **split(x, y, sorted(diff)),
            "missing": {"a": x.missing, "b": y.missing},
            "harness": harness,
        }
        for caveat in (x.caveat, y.caveat, _harness_caveat(x, y)):
            if caveat:
                row["verdict"]["text"] += f". Caveat: {caveat}"
        rows.append(row)
    refused = None
    if "model" in differing and not force:
        refused = (
            f"refused: the two sides are different models, or one does not say which "
            f"({'; '.join(differing['model'])}); a model moves both factors, so their gap "
            "says nothing about either rig. --force compares them anyway, factor by factor"
        )
    if not pairs:
        refused = refused or (
            "nothing to compare: no suite or figure of one side matches the other's content and context"
        )
    return Comparison(a, b, rows if not refused else [], differing, listed, refused)


def markdown(c: Comparison) -> str:
    lines = [f"# Compare: A = {c.a}, B = {c.b}", "", "## Conditions (A vs B)", ""]
    lines += [f"- {k}: {v}" + (" (differs)" if k in c.differing else "") for k, v in c.conditions.items()]
    lines += ["", "## Conditions that differ", ""]
    lines += [f"- {k}: {'; '.join(v)}" for k, v in c.differing.items()] or ["- none"]
    if c.refused:
        return "\n".join(lines + ["", c.refused]) + "\n"
    lines += [
        "",
        "| A | B | tok/s A / B (ratio) | tokens/step A / B (ratio) | ms/step A / B (ratio) | verdict |",
        "|---|---|---|---|---|---|",
    ]
    for row in c.rows:
        lines.append(
            f"| {row['a']} | {row['b']} | " + " | ".join(cells(row)) + f" | {row['verdict']['text']} |"
        )
    matched = [
        f"- {row['harness']}"
        for row in c.rows
        if row.get("harness") and not row["harness"].startswith("refused")
    ]
    lines += [""] + matched if matched else []
    lines += [
        "",
        "\\* derived from the other two factors (tok/s = tokens per step / step time). "
        "– : the side does not give it (the verdict says why). " + APART,
    ]
    return "\n".join(lines) + "\n"


APART = "X % apart: the larger figure over the smaller, minus one, whichever side is A."


def cells(row: dict) -> list[str]:
    """Each factor as `A / B (ratio)`; '–' where a side lacks it, '*' where it was derived."""
    out = []
    for k in FACTORS:
        shown = [
            f"{v:.2f}" + ("*" if k in row["derived"][side] else "") if v is not None else "–"
            for side, v in (("a", row["a_values"].get(k)), ("b", row["b_values"].get(k)))
        ]
        ratio = f" ({row['ratios'][k]:.3f})" if k in row["ratios"] else ""
        out.append(f"{shown[0]} / {shown[1]}{ratio}")
    return out


def as_json(c: Comparison) -> str:
    return json.dumps(asdict(c), indent=2)
