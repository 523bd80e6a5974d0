"""Which draft length: tokens/step, ms/step and tok/s for every k and each suite, predicted from the
runs and reference cards a user already has (`seat bench advise`).

    tokens kept per step at k = 1 + u_1 + ... + u_k
    ms per step at k          = intercept + slope x drafted tokens per step   (plots.fit)
    tok/s at k                = tokens per step / ms per step

u_i is the share of steps whose draft was kept through position i (accepted at position i over
steps), so 1 + the sum is the drafter's tokens per step exactly. Up to the longest draft measured
nothing is fitted, if the drafter proposes the same tokens at each position whatever k: where runs
at two k share positions their u_i must agree within their spread, else nothing unmeasured is
predicted. Past it u_i falls by the ratio of the last two positions (an extrapolation), inside what
nesting allows: a position is kept only when the one before it is, so each one more adds 0 to u_K.
Spreads are the requests' (mean +- 2 standard deviations), the line's prediction interval, and for
tok/s the two relative spreads in quadrature; a single value has none, and says so.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from seatkit import safe_yaml
from seatkit.bench import cards, plots, sides, summary
from seatkit.errors import SeatError

EXTRA = 2  # lengths shown past the longest measured, as extrapolations
# Conditions that make another seat (beside the model): runs that differ in one are not pooled.
SEAT = ("image", "runtime", "host_settings", "b12x_kernels", "engine_version")
FLOOR = 0.01  # shares of steps closer than this are the same, whatever the spread says


@dataclass
class Sample:
    """One request of a run (or a card's figure): its k, u_1..u_K, ms/step, drafted per step."""

    k: int
    kept: list[float]
    ms: float | None
    drafted: float | None = None


@dataclass
class Column:
    """One suite over every run given, or one card figure."""

    name: str
    source: str
    samples: list[Sample]
    adaptive: bool = False
    card: dict | None = None  # a card figure's own figures: value and relative spread per factor
    notes: list[str] = field(default_factory=list)  # what a card says of itself, and lacks


def spread(values: list[float]) -> dict:
    """Mean +- 2 standard deviations, never below 0 (no figure here is negative); low and high None
    for one value (its spread is unknown)."""
    mean = statistics.fmean(values)
    sd = statistics.stdev(values) if len(values) > 1 else None
    return {
        "value": mean,
        "low": None if sd is None else max(0.0, mean - 2 * sd),
        "high": None if sd is None else mean + 2 * sd,
        "n": len(values),
    }


def _read_run(folder: Path) -> tuple[dict, list[dict]]:
    data = summary.check(safe_yaml.read_json(folder / "summary.json", "bench summary"), str(folder))
    if data.get("schema") != sides.BENCH_SCHEMA:
        raise SeatError(f"{folder} is not a batch-1 bench run", "give folders of `seat bench run`")
    try:
        text = safe_yaml.read_text(folder / "requests.jsonl", "the run's requests", sides.SUMMARY_BYTES)
        records = [json.loads(line) for line in text.splitlines() if line.strip()]
    except (FileNotFoundError, json.JSONDecodeError) as exc:
        raise SeatError(
            f"{folder / 'requests.jsonl'} cannot be read ({type(exc).__name__}): the advice needs "
            "each request's counters",
            "give the folder of a finished `seat bench run`, as it wrote it",
        ) from None
    return data, [r for r in records if r.get("exclusive") and not r.get("truncated")]


def _sample(record: dict, k: int | None) -> Sample | None:
    """A kept request whose step and draft counters were not withheld."""
    f = record["factors"]
    steps, per_position = f.get("decode_steps"), f.get("accepted_per_position") or []
    if not f.get("acceptance_unconditional") or not steps or f.get("tokens_per_step") is None:
        return None
    drafted = f["draft_tokens"] / steps if f.get("draft_tokens") is not None else None
    return Sample(k or len(per_position), [a / steps for a in per_position], f.get("ms_per_step"), drafted)


def run_columns(folders: list[Path]) -> list[Column]:
    """Each suite over every run given, its requests pooled; runs of different seats refused."""
    columns: dict[str, Column] = {}
    seats = {}
    for folder in folders:
        data, records = _read_run(folder)
        c = data["conditions"]
        seats[folder.name] = {"model": c.get("base_model") or c["model"], **{k: c.get(k) for k in SEAT}}
        adaptive = "adaptive" in str(c.get("draft_policy") or "")
        for record in records:
            sample = _sample(record, c.get("k"))
            if sample is None:
                continue
            column = columns.setdefault(record["suite"], Column(record["suite"], "", []))
            column.samples.append(sample)
            # A draft shorter or longer than k where the drafter is not ngram (the bench's alarm):
            # a policy chose its length, so its acceptance is not a fixed k's.
            column.adaptive |= adaptive or "drafted-length" in record.get("alarms", {})
    for key in ("model", *SEAT):
        values = {run: str(seat[key]) for run, seat in seats.items()}
        if len(set(values.values())) > 1:
            raise SeatError(
                f"the runs differ in {key}: " + ", ".join(f"{r}: {v}" for r, v in values.items()),
                "advise on runs of one seat (its draft length aside): the step-time line pools them",
            )
    for column in columns.values():
        ks = sorted({s.k for s in column.samples})
        column.source = f"{len(column.samples)} requests at k = {', '.join(map(str, ks))}"
    return list(columns.values())


def card_columns(source: str) -> tuple[list[Column], list[str]]:
    """A card's figures that split into factors, one column each; the others named, with why."""
    card = cards.load(source.partition("#")[0])
    entries = {e.key: e for e in sides.entries(source) if "tokens_per_step" in e.values}
    columns, left = [], []
    for figure in card.figures:
        entry = entries.get(figure.id)
        if entry is None:
            left.append(figure.id)
            continue
        k = card.conditions_of(figure)["k"]
        kept = list(figure.acceptance_by_position or [])
        own = {name: (v, entry.spread.get(name)) for name, v in entry.values.items()}
        notes = []
        if kept and len(kept) == k:  # the model's own check: the positions sum to the card's figure
            notes.append(
                f"its positions sum to {1 + sum(kept):.3f} tokens/step at k={k}; "
                f"the card says {entry.values['tokens_per_step']:g}"
            )
        lacks = [] if kept else ["acceptance by draft position (tokens/step at any other k)"]
        lacks += ["ms/step at a second draft length (the step-time slope)"]
        lacks += [] if entry.spread else ["repeats (the spread)"]
        notes += [f"{name.replace('_', ' ')} derived from the other two" for name in entry.derived]
        notes += [f"lacks {what}" for what in lacks]
        adaptive = "adaptive" in str(card.conditions_of(figure).get("draft_policy") or "")
        samples = [Sample(k, kept, entry.values.get("ms_per_step"))] if k else []
        label = f"{card.name} {figure.id}"
        columns.append(Column(label, f"card: {figure.what}", samples, adaptive, own, notes))
    said = [f"{card.name} {', '.join(left)}: no tokens/step, nothing to split by k"] if left else []
    return columns, said


def k_check(column: Column) -> dict:
    """Do runs at different k keep the positions they share on the same share of steps?"""
    by_k: dict[int, list[list[float]]] = {}
    for s in column.samples:
        by_k.setdefault(s.k, []).append(s.kept)
    ks = sorted(by_k)
    if len(ks) < 2:
        return {"status": "one length", "text": "one draft length measured: nothing to check against"}
    found, unknown = [], False
    for a, b in zip(ks, ks[1:], strict=False):
        for i in range(a):
            x, y = ([kept[i] for kept in by_k[k] if len(kept) > i] for k in (a, b))
            if len(x) < 2 or len(y) < 2:
                unknown = True
                continue
            noise = 2 * math.hypot(statistics.stdev(x), statistics.stdev(y))
            gap = abs(statistics.fmean(x) - statistics.fmean(y))
            if gap > max(noise, FLOOR):
                found.append(
                    f"position {i + 1} is kept on {statistics.fmean(x):.1%} of steps at k={a} and "
                    f"{statistics.fmean(y):.1%} at k={b} (spread {noise:.1%})"
                )
    if found:
        return {
            "status": "fails",
            "text": "the drafter's proposals (or its steps) depend on k: "
            + "; ".join(found)
            + ", so no unmeasured length is predicted",
        }
    if unknown:
        return {"status": "unchecked", "text": "a length has one request: its spread is unknown, unchecked"}
    return {"status": "holds", "text": f"positions shared by k = {', '.join(map(str, ks))} agree"}


def _tokens(samples: list[Sample], k: int, longest: int) -> dict | None:
    """Tokens per step at k: the sum of measured positions, or past them the ratio extrapolation
    with the nesting bound (each position one more keeps 0 to u_K)."""
    if k <= longest:
        return spread([1 + sum(s.kept[:k]) for s in samples if len(s.kept) >= k])
    last = [s.kept for s in samples if len(s.kept) == longest]
    more = k - longest
    ratios = [min(1.0, u[-1] / u[-2]) if len(u) > 1 and u[-2] else 0.0 for u in last]
    est = spread(
        [
            1 + sum(u) + u[-1] * sum(r**j for j in range(1, more + 1))
            for u, r in zip(last, ratios, strict=True)
        ]
    )
    floor, ceiling = spread([1 + sum(u) for u in last]), spread([1 + sum(u) + more * u[-1] for u in last])
    return {**est, "low": floor["low"] or floor["value"], "high": ceiling["high"] or ceiling["value"]}


def ms_line(columns: list[Column]) -> dict | None:
    """ms/step against drafted tokens per step over every run request (plots.fit, the bench's own
    line): per step, not per draft, so that steps which drafted nothing weigh in at their cost."""
    points = [
        (s.drafted, s.ms)
        for c in columns
        if c.card is None
        for s in c.samples
        if s.drafted is not None and s.ms is not None
    ]
    return plots.fit([x for x, _ in points], [y for _, y in points], plots.MIN_SPREAD["drafted_length"])


def _ms(line: dict, samples: list[Sample], k: int) -> dict | None:
    """The line at the column's drafted tokens per step at k (its drafted share of k, measured);
    None where no request counted its drafted tokens."""
    fills = [s.drafted / s.k for s in samples if s.drafted is not None]
    if not fills:
        return None
    fill = spread(fills)
    x = fill["value"] * k
    value = line["intercept"] + line["slope"] * x
    if line["residual_sd"] is None:
        return {"value": value, "low": None, "high": None, "n": line["points"]}
    fill_sd = (fill["high"] - fill["value"]) / 2 if fill["high"] is not None else 0.0
    sd = math.sqrt(
        line["residual_sd"] ** 2
        * (1 + 1 / line["points"] + (x - line["x_mean"]) ** 2 / line["x_sum_squares"])
        + (line["slope"] * k * fill_sd) ** 2
    )
    return {"value": value, "low": max(0.0, value - 2 * sd), "high": value + 2 * sd, "n": line["points"]}


def rate(tokens: dict | None, ms: dict | None) -> dict | None:
    """tok/s, its relative spread the two factors' added in quadrature (as compare's noise is);
    unknown where either spread is."""
    if not tokens or not ms or ms["value"] <= 0:
        return None
    value = 1000 * tokens["value"] / ms["value"]
    if tokens["high"] is None or ms["high"] is None:
        return {"value": value, "low": None, "high": None}
    rel = math.hypot(tokens["high"] / tokens["value"] - 1, ms["high"] / ms["value"] - 1)
    return {"value": value, "low": max(0.0, value * (1 - rel)), "high": value * (1 + rel)}


def _measured(column: Column, k: int) -> dict | None:
    """The figures measured at k: the requests' own (tok/s each request's), or the card's."""
    if column.card:
        if not column.samples or column.samples[0].k != k:
            return None
        return {name: _relative(*column.card[name]) if name in column.card else None for name in FACTORS}
    at = [s for s in column.samples if s.k == k]
    if not at:
        return None
    timed = [(1 + sum(s.kept), s.ms) for s in at if s.ms]
    return {
        "tokens_per_step": spread([1 + sum(s.kept) for s in at]),
        "ms_per_step": spread([ms for _, ms in timed]) if timed else None,
        "decode_tok_s": spread([1000 * tokens / ms for tokens, ms in timed]) if timed else None,
    }


FACTORS = ("tokens_per_step", "ms_per_step", "decode_tok_s")


def _relative(value: float, rsd: float | None) -> dict:
    low, high = (None, None) if rsd is None else (value * (1 - 2 * rsd), value * (1 + 2 * rsd))
    return {"value": value, "low": low, "high": high}


def cells(column: Column, line: dict | None, max_k: int, check: dict) -> list[dict]:
    """Every k: what was measured there, and what the model predicts (where it may)."""
    kept = [s for s in column.samples if s.kept]
    longest = max((len(s.kept) for s in kept), default=0)
    predicts = kept and not column.adaptive and check["status"] != "fails"
    out = []
    for k in range(1, max_k + 1):
        measured = _measured(column, k)
        predicted = None
        if predicts:
            tokens = _tokens(kept, k, longest)
            ms = _ms(line, column.samples, k) if line and column.card is None else None
            predicted = {"tokens_per_step": tokens, "ms_per_step": ms, "decode_tok_s": rate(tokens, ms)}
        if measured or predicted:
            kind = "measured" if measured else "predicted" if k <= longest else "extrapolated"
            out.append({"k": k, "from": kind, "measured": measured, "predicted": predicted})
    return out


def shown(cell: dict, factor: str) -> dict | None:
    """A cell's figure as the table shows it: measured where it was, else predicted."""
    for side in ("measured", "predicted"):
        if cell[side] and cell[side].get(factor):
            return cell[side][factor]
    return None


def advise(sources: list[str], max_k: int | None = None) -> dict:
    """The advice's figures for runs (folders with summary.json) and cards (NAME, path, NAME#ID)."""
    runs = [Path(s) for s in sources if (Path(s) / "summary.json").exists()]
    columns = run_columns(runs) if runs else []
    left: list[str] = []
    for source in sources:
        if Path(source) in runs:
            continue
        if Path(source).is_dir():
            raise SeatError(
                f"{source} has no summary.json", "give finished `seat bench run` folders or cards"
            )
        more, skipped = card_columns(source)
        columns += more
        left += skipped
    if not columns:
        raise SeatError(
            "nothing to advise on: no request or figure has tokens per step",
            "give runs whose spec-decode counters were read, or a card with tokens/step",
        )
    line = ms_line(columns)
    samples = [s for c in columns for s in c.samples]
    max_k = max_k or max([len(s.kept) + EXTRA for s in samples] + [s.k for s in samples] + [1])
    out = {}
    for column in columns:
        check = k_check(column)
        out[column.name] = {
            "kind": "card" if column.card is not None else "run",
            "source": column.source,
            "adaptive": column.adaptive,
            "check": check,
            "notes": column.notes,
            "cells": cells(column, line, max_k, check),
        }
    return {"columns": out, "line": line, "left_out": left, "max_k": max_k}
