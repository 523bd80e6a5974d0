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
from dataclasses import asdict, dataclass, field
from pathlib import Path

from seatkit.bench import report, verdicts
from seatkit.bench.sides import CONDITIONS, FACTORS, UNKNOWN, Entry, entries
from seatkit.bench.sides import differing as conditions_differ


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


@dataclass
class Comparison:
    a: str
    b: str
    rows: list[dict]
    differing: dict[str, list[str]]  # condition -> "A vs B" for any pair
    conditions: dict[str, str] = field(default_factory=dict)  # every condition: "A vs B"
    refused: str | None = None
    unverified: dict[str, str] = field(default_factory=dict)  # side ("A", "B") -> why, the mark's reason


def _unverified(a: list[Entry], b: list[Entry]) -> dict[str, str]:
    """Why each side's results are marked UNVERIFIED, its entries' reasons once each."""
    found = {}
    for name, side in (("A", a), ("B", b)):
        reasons = dict.fromkeys(
            str(e.conditions["unverified"]) for e in side if e.conditions.get("unverified")
        )
        if reasons:
            found[name] = "; ".join(reasons)
    return found


def unverified_lines(c: Comparison) -> list[str]:
    """The reasons behind the table's UNVERIFIED marks, a side a line."""
    return [f"{side} UNVERIFIED: {why}" for side, why in c.unverified.items()]


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
            for k in conditions_differ(x, y)
        }
        _note(diff, differing)
        rows.append(_row(x, y, diff))
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
    marks = _unverified(left, right)
    return Comparison(a, b, rows if not refused else [], differing, listed, refused, marks)


def _note(diff: dict[str, str], differing: dict[str, list[str]]) -> None:
    """A pair's differing conditions into the comparison's, each with what it can move."""
    known = verdicts.words()
    for k, text in diff.items():
        name = known["condition_notes"].get(k, k)
        note = "" if k == "model" else known["moves_text"].get(verdicts.explains(k), "")  # refused anyway
        text = f"{text} ({note})" if note else text
        differing.setdefault(name, [])
        if text not in differing[name]:
            differing[name].append(text)


def _row(x: Entry, y: Entry, diff: dict[str, str]) -> dict:
    """One pair's row: both sides' figures, their split and verdict, or the harness's refusal."""
    x, y, harness = verdicts.matched(x, y)
    row: dict = {
        "a": x.label,
        "b": y.label,
        "conditions_differ": sorted(diff),
        "a_values": x.values,
        "b_values": y.values,
        "derived": {"a": x.derived, "b": y.derived},
        "acceptance_by_position": {"a": x.acceptance_by_position, "b": y.acceptance_by_position},
        "missing": {"a": x.missing, "b": y.missing},
        "harness": harness,
    }
    if isinstance(harness, str) and harness.startswith("refused"):
        return {**row, "ratios": {}, "verdict": {"text": harness}}
    row |= verdicts.split(x, y, sorted(diff))
    for caveat in (x.caveat, y.caveat, verdicts.harness_caveat(x, y)):
        if caveat:
            row["verdict"]["text"] += f". Caveat: {caveat}"
    return row


def markdown(c: Comparison) -> str:
    lines = [f"# Compare: A = {c.a}, B = {c.b}", "", "## Conditions (A vs B)", ""]
    name = verdicts.condition_name  # in words: host settings, never host_settings
    lines += [
        f"- {name(k)}: {v}" + (" (differs)" if {k, name(k)} & set(c.differing) else "")
        for k, v in c.conditions.items()
    ]
    lines += ["", "## Conditions that differ", ""]
    lines += [f"- {name(k)}: {'; '.join(v)}" for k, v in c.differing.items()] or ["- none"]
    lines += ["", *(f"- {line}" for line in unverified_lines(c))] if c.unverified else []
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
    said = under_table(c)
    lines += [""] + [f"- {line}" for line in said] if said else []
    return "\n".join([*lines, "", "\\" + FOOTNOTE]) + "\n"


def under_table(c: Comparison) -> list[str]:
    """Each harness-matched figure, then acceptance by draft position on both sides (% of drafted
    steps) where either has it."""
    said = [
        row["harness"] for row in c.rows if row.get("harness") and not row["harness"].startswith("refused")
    ]
    for row in c.rows:
        a, b = (report.positions(row["acceptance_by_position"][side]) for side in ("a", "b"))
        said += [] if a == b == "n/a" else [f"accepted by position % ({row['a']} / {row['b']}): {a} / {b}"]
    return said


# What every table's marks mean; a share of the gap can pass 100 %: said once, under each.
FOOTNOTE = (
    "* derived from the other two factors; – : a side lacks it (the verdict says why). X % apart: "
    "the larger figure over the smaller, minus one, whichever side is A. A factor's share of the gap "
    "is its part of the tok/s ratio in logs, so the two shares add up to 100 %: one over 100 % "
    "carries more than the whole gap because the other works against it (its share is negative)."
)


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
