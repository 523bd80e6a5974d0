"""Which draft length: tokens/step, ms/step and tok/s for every k and each suite, predicted from the
runs and reference cards a user already has (`seat bench advise`).

    tokens kept per step at k = 1 + u_1 + ... + u_k
    ms per step at k          = suite's intercept + slope x drafted tokens per step
    tok/s at k                = tokens per step / ms per step

u_i is the share of steps whose draft was kept through position i (accepted at position i over
steps), so 1 + the sum is the drafter's tokens per step exactly. Up to the longest draft measured
nothing is fitted, if the drafter proposes the same tokens at each position whatever k: where runs
at two k share positions their u_i must agree within their spread, else nothing unmeasured is
predicted. Past it u_i falls by the ratio of the last two positions (an extrapolation), inside what
nesting allows: a position is kept only when the one before it is, so each one more adds 0 to u_K;
no further than EXTRA past a suite's own longest draft. A step-time line that falls is load, and
predicts nothing; k=0 (drafting off) is the line's intercept. Spreads are the requests' (mean +- 2 standard deviations), the line's prediction interval, and for
tok/s the two relative spreads in quadrature; a single value has none, and says so.
"""

from __future__ import annotations

import math
import statistics

from seatkit.bench import plots
from seatkit.bench.advise_inputs import Column, Sample, columns_of
from seatkit.errors import SeatError

EXTRA = 2  # lengths shown past a suite's own longest measured draft, as extrapolations
FLOOR = 0.01  # shares of steps closer than this are the same, whatever the spread says


def spread(values: list[float]) -> dict:
    """Mean +- 2 standard deviations, never below 0 (no figure here is negative); low and high None
    for one value, or values all equal (greedy repeats of one text: the text's spread is unknown)."""
    mean = statistics.fmean(values)
    sd = statistics.stdev(values) if len(values) > 1 else None
    if not sd:
        return {"value": mean, "low": None, "high": None, "n": len(values)}
    return {"value": mean, "low": max(0.0, mean - 2 * sd), "high": mean + 2 * sd, "n": len(values)}


def _differ(x: list[float], y: list[float]) -> float | None:
    """The spread two groups of shares must differ by to differ: from both where both have one,
    from the one that has it (for both) where the other is a lone value; None where neither has."""
    sds = [statistics.stdev(v) for v in (x, y) if len(v) > 1]
    if not sds:
        return None
    return 2 * math.hypot(sds[0], sds[-1])


def k_check(column: Column) -> dict:
    """Do runs at different k keep the positions they share on the same share of steps? Every pair
    of lengths, not neighbours only: small steps must not hide a drift."""
    by_k: dict[int, list[list[float]]] = {}
    for s in column.samples:
        by_k.setdefault(s.k, []).append(s.kept)
    ks = sorted(by_k)
    if not ks:
        return {"status": "no length", "text": "no draft length known: nothing to place at a k"}
    if len(ks) < 2:
        return {"status": "one length", "text": "one draft length measured: nothing to check against"}
    found, unknown = [], False
    for j, b in enumerate(ks):
        for a in ks[:j]:
            for i in range(a):
                x, y = ([kept[i] for kept in by_k[k] if len(kept) > i] for k in (a, b))
                noise = _differ(x, y) if x and y else None
                if noise is None:
                    unknown = True
                    continue
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
    if est["low"] is None:  # from one request: the bounds too are of unknown spread
        return est
    floor, ceiling = spread([1 + sum(u) for u in last]), spread([1 + sum(u) + more * u[-1] for u in last])
    return {**est, "low": floor["low"] or floor["value"], "high": ceiling["high"] or ceiling["value"]}


