"""The verdict on two entries: each factor's ratio, the log split of the tok/s gap, which factor
carries it past the noise, what usually moves that factor, and which differing conditions can
explain it (the words are in bench/compare.yaml)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from functools import cache
from pathlib import Path

from seatkit import paths, safe_yaml
from seatkit.bench import aggregate, sides
from seatkit.bench.sides import FACTORS, Entry, suite_entries


@cache
def words() -> dict:
    """bench/compare.yaml: what moves each factor, what each condition explains, the headlines."""
    return safe_yaml.read(paths.REPO / "bench" / "compare.yaml", "compare's words")


def what_moves(factor: str, cpu: bool = False) -> str:
    """What usually moves a factor, on a CPU seat where that differs."""
    known = words()
    return (known["what_moves_cpu"] if cpu else {}).get(factor, known["what_moves"][factor])


def explains(condition: str) -> str | None:
    """The factor a differing condition can move (both: either), None for one that moves none."""
    return words()["explains"].get(condition)


def apart(ratio: float) -> float:
    """The symmetric gap: the larger over the smaller, minus one (87 % apart either way round)."""
    return math.exp(abs(math.log(ratio))) - 1


MOVE_FLOOR = 0.01  # a factor never counts as moved by less than 1 %


def _noise(factor: str, a: Entry, b: Entry) -> float | None:
    """About two standard deviations of a ratio, from both sides' spreads (None when neither has one)."""
    spreads = [e.spread[factor] for e in (a, b) if factor in e.spread]
    return 2 * math.sqrt(sum(s * s for s in spreads)) if spreads else None


def _threshold(factor: str, a: Entry, b: Entry) -> tuple[float | None, str]:
    """How far a factor may move by chance: its own spread, else tok/s's, never under the floor;
    None when neither side measured a spread (one value each): then no move can be told from noise."""
    own = _noise(factor, a, b)
    noise = own if own is not None else _noise("decode_tok_s", a, b)
    if noise is None:
        return None, "spread unknown"
    return max(noise, MOVE_FLOOR), "its own spread" if own is not None else "the tok/s spread"


SUSTAINED = {("llm_decode_bench", "sustained", 1): aggregate.LDB_SUSTAINED}


def matched(x: Entry, y: Entry) -> tuple[Entry, Entry, str | None]:
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


def harness_caveat(x: Entry, y: Entry) -> str | None:
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


def _explains(differing: Sequence[str], factor: str) -> list[str]:
    return [k for k in differing if explains(k) in (factor, "both")]


def verdict(ratios: dict[str, float], a: Entry, b: Entry, differing: Sequence[str] = ()) -> dict:
    """Which factor carries the gap of these ratios (A over B), judged against both sides' spread."""
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
    noise = None if noise is None else max(noise, MOVE_FLOOR)  # as the factors: never under 1 %
    gap = apart(ratios["decode_tok_s"])
    cpu = "cpu" in (a.conditions.get("device"), b.conditions.get("device"))
    unknown = noise is None and all(_noise(f, a, b) is None for f in ("tokens_per_step", "ms_per_step"))
    one_sided = [side for side, e in (("A", a), ("B", b)) if not e.spread] if not unknown else []
    # Each factor is judged against its own spread: one can move beyond its noise while tok/s,
    # noisier, stays inside its own, and both can move at once (even in opposite directions).
    limits = {f: _threshold(f, a, b) for f in ("tokens_per_step", "ms_per_step")}
    moved = [f for f, (limit, _) in limits.items() if limit is not None and apart(ratios[f]) > limit]
    if noise is not None and gap <= noise and not moved and not one_sided:
        return {
            "within_noise": True,
            "noise": noise,
            "moved": [],
            "text": f"within noise: {gap:.1%} apart, spread allows {noise:.1%}; neither factor moved",
        }
    # Each factor's part of log(tok/s ratio): + log tokens/step ratio, - log ms/step ratio.
    parts = {"tokens_per_step": log["tokens_per_step"], "ms_per_step": -log["ms_per_step"]}
    shares = {
        f: p / log["decode_tok_s"] if abs(log["decode_tok_s"]) > 1e-12 else None for f, p in parts.items()
    }
    # A factor known to be inside its spread never leads; one whose spread is unknown may.
    open_ = [f for f in parts if f in moved or limits[f][0] is None]
    factor = max(open_ or parts, key=lambda f: abs(parts[f]))
    # The main factor first, then any other that moved.
    named = sorted(set(moved) | {factor} | (set(parts) if unknown else set()), key=lambda f: -abs(parts[f]))
    said = [_factor_said(f, ratios[f], shares[f], limits[f], f in moved, differing, cpu) for f in named]
    headline = _headline(factor, differing, a, b) if moved or unknown else "no factor moved beyond its spread"
    if one_sided:  # the limits are the other side's alone: say so, never call a gap noise on them
        headline += (
            f". {' and '.join(one_sided)}'s spread is unknown (one value, or none given), so each limit "
            "below is the other side's alone, and a gap inside it is not shown to be chance"
        )
    return {
        "within_noise": False,
        "noise": noise,
        "moved": moved,
        "factor": factor,
        "share": shares[factor],
        "meaning": _meaning(factor, differing) if moved or unknown else "",
        "shares": shares,
        "spread_unknown": unknown,
        "text": f"{headline}. {_lead(gap, noise, moved, factor, unknown)}. " + ". ".join(said),
    }


