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

from seatkit import safe_yaml
from seatkit.bench import cards, summary
from seatkit.errors import SeatError

FACTORS = ("decode_tok_s", "tokens_per_step", "ms_per_step")
CONDITIONS = ("model", "draft", "k", "draft_policy", "temperature", "content", "context", "padding",
              "output_tokens", "host_settings", "image", "b12x_kernels", "statistic", "model_lock")
OPTIONAL = {"model_lock"}  # compared only when both sides record it (cards do not)
UNKNOWN = "unknown"
SUMMARY_BYTES = 64 * 1024 * 1024  # per-prompt figures of a long suite list
# Conditions shown under another name, with the factor they usually move.
CONDITION_NOTES = {"b12x_kernels": ("b12x kernels", "usually moves ms/step")}
SWEEP_SCHEMA = "seatkit.bench.sweep/1"  # sweep.SCHEMA (sweep imports the bench's runner)
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
    path = folder / "summary.json"
    try:
        data = safe_yaml.read_json(path, "bench summary", SUMMARY_BYTES)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        raise SeatError(f"{path} is not a file", "give the folder of a finished `seat bench run`") from None
    if isinstance(data, dict) and data.get("schema") == SWEEP_SCHEMA:
        raise SeatError(f"{folder} is a concurrency sweep: compare splits batch-1 runs",
                        "compare two sweeps by their report.md tables, level by level")
    try:
        return _run_entries(folder, summary.check(data, str(path)))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise SeatError(f"{folder / 'summary.json'} is not a bench summary ({type(exc).__name__}: "
                        f"{exc})", "give the folder of a finished `seat bench run`") from None


def _run_entries(folder: Path, data: dict) -> list[Entry]:
    c = data["conditions"]
    out = []
    for suite, s in data["suites"].items():
        values = {k: s[k]["median"] for k in FACTORS if s.get(k)}
        bad = [k for k, v in values.items() if not (isinstance(v, (int, float)) and 0 < v < math.inf)]
        if bad:
            raise ValueError(f"suite {suite}: {', '.join(bad)} not a positive number")
        spread = {k: s[k]["cv"] for k in FACTORS if s.get(k) and s[k]["cv"] is not None}
        conditions = {"model": c.get("base_model") or c["model"], "draft": c.get("draft_model") or
                      c.get("draft_method"), "k": c.get("k"), "draft_policy": c.get("draft_policy"),
                      "temperature": c["sampling"].get("temperature"), "content": s["content"],
                      "context": s.get("context", 0), "padding": s.get("padding"),
                      "output_tokens": s.get("output_tokens"),
                      "host_settings": c.get("host_settings"), "image": _image(c),
                      "b12x_kernels": c.get("b12x_kernels"), "statistic": "median",
                      "model_lock": _lock_text(c.get("model_locks"))}
        out.append(Entry(folder.name, suite, suite, conditions, values, spread, _derive(values)))
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


def _threshold(factor: str, a: Entry, b: Entry) -> tuple[float, str]:
    """How far a factor may move by chance: its own spread, else tok/s's, never under the floor."""
    own = _noise(factor, a, b)
    noise = own if own is not None else _noise("decode_tok_s", a, b)
    source = "its own spread" if own is not None else \
        ("the tok/s spread" if noise is not None else "the 1 % floor")
    return max(noise or 0.0, MOVE_FLOOR), source


def _verdict(ratios: dict[str, float], a: Entry, b: Entry) -> dict:
    log = {k: math.log(r) for k, r in ratios.items()}
    noise = _noise("decode_tok_s", a, b)
    gap = abs(ratios["decode_tok_s"] - 1)
    # Each factor is judged against its own spread: one can move beyond its noise while tok/s,
    # noisier, stays inside its own, and both can move at once (even in opposite directions).
    limits = {f: _threshold(f, a, b) for f in ("tokens_per_step", "ms_per_step")}
    moved = [f for f, (limit, _) in limits.items() if abs(ratios[f] - 1) > limit]
    if noise is not None and gap <= noise and not moved:
        return {"within_noise": True, "noise": noise, "moved": [],
                "text": f"within noise: {gap:.1%} apart, spread allows {noise:.1%}"}
    # Each factor's part of log(tok/s ratio): + log tokens/step ratio, - log ms/step ratio.
    parts = {"tokens_per_step": log["tokens_per_step"], "ms_per_step": -log["ms_per_step"]}
    shares = {f: p / log["decode_tok_s"] if abs(log["decode_tok_s"]) > 1e-12 else None
              for f, p in parts.items()}
    factor = max(parts, key=lambda f: abs(parts[f]))
    if noise is None:
        lead = f"tok/s {gap:.1%} apart (neither side gives a spread)"
    elif gap <= noise:
        lead = f"tok/s {gap:.1%} apart, inside its spread ({noise:.1%})"
    else:
        lead = f"tok/s {gap:.1%} apart (spread allows {noise:.1%})"
    named = moved or [factor]
    if len(moved) == 2:
        lead += "; both factors moved"
    elif not moved:
        lead += f"; neither factor moved beyond its own spread, {_name(factor)} carries the most"
    said = []
    for f in named:
        limit, source = limits[f]
        share = f"{shares[f]:.0%} of the gap" if shares[f] is not None else "the factors cancel"
        how = f"moved {ratios[f] - 1:+.1%} (beyond {source}, {limit:.1%})" if f in moved \
            else f"{ratios[f] - 1:+.1%}"
        said.append(f"{_name(f)} {how} and carries {share}; what usually moves it: {WHAT_MOVES[f]}")
    return {"within_noise": False, "noise": noise, "moved": moved, "factor": factor,
            "share": shares[factor], "shares": shares, "text": f"{lead}. " + ". ".join(said)}


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
    by_suite = all((Path(s) / "summary.json").exists() for s in (a, b))
    pairs = _pairs(left, right, by_suite)
    listed = {k: f"{_side(left, k)} vs {_side(right, k)}" for k in CONDITIONS}
    # Unpaired sides differ wherever their listed values do.
    differing = {} if pairs else {k: [text] for k, text in listed.items()
                                  if _side(left, k) != _side(right, k)}
    # A model one side does not name cannot be shown to be the same.
    if any(e.conditions.get("model") is None for e in left + right):
        differing["model"] = [listed["model"]]
    rows = []
    for x, y in pairs:
        diff = {k: f"{_said(x.conditions.get(k))} vs {_said(y.conditions.get(k))}" for k in CONDITIONS
                if x.conditions.get(k) != y.conditions.get(k)
                and not (k in OPTIONAL and None in (x.conditions.get(k), y.conditions.get(k)))}
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
        refused = (f"refused: the two sides are different models, or one does not say which "
                   f"({'; '.join(differing['model'])}); "
                   "their tok/s says nothing about either rig. --force compares them anyway")
    if not pairs:
        refused = refused or ("nothing to compare: no suite or figure of one side matches the other's "
                              "content and context")
    return Comparison(a, b, rows if not refused else [], differing, listed, refused)


def markdown(c: Comparison) -> str:
    lines = [f"# Compare: A = {c.a}, B = {c.b}", "", "## Conditions (A vs B)", ""]
    lines += [f"- {k}: {v}" + (" (differs)" if k in c.differing else "")
              for k, v in c.conditions.items()]
    lines += ["", "## Conditions that differ", ""]
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