def ms_line(columns: list[Column]) -> dict | None:
    """ms/step against drafted tokens per step over every run request: one slope, fitted within
    each suite (a suite's context or text shifts its step, never how a drafted token costs), and
    each suite's own intercept. Per step, not per draft, so that steps which drafted nothing weigh
    in at their cost. None where no suite's drafted tokens vary (by plots.MIN_SPREAD). A line
    that falls is marked: drafting more never makes a step cheaper, so it is load (a busy host
    during one run), not a slope, and predicts no step time."""
    groups = {
        c.name: [(s.drafted, s.ms) for s in c.samples if s.drafted is not None and s.ms is not None]
        for c in columns
        if c.card is None
    }
    groups = {name: points for name, points in groups.items() if points}
    varies = [
        points
        for points in groups.values()
        if max(x for x, _ in points) - min(x for x, _ in points) >= plots.MIN_SPREAD["drafted_length"]
    ]
    if not varies:
        return None
    means = {
        name: (statistics.fmean(x for x, _ in p), statistics.fmean(y for _, y in p))
        for name, p in groups.items()
    }
    sxx = sum((x - means[n][0]) ** 2 for n, p in groups.items() for x, _ in p)
    slope = sum((x - means[n][0]) * (y - means[n][1]) for n, p in groups.items() for x, y in p) / sxx
    intercepts = {name: my - slope * mx for name, (mx, my) in means.items()}
    points = sum(len(p) for p in groups.values())
    free = points - len(groups) - 1  # one intercept a suite, one slope
    squares = sum((y - intercepts[n] - slope * x) ** 2 for n, p in groups.items() for x, y in p)
    return {
        "slope": slope,
        "intercept": sum(intercepts[n] * len(p) for n, p in groups.items()) / points,
        "intercepts": intercepts,
        "points": points,
        "suite_points": {name: len(p) for name, p in groups.items()},
        "residual_sd": math.sqrt(squares / free) if free > 0 else None,
        "x_means": {name: mx for name, (mx, _) in means.items()},
        "x_sum_squares": sxx,
        "falls": slope < 0,
    }


def line_at(line: dict, suite: str, x: float, extra_sd: float = 0.0) -> dict | None:
    """The line's ms/step for a suite at x drafted tokens per step, with its prediction interval;
    None where the suite has no intercept, the line falls, or it reaches 0 there (no step time is
    below 0)."""
    if suite not in line["intercepts"]:
        return None
    value = line["intercepts"][suite] + line["slope"] * x
    if line["falls"] or value <= 0:
        return None
    n = line["suite_points"][suite]
    if line["residual_sd"] is None:
        return {"value": value, "low": None, "high": None, "n": n}
    sd = math.sqrt(
        line["residual_sd"] ** 2 * (1 + 1 / n + (x - line["x_means"][suite]) ** 2 / line["x_sum_squares"])
        + extra_sd**2
    )
    return {"value": value, "low": max(0.0, value - 2 * sd), "high": value + 2 * sd, "n": n}


def _ms(line: dict, column: Column, k: int) -> dict | None:
    """The line at the column's drafted tokens per step at k (its drafted share of k, measured);
    None where no request counted its drafted tokens."""
    fills = [s.drafted / s.k for s in column.samples if s.drafted is not None]
    if not fills:
        return None
    fill = spread(fills)
    fill_sd = (fill["high"] - fill["value"]) / 2 if fill["high"] is not None else 0.0
    return line_at(line, column.name, fill["value"] * k, line["slope"] * k * fill_sd)


def no_draft(line: dict | None) -> dict[str, dict]:
    """k=0, drafting off, per suite: 1 token a step at the suite's intercept (an extrapolation to 0
    drafted tokens where no run drafted none); none where the line does not allow it."""
    if not line:
        return {}
    out = {}
    for suite in line["intercepts"]:
        ms = line_at(line, suite, 0.0)
        if ms:
            out[suite] = {
                "ms_per_step": ms,
                "decode_tok_s": rate({"value": 1.0, "low": 1.0, "high": 1.0}, ms),
            }
    return out


