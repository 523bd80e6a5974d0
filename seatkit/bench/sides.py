"""The sides of a comparison: a run's suites or a reference card's figures, each an Entry with its
factors, their spread and the conditions they were measured under."""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from seatkit import safe_yaml
from seatkit.bench import aggregate, cards, load, summary
from seatkit.errors import SeatError
from seatkit.seat import what_runs

FACTORS = ("decode_tok_s", "tokens_per_step", "ms_per_step")
CONDITIONS = (
    *("model", "draft", "k", "draft_policy", "temperature", "content", "prompt", "prompt_text"),
    *("prompt_token_ids", "context", "padding", "output_tokens", "device", "host_settings", "image"),
    *("b12x_kernels", "statistic", "model_lock", "engine", "prompt_format", "sampling", "output"),
    *("machine_load", "provenance"),
)
# Compared only when both sides record them (cards do not; older runs lack the newer ones).
OPTIONAL = {
    *("model_lock", "prompt_text", "prompt_token_ids", "engine", "prompt_format", "sampling"),
    *("output", "machine_load", "provenance"),
}
UNKNOWN = "unknown"
SUMMARY_BYTES = 64 * 1024 * 1024  # per-prompt figures of a long suite list
SWEEP_SCHEMA = "seatkit.bench.sweep/1"  # sweep.SCHEMA (sweep imports the bench's runner)
BENCH_SCHEMA = "seatkit.bench/2"  # run.SCHEMA; /1 summaries predate the withholding checks


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
    acceptance_by_position: list[float] = field(default_factory=list)  # shown beside the factors


def differing(x: Entry, y: Entry) -> list[str]:
    """The conditions two entries record differently (an optional one only where both record it)."""
    return [
        k
        for k in CONDITIONS
        if x.conditions.get(k) != y.conditions.get(k)
        and not (k in OPTIONAL and None in (x.conditions.get(k), y.conditions.get(k)))
    ]


def derive(values: dict[str, float]) -> list[str]:
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


def _relative_sd(values: list[float]) -> float | None:
    """The sample estimator (n - 1); None for one value, whose spread is unknown, not zero."""
    if len(values) < 2:
        return None
    mean = sum(values) / len(values)
    return (sum((v - mean) ** 2 for v in values) / (len(values) - 1)) ** 0.5 / mean


def card_entries(card: cards.Card) -> list[Entry]:
    out = []
    for figure in card.figures:
        values = {k: getattr(figure, k) for k in FACTORS if getattr(figure, k) is not None}
        if not values:
            continue
        spread = {
            k: sd for k, v in figure.repeats.items() if k in FACTORS and (sd := _relative_sd(v)) is not None
        }
        # A published min-max range spans about four standard deviations.
        spread |= {k: (hi - lo) / 4 / ((hi + lo) / 2) for k, (lo, hi) in figure.range.items() if k in FACTORS}
        derived = derive(values)
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
                acceptance_by_position=list(figure.acceptance_by_position or []),
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
        return suite_entries(folder, summary.check(data, str(path)))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise SeatError(
            f"{folder / 'summary.json'} is not a bench summary ({type(exc).__name__}: {exc})",
            "give the folder of a finished `seat bench run`",
        ) from None


def suite_entries(folder: Path, data: dict) -> list[Entry]:
    """A run's summary (checked), one entry per suite."""
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
        spread = {k: cv for k in FACTORS if s.get(k) and (cv := aggregate.repeat_cv(s, k)) is not None}
        withheld = s.get("withheld") or {}
        missing = {k: withheld.get(k, "not measured") for k in FACTORS if k not in values}
        # A factor the bench withheld stays withheld: its inputs disagreed, so no other two give it.
        derived = [] if set(withheld) & set(FACTORS) else derive(values)
        missing = {k: why for k, why in missing.items() if k not in values}
        out.append(
            Entry(
                folder.name,
                suite,
                what_runs.marked(suite, what_runs.mark(c), short=True),
                {**_suite_conditions(c, s, data.get("prompts") or {}), **_measured(s, data.get("machine"))},
                values,
                spread,
                derived,
                missing,
                matched=s.get("harness_figures") or {},
                caveat=old,
                acceptance_by_position=s.get("acceptance_by_position") or [],
            )
        )
    return out


