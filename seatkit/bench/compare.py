"""`seat bench compare A B`: two runs or reference cards, factor by factor.

    log(tok/s ratio) = log(tokens-per-step ratio) - log(ms-per-step ratio)

Entries are paired by suite (run against run) or by content and context (anything against a card).
The verdict weighs each side's spread; past the noise it names the factor that carries the gap.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

from seatkit.bench import cards
from seatkit.errors import SeatError

FACTORS = ("decode_tok_s", "tokens_per_step", "ms_per_step")
CONDITIONS = ("model", "draft", "k", "draft_policy", "temperature", "content", "context", "padding",
              "output_tokens", "host_settings", "b12x_kernels", "statistic")
# Conditions shown under another name, with the factor they usually move.
CONDITION_NOTES = {"b12x_kernels": ("b12x kernels", "usually moves ms/step")}
WHAT_MOVES = {
    "ms_per_step": "step time: host settings (IOMMU, P2P registry keys, ReBAR, HMM), the image and "
                   "its kernels, power limits and clocks",
    "tokens_per_step": "acceptance: content (code or prose), drafting policy and k, temperature, "
                       "the draft head, repetitive padding",
}


@dataclass
class Entry:
    side: str
    key: str
    label: str
    conditions: dict
    values: dict[str, float]
    spread: dict[str, float]  # relative standard deviation per factor, where known
    derived: list[str] = field(default_factory=list)


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
        spread |= {k: (hi - lo) / 4 / ((hi + lo) / 2) for k, (lo, hi) in figure.range.items()
                   if k in FACTORS}
        out.append(Entry(card.name, figure.id, f"{figure.id}: {figure.what}",
                         card.conditions_of(figure), values, spread, _derive(values)))
    return out


def run_entries(folder: Path) -> list[Entry]:
    summary = json.loads((folder / "summary.json").read_text())
    c = summary["conditions"]
    out = []
    for suite, s in summary["suites"].items():
        values = {k: s[k]["median"] for k in FACTORS if s.get(k)}
        spread = {k: s[k]["cv"] for k in FACTORS if s.get(k) and s[k]["cv"] is not None}
        conditions = {"model": c.get("base_model") or c["model"], "draft": c.get("draft_model") or
                      c.get("draft_method"), "k": c.get("k"), "draft_policy": c.get("draft_policy"),
                      "temperature": c["sampling"].get("temperature"), "content": s["content"],
                      "context": s.get("context", 0), "padding": s.get("padding"),
                      "output_tokens": s.get("output_tokens"),
                      "host_settings": c.get("host_settings", "unrecorded"),
                      "b12x_kernels": c.get("b12x_kernels") or "unrecorded", "statistic": "median"}
        out.append(Entry(folder.name, suite, suite, conditions, values, spread, _derive(values)))
    return out


def entries(source: str) -> list[Entry]:
    """A run directory (has summary.json) or a reference card (name or path)."""
    path = Path(source)
    if (path / "summary.json").exists():
        return run_entries(path)
    if path.is_dir():
        raise SeatError(f"{path} has no summary.json", "give a finished run directory or a card")
    return card_entries(cards.load(source))


def _pairs(a: list[Entry], b: list[Entry], by_suite: bool) -> list[tuple[Entry, Entry]]:
    key = (lambda e: e.key) if by_suite else (lambda e: (e.conditions.get("content"),
                                                          e.conditions.get("context") or 0))
    return [(x, y) for x in a for y in b if key(x) == key(y)]


MOVE_FLOOR = 0.01  # a factor never counts as moved by less than 1 %


def _noise(factor: str, a: Entry, b: Entry) -> float | None:
    """About two standard deviations of a ratio, from both sides' spreads (None when neither has one)."""
    spreads = [e.spread[factor] for e in (a, b) if factor in e.spread]
    return 2 * math.sqrt(sum(s * s for s in spreads)) if spreads else None