def rate(tokens: dict | None, ms: dict | None, bounds: bool = False) -> dict | None:
    """tok/s, its relative spread the two factors' added in quadrature (as compare's noise is);
    with bounds (an extrapolation's tokens/step), wide enough for the worst of both ends too;
    unknown where either spread is."""
    if not tokens or not ms or ms["value"] <= 0:
        return None
    value = 1000 * tokens["value"] / ms["value"]
    if tokens["high"] is None or ms["high"] is None:
        return {"value": value, "low": None, "high": None}
    rel = math.hypot(tokens["high"] / tokens["value"] - 1, ms["high"] / ms["value"] - 1)
    low, high = max(0.0, value * (1 - rel)), value * (1 + rel)
    if bounds:
        low = min(low, 1000 * tokens["low"] / ms["high"])
        high = max(high, 1000 * tokens["high"] / ms["low"]) if ms["low"] > 0 else high
    return {"value": value, "low": low, "high": high}


FACTORS = ("tokens_per_step", "ms_per_step", "decode_tok_s")


def _measured(column: Column, k: int) -> dict | None:
    """The figures measured at k: the requests' own (tok/s as the run measured it), or the card's."""
    if column.card:
        if not column.samples or column.samples[0].k != k:
            return None
        return {name: _relative(*column.card[name]) if name in column.card else None for name in FACTORS}
    at = [s for s in column.samples if s.k == k]
    if not at:
        return None
    timed = [(s.ms, s.tok_s or 1000 * (1 + sum(s.kept)) / s.ms) for s in at if s.ms]
    return {
        "tokens_per_step": spread([1 + sum(s.kept) for s in at]),
        "ms_per_step": spread([ms for ms, _ in timed]) if timed else None,
        "decode_tok_s": spread([tok_s for _, tok_s in timed]) if timed else None,
    }


def _relative(value: float, rsd: float | None) -> dict:
    low, high = (None, None) if rsd is None else (value * (1 - 2 * rsd), value * (1 + 2 * rsd))
    return {"value": value, "low": low, "high": high}


def cells(column: Column, line: dict | None, max_k: int | None, check: dict) -> list[dict]:
    """What was measured at each k, and what the model predicts at every k up to EXTRA past the
    suite's own longest draft (and --max-k), where it may."""
    kept = [s for s in column.samples if s.kept]
    longest = max((len(s.kept) for s in kept), default=0)
    predicts = kept and not column.adaptive and check["status"] != "fails"
    top = min(longest + EXTRA, max_k or longest + EXTRA) if predicts else 0
    out = []
    for k in sorted(set(range(1, top + 1)) | {s.k for s in column.samples}):
        measured = _measured(column, k)
        predicted = None
        if predicts and k <= top:
            tokens = _tokens(kept, k, longest)
            ms = _ms(line, column, k) if line and column.card is None else None
            predicted = {
                "tokens_per_step": tokens,
                "ms_per_step": ms,
                "decode_tok_s": rate(tokens, ms, bounds=k > longest),
            }
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
    columns, left = columns_of(sources)
    if not columns:
        raise SeatError(
            "nothing to advise on: no request or figure has tokens per step"
            + "".join(f"; {said}" for said in left),
            "give runs whose spec-decode counters were read, or a card with tokens/step",
        )
    line = ms_line(columns)
    out: dict[str, dict] = {}
    for column in columns:
        check = k_check(column)
        out[column.name] = {
            "kind": "card" if column.card is not None else "run",
            "source": column.source,
            "adaptive": column.adaptive,
            "drafted_nothing": bool(column.samples)
            and all(s.drafted == 0 for s in column.samples)
            and column.card is None,
            "check": check,
            "notes": column.notes,
            "cells": cells(column, line, max_k, check),
        }
    shown_k = max((c["k"] for col in out.values() for c in col["cells"]), default=1)
    return {
        "columns": out,
        "line": line,
        "no_draft": no_draft(line),
        "left_out": left,
        "max_k": max_k or shown_k,
    }