def _hashes(names, hashes: dict, key: str) -> str | None:
    """Each of the suite's prompts by a hash of what was sent (`name=1a2b3c4d5e6f`)."""
    said = [f"{n}={hashes[n][key][:12]}" for n in names if (hashes.get(n) or {}).get(key)]
    return " ".join(said) or None


def _suite_conditions(c: dict, s: dict, hashes: dict) -> dict:
    """A suite's conditions, from the run's (c), the suite's own (s) and its prompts' hashes."""
    names = list(s.get("prompts") or {})
    return {
        "prompt_text": _hashes(names, hashes, "text_sha256"),
        "prompt_token_ids": _hashes(names, hashes, "token_ids_sha256"),
        "engine": c.get("engine_version"),
        "prompt_format": c.get("prompt_format"),
        "sampling": " ".join(f"{k}={v}" for k, v in sorted(c["sampling"].items())),
        "model": c.get("base_model") or c["model"],
        "draft": c.get("draft_model") or c.get("draft_method"),
        "k": c.get("k"),
        "draft_policy": c.get("draft_policy"),
        "temperature": c["sampling"].get("temperature"),
        "content": s["content"],
        "context": s.get("context", 0),
        # At context 0 the prompt goes alone: no padding, as the plots say, not an unknown one.
        "padding": s.get("padding") or (None if s.get("context") else "none (the prompt alone)"),
        "output_tokens": s.get("output_tokens"),
        "host_settings": c.get("host_settings"),
        "image": _image(c),
        "b12x_kernels": c.get("b12x_kernels"),
        "statistic": "median",
        "model_lock": _lock_text(c.get("model_locks")),
        "prompt": ", ".join(s.get("prompts") or {}) or None,
        "device": c.get("device"),  # the seat's own (run.seat_device), never the client's GPUs
        "provenance": _provenance(c.get("provenance")),
        "unverified": what_runs.mark(c),  # the reason behind the label's mark, said beside the table
    }


def _measured(s: dict, machine: dict | None) -> dict:
    """What the run measured about its own requests and machine, compared like a condition: output
    that looped, other processes' load (None where an older summary does not say)."""
    looped, share = s.get("looped"), (machine or {}).get("other_cpu_share")
    return {
        "output": None
        if looped is None
        else f"looped in {looped} of {s.get('requests')}"
        if looped
        else "text",
        "machine_load": None if share is None else "busy" if share >= load.BUSY_SHARE else "quiet",
    }


def _image(c: dict) -> str | None:
    """The image a run's seat ran (by digest when labelled), or the runtime that needs none."""
    labels = c.get("image_labels") or {}
    digest = labels.get("org.opencontainers.image.base.digest")
    if c.get("image"):
        return f"{c['image']}@{digest}" if digest else c["image"]
    return f"none ({c['runtime']} runtime)" if c.get("runtime") == "native" else None


def _provenance(record: dict | None) -> str | None:
    """What the seat ran, by the parts of its provenance record (serve/provenance.py) that say so,
    each hash by its first 12 digits; the knobs (where it listens, its folders) and the
    differences (the mark, said beside the table) left out. A part that holds values (the locks,
    what the shell passed) is said by a hash of them: summary.json holds them in full."""
    if not isinstance(record, dict):
        return None
    parts = {
        part: hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()
        if isinstance(value, dict)
        else value
        for part, value in sorted(record.items())
        if part not in ("knobs", "differs")
    }
    text = " ".join(f"{part}={value}" for part, value in parts.items())
    return re.sub(r"\b([0-9a-f]{12})[0-9a-f]{52}\b", r"\1", text) or None


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
