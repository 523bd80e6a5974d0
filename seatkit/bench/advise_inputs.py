"""What `seat bench advise` reads: each suite of the runs given (their usable requests pooled, runs
of another seat, drafter or sampling refused) and each card figure that splits into factors, with
what was left out and why."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from seatkit import safe_yaml
from seatkit.bench import cards, sides, summary
from seatkit.errors import SeatError

# Conditions that make another seat, drafter or text: runs that differ in one are not pooled.
SEAT = (
    *("model", "draft_method", "draft_model", "sampling", "image", "runtime", "host_settings"),
    *("b12x_kernels", "engine_version"),
)
CARD_TOLERANCE = 0.01  # a card's positions sum to its tokens/step within this share (its rounding)


@dataclass
class Sample:
    """One request of a run (or a card's figure): its k, u_1..u_K, ms/step, drafted per step, and
    the tok/s the run measured (what the stream delivered)."""

    k: int
    kept: list[float]
    ms: float | None
    drafted: float | None = None
    tok_s: float | None = None


@dataclass
class Column:
    """One suite over every run given, or one card figure."""

    name: str
    source: str
    samples: list[Sample]
    adaptive: bool = False
    card: dict | None = None  # a card figure's own figures: value and relative spread per factor
    notes: list[str] = field(default_factory=list)  # what a card says of itself, and lacks


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not a number")


def _malformed(where: str, what: str) -> SeatError:
    return SeatError(
        f"{where} {what}: the advice needs each request's counters",
        "give the folder of a finished `seat bench run`, as it wrote it",
    )


def _records(folder: Path) -> list[dict]:
    where = folder / "requests.jsonl"
    try:
        text = safe_yaml.read_text(where, "the run's requests", sides.SUMMARY_BYTES)
    except FileNotFoundError:
        raise _malformed(str(where), "cannot be read (it is missing)") from None
    records = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line, parse_constant=_refuse_constant)
        except ValueError as exc:
            raise _malformed(f"{where} line {number}", f"cannot be read ({exc})") from None
        if not isinstance(record, dict) or not isinstance(record.get("suite"), str):
            raise _malformed(f"{where} line {number}", "is not a request (no suite)")
        records.append(record)
    return records


def _sample(record: dict, k: int | None) -> tuple[Sample | None, str]:
    """A request that ran alone and whole, its step and draft counters read and never falling;
    else None and why not."""
    if not record.get("exclusive"):
        return None, "shared the seat"
    if record.get("truncated"):
        return None, "cut short"
    f = record.get("factors") or {}
    steps, positions = f.get("decode_steps"), f.get("accepted_per_position") or []
    if not f.get("acceptance_unconditional") or not steps or f.get("tokens_per_step") is None:
        return None, "counters withheld"
    if steps < 0 or any(a < 0 for a in positions) or (f.get("draft_tokens") or 0) < 0:
        return None, "counters went backwards"
    drafted = f["draft_tokens"] / steps if f.get("draft_tokens") is not None else None
    # A draft longer than the k recorded is measured at the length it drafted.
    at = max(k or 0, len(positions))
    return Sample(
        at, [a / steps for a in positions], f.get("ms_per_step"), drafted, f.get("decode_tok_s")
    ), ""


def _shown(value) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{key} {_shown(v)}" for key, v in value.items()) or "none"
    return "not recorded" if value is None else str(value)


def run_columns(folders: list[Path]) -> tuple[list[Column], list[str]]:
    """Each suite over every run given, its usable requests pooled; runs that differ in seat,
    drafter or sampling refused; runs or requests left out, said."""
    columns: dict[str, Column] = {}
    seats, left = {}, []
    for folder in folders:
        data = summary.check(safe_yaml.read_json(folder / "summary.json", "bench summary"), str(folder))
        if data.get("schema") != sides.BENCH_SCHEMA:
            raise SeatError(f"{folder} is not a batch-1 bench run", "give folders of `seat bench run`")
        c = data["conditions"]
        seats[str(folder)] = {key: c.get(key) for key in SEAT} | {"model": c.get("base_model") or c["model"]}
        adaptive = "adaptive" in str(c.get("draft_policy") or "")
        dropped: Counter[str] = Counter()
        longer: Counter[int] = Counter()
        records = _records(folder)
        for record in records:
            sample, why = _sample(record, c.get("k"))
            if sample is None:
                dropped[why] += 1
                continue
            column = columns.setdefault(record["suite"], Column(record["suite"], "", []))
            column.samples.append(sample)
            if c.get("k") is not None and sample.k > c["k"]:
                longer[sample.k] += 1
            # A draft shorter or longer than k where the drafter is not ngram (the bench's alarm):
            # a policy chose its length, so its acceptance is not a fixed k's.
            column.adaptive |= adaptive or "drafted-length" in record.get("alarms", {})
        for at, n in longer.items():
            left.append(
                f"{folder}: {n} requests count {at} draft positions though run at k={c['k']}: taken as k={at}"
            )
        if dropped:
            reasons = ", ".join(f"{n} {why}" for why, n in dropped.items())
            used = len(records) - sum(dropped.values())
            left.append(f"{folder}: {used} of {len(records)} requests used ({reasons})")
    for key in SEAT:
        values = {run: _shown(seat[key]) for run, seat in seats.items()}
        if len(set(values.values())) > 1:
            raise SeatError(
                f"the runs differ in {key}: " + "; ".join(f"{r}: {v}" for r, v in values.items()),
                "advise on runs of one seat, drafter and sampling (its draft length aside)",
            )
    for column in columns.values():
        ks = sorted({s.k for s in column.samples})
        column.source = f"{len(column.samples)} requests at k = {', '.join(map(str, ks))}"
    return list(columns.values()), left


def card_columns(source: str) -> tuple[list[Column], list[str]]:
    """A card's figures that split into factors, one column each; the others named, with why."""
    name, _, pick = source.partition("#")
    card = cards.load(name)
    entries = {e.key: e for e in sides.entries(source) if "tokens_per_step" in e.values}
    columns, left = [], []
    for figure in card.figures:
        if pick and figure.id != pick:
            continue
        entry = entries.get(figure.id)
        if entry is None:
            left.append(figure.id)
            continue
        k = card.conditions_of(figure).get("k")
        kept = list(figure.acceptance_by_position or [])
        own = {name: (v, entry.spread.get(name)) for name, v in entry.values.items()}
        tokens = entry.values["tokens_per_step"]
        notes = []
        if kept and len(kept) == k:  # the model's own check: the positions sum to the card's figure
            notes.append(
                f"its positions sum to {1 + sum(kept):.3f} tokens/step at k={k}; the card says {tokens:g}"
            )
            tolerance = max(CARD_TOLERANCE, 2 * (entry.spread.get("tokens_per_step") or 0)) * tokens
            if abs(1 + sum(kept) - tokens) > tolerance:
                notes.append(
                    "they are not shares of steps (acceptance per draft?): nothing is predicted from them"
                )
                kept = []
        elif kept:
            notes.append(f"it gives {len(kept)} positions at k={k}: nothing is predicted from them")
            kept = []
        if k is None:
            notes.append(f"its k (draft length) is not given: its {tokens:g} tokens/step stands at no k")
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


def columns_of(sources: list[str]) -> tuple[list[Column], list[str]]:
    """Runs (folders with summary.json, each once) and cards (NAME, path, NAME#ID), in order."""
    runs = list(dict.fromkeys(Path(s).resolve() for s in sources if (Path(s) / "summary.json").exists()))
    columns, left = run_columns(runs) if runs else ([], [])
    for source in dict.fromkeys(sources):
        path = Path(source.partition("#")[0])
        if path.resolve() in runs:
            continue
        if path.is_dir():
            raise SeatError(
                f"{source} has no summary.json", "give finished `seat bench run` folders or cards"
            )
        if "/" in str(path) and not path.exists():
            raise SeatError(
                f"{source}: no such run folder or card file",
                "give the folder of a finished `seat bench run` (runs/...) or a card",
            )
        more, skipped = card_columns(source)
        columns += more
        left += skipped
    return columns, left