def _lead(gap: float, noise: float | None, moved: list[str], factor: str, unknown: bool) -> str:
    """The tok/s gap against its spread, and which factors moved."""
    if unknown:
        return (
            f"tok/s {gap:.1%} apart; spread UNKNOWN: each side is one value (or gives no spread), "
            f"so no gap can be told from noise; {factor_name(factor)} carries the most. Repeat "
            "the runs (--repeats 3 or more) to judge it"
        )
    if noise is None:
        lead = f"tok/s {gap:.1%} apart (neither side gives a tok/s spread)"
    elif gap <= noise:
        lead = f"tok/s {gap:.1%} apart, inside its spread ({noise:.1%})"
    else:
        lead = f"tok/s {gap:.1%} apart (spread allows {noise:.1%})"
    if len(moved) == 2:
        lead += "; both factors moved"
    elif not moved:
        lead += f"; neither factor moved beyond its own spread, {factor_name(factor)} carries the most"
    return lead


def _factor_said(
    f: str,
    ratio: float,
    share: float | None,
    limit_source: tuple[float | None, str],
    moved: bool,
    differing: Sequence[str],
    cpu: bool,
) -> str:
    """One factor: how far it moved, its share of the gap, what moves it, what can explain it."""
    limit, source = limit_source
    carries = (
        "none of it (the factors cancel)"
        if share is None
        else f"{share:.0%} of the gap".replace("-0%", "0%")
        if share > -0.005
        else f"{share:.0%} of the gap: it works against it"
    )
    # Symmetric like tok/s: the same size whichever side is A, the direction named.
    side = f"{apart(ratio):.1%} apart, {'higher' if ratio > 1 else 'lower'} on A"
    if moved:
        how = f"moved: {side} (beyond {source}, {limit:.1%})"
    elif limit is None:
        how = f"{side} (spread unknown)"
    else:
        how = f"{side} (inside {source}, {limit:.1%})"
    text = f"{factor_name(f)} {how} and carries {carries}; what usually moves it: {what_moves(f, cpu)}"
    causes = _explains(differing, f)
    if causes:
        text += f"; differing conditions that can explain it: {', '.join(map(condition_name, causes))}"
    elif moved:  # beyond its measured spread: a cause the conditions don't record, never noise
        text += "; no recorded condition differs that explains it: look for one the runs do not record"
    return text


def _meaning(factor: str, differing: Sequence[str]) -> str:
    """What the leading factor says of the gap, in words ("" where it says nothing on its own)."""
    if factor == "tokens_per_step":
        return "the text, not the rig" if "content" in differing else ""
    return words()["headline"][factor].partition(": ")[2]


def _headline(factor: str, differing: Sequence[str], a: Entry, b: Entry) -> str:
    headline = words()["headline"][factor]
    if "content" in differing:
        if factor == "tokens_per_step":
            headline = f"acceptance: {_meaning(factor, differing)}"
        headline += (
            f" (content differs: {a.conditions.get('content')} vs "
            f"{b.conditions.get('content')}, and content usually moves tokens/step)"
        )
    return headline


def split(x: Entry, y: Entry, differing: Sequence[str] = ()) -> dict:
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
        out["verdict"] = verdict(r, x, y, differing)
    else:
        lacking = [
            f"{side} gives no {factor_name(k)} ({e.missing.get(k, 'not given')})"
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
    found = {e.key: e for e in suite_entries(folder, summary)}
    return split(found[a], found[b], sides.differing(found[a], found[b]))


def condition_name(condition: str) -> str:
    """A condition in words (host settings, prompt text (sha256)), never its key."""
    return words()["condition_notes"].get(condition, condition.replace("_", " "))


def factor_name(factor: str) -> str:
    return factor.replace("_", " ")