def _verdict(ratios: dict[str, float], a: Entry, b: Entry) -> dict:
    log = {k: math.log(r) for k, r in ratios.items()}
    noise = _noise("decode_tok_s", a, b)
    gap = abs(ratios["decode_tok_s"] - 1)
    # Each factor is judged against its own spread: one can move beyond its noise while tok/s,
    # noisier, stays inside its own.
    moved = [f for f in ("tokens_per_step", "ms_per_step") if _noise(f, a, b) is not None
             and abs(ratios[f] - 1) > max(_noise(f, a, b), MOVE_FLOOR)]
    if noise is not None and gap <= noise and not moved:
        return {"within_noise": True, "noise": noise, "moved": [],
                "text": f"within noise: {gap:.1%} apart, spread allows {noise:.1%}"}
    acceptance, step = log.get("tokens_per_step", 0.0), -log.get("ms_per_step", 0.0)
    factor = "tokens_per_step" if abs(acceptance) >= abs(step) else "ms_per_step"
    share = (acceptance if factor == "tokens_per_step" else step) / log["decode_tok_s"] \
        if log["decode_tok_s"] else 0.0
    if noise is None:
        lead = f"{gap:.1%} apart (neither side gives a spread)"
    elif gap <= noise:
        lead = (f"tok/s {gap:.1%} apart, inside its spread ({noise:.1%}), yet "
                f"{' and '.join(f.replace('_', ' ') for f in moved)} moved beyond its own")
    else:
        lead = f"{gap:.1%} apart (spread allows {noise:.1%})"
    return {"within_noise": False, "noise": noise, "moved": moved, "factor": factor, "share": share,
            "text": f"{lead}; {factor.replace('_', ' ')} carries {share:.0%} of it. "
                    f"What usually moves it: {WHAT_MOVES[factor]}"}


@dataclass
class Comparison:
    a: str
    b: str
    rows: list[dict]
    differing: dict[str, list[str]]  # condition -> "A vs B" for any pair
    refused: str | None = None


def compare(a: str, b: str, force: bool = False) -> Comparison:
    left, right = entries(a), entries(b)
    by_suite = all((Path(s) / "summary.json").exists() for s in (a, b))
    pairs = _pairs(left, right, by_suite)
    differing: dict[str, list[str]] = {}
    rows = []
    for x, y in pairs:
        diff = {k: f"{x.conditions.get(k)} vs {y.conditions.get(k)}" for k in CONDITIONS
                if x.conditions.get(k) != y.conditions.get(k)}
        for k, text in diff.items():
            name, note = CONDITION_NOTES.get(k, (k, ""))
            text = f"{text} ({note})" if note else text
            differing.setdefault(name, [])
            if text not in differing[name]:
                differing[name].append(text)
        row = {"a": x.label, "b": y.label, "conditions_differ": sorted(diff),
               "a_values": x.values, "b_values": y.values, "derived": {"a": x.derived, "b": y.derived}}
        common = [k for k in FACTORS if k in x.values and k in y.values]
        row["ratios"] = {k: x.values[k] / y.values[k] for k in common}
        if "decode_tok_s" in row["ratios"] and len(common) == 3:
            r = row["ratios"]
            row["log_split"] = {"tok_s": math.log(r["decode_tok_s"]),
                                "tokens_per_step": math.log(r["tokens_per_step"]),
                                "minus_ms_per_step": -math.log(r["ms_per_step"])}
            row["verdict"] = _verdict(r, x, y)
        else:
            row["verdict"] = {"text": "not enough factors on both sides to split"}
        rows.append(row)
    refused = None
    if "model" in differing and not force:
        refused = (f"refused: the two sides are different models ({'; '.join(differing['model'])}); "
                   "their tok/s says nothing about either rig. --force compares them anyway")
    if not pairs:
        refused = refused or ("nothing to compare: no suite or figure of one side matches the other's "
                              "content and context")
    return Comparison(a, b, rows if not refused else [], differing, refused)


def markdown(c: Comparison) -> str:
    lines = [f"# Compare: A = {c.a}, B = {c.b}", "", "## Conditions that differ", ""]
    lines += [f"- {k}: {'; '.join(v)}" for k, v in c.differing.items()] or ["- none"]
    if c.refused:
        return "\n".join(lines + ["", c.refused]) + "\n"
    lines += ["", "| A | B | tok/s A / B (ratio) | tokens/step A / B (ratio) | ms/step A / B (ratio) "
              "| verdict |", "|---|---|---|---|---|---|"]
    for row in c.rows:
        cells = []
        for k in FACTORS:
            a, b = row["a_values"].get(k), row["b_values"].get(k)
            mark = lambda side, v: (f"{v:.2f}" + ("*" if k in row["derived"][side] else "")  # noqa: E731
                                    if v is not None else "n/a")
            ratio = f" ({row['ratios'][k]:.3f})" if k in row["ratios"] else ""
            cells.append(f"{mark('a', a)} / {mark('b', b)}{ratio}")
        lines.append(f"| {row['a']} | {row['b']} | " + " | ".join(cells) + f" | {row['verdict']['text']} |")
    lines += ["", "\\* derived from the other two factors (tok/s = tokens per step / step time)."]
    return "\n".join(lines) + "\n"


def as_json(c: Comparison) -> str:
    return json.dumps(asdict(c), indent=2)
