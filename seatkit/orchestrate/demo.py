"""The main job on the embedded default: set up, start, bench briefly, stop.

Whatever happens after the start, the seat is stopped before this returns, so no process is left.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from seatkit.bench import run as bench_run
from seatkit.bench import verdicts, workload
from seatkit.bench.target import Options
from seatkit.bench.verdicts import apart as verdict_apart
from seatkit.doctor import targets
from seatkit.seat import profiles
from seatkit.serve import launch, runtime
from seatkit.serve import spec as specs

# Code that restates given code against prose that copies nothing: the pair where acceptance, not
# step time, sets the speed. Sized for about two minutes warm on 2 cores (tests/benchmarks/demo_time.py).
SUITES = ["demo-code", "demo-prose"]
SHORT = Options(warmups=1, repeats=3)
MAX_TOKENS = 128
FACTORS = (
    ("decode_tok_s", "decode tok/s", 1.0, 1),
    ("tokens_per_step", "tokens/step", 1.0, 2),
    ("ms_per_step", "ms/step", 1.0, 1),
    ("draft_acceptance", "accepted %", 100.0, 1),
    ("drafted_tokens_per_step", "drafted/step", 1.0, 2),
    ("no_draft_share", "no-draft steps %", 100.0, 0),
)


def run(name: str, out_dir: Path, say: Callable[[str], None]) -> tuple[dict, Path]:
    """A short bench of code and prose on a seat this call starts and stops."""
    profile = profiles.load(name)
    start = time.monotonic()  # the whole of this command; the kit's own install (make) came before
    if isinstance(profile, profiles.NativeProfile):
        runtime.setup(profile, say=lambda m: say(f"setup: {m}"))
    setup_s = time.monotonic() - start
    seat, waited = launch.up(
        specs.build(profile), tick=lambda stage, t: say(f"starting {name}: waiting for {stage} ({t:.0f} s)")
    )
    try:
        say(f"{name} up after {waited:.1f} s at {seat.url}; benchmarking")
        out = bench_run.RunDir(out_dir, f"demo-{name}")
        summary = bench_run.bench(
            targets.of_profile(name), workload.suites(SUITES, MAX_TOKENS), SHORT, out, progress=say
        )
    finally:
        launch.stop(seat, grace=30)
        total = time.monotonic() - start
        say(
            f"{name} stopped; the demo took {total:.0f} s: setup {setup_s:.0f} s (venv and model, "
            f"reused once made), start {waited:.0f} s, bench and stop {total - setup_s - waited:.0f} s "
            "(installing the kit itself, before, is not counted)"
        )
    return summary, out.path


def _cell(stats: dict | None, scale: float, digits: int) -> str:
    if not stats:
        return "n/a"
    return f"{stats['median'] * scale:.{digits}f} ({stats['min'] * scale:.{digits}f}-{stats['max'] * scale:.{digits}f})"


def side_by_side(summary: dict, path: Path) -> tuple[list[tuple[str, ...]], str]:
    """Code and prose in columns (median, min-max), their ratio, and the sentence that says which
    factor carries the gap, split the way `seat bench compare` splits two runs."""
    code, prose = (summary["suites"].get(name, {}) for name in SUITES)
    unjudged = _unjudged(summary)  # nothing to split, or figures the loop alarm says do not stand
    split = None if unjudged else verdicts.run_split(path, summary, *SUITES)
    ratios, shares = (split["ratios"], _shares(split)) if split else ({}, {})
    rows: list[tuple[str, ...]] = [
        (
            label,
            _cell(code.get(key), scale, digits),
            _cell(prose.get(key), scale, digits),
            f"{ratios[key]:.2f}x" if ratios.get(key) else "",
            _pct(shares[key]) if key in shares else "",
        )
        for key, label, scale, digits in FACTORS
        if unjudged or key in code or key in prose  # else a figure this run did not record (an older run)
    ]
    return rows, _sentence(split) if split else f"code against prose: not judged: {unjudged}"


def _unjudged(summary: dict) -> str | None:
    """Why the suites cannot be split, in words: one kept no request (each discarded as not alone,
    or cut short), or every request of one looped; None when both stand."""
    suites = summary["suites"]
    lost = [name for name in SUITES if name not in suites]
    if lost:
        why = (
            "its streams were cut short before their last token, so none was measured"
            if summary.get("truncated") and not summary.get("discarded")
            else "each was discarded: not alone on the seat; run the demo again with nothing else using it"
        )
        return f"{', '.join(lost)} kept no request ({why})"
    looped = [name for name in SUITES if suites[name].get("looped") == suites[name].get("requests", 0) > 0]
    if looped:
        return (
            f"every {' and every '.join(looped)} request looped, repeating its own text, whose speed "
            "is not the speed of real text, so no factor is credited with the difference"
        )
    return None


def _pct(share: float) -> str:
    return f"{share:.0%}".replace("-0%", "0%")


def _shares(split: dict) -> dict:
    """Each moved factor's share of the tok/s gap; none when the verdict finds no gap beyond the
    spread, where a share would be noise over noise (thousands of percent, or a division by zero),
    and none for a factor inside its own spread, which the sentence does not credit either."""
    verdict, speed = split["verdict"], split["ratios"].get("decode_tok_s")
    shares, noise = verdict.get("shares"), verdict.get("noise")
    inside = noise is not None and speed is not None and verdict_apart(speed) <= noise
    if not shares or None in shares.values() or verdict.get("within_noise") or inside:
        return {}
    return {f: share for f, share in shares.items() if f in verdict["moved"]}  # no share for noise


NAMES = {"tokens_per_step": "acceptance", "ms_per_step": "step time"}


def _sentence(split: dict) -> str:
    """The table's judgment in words, from the same ratios, shares and spreads as the table: a
    factor is credited only where the verdict found it moved beyond its own spread, a speed gap
    only where it is beyond tok/s's."""
    verdict, ratios = split["verdict"], split["ratios"]
    if "moved" not in verdict:
        return f"code against prose: {verdict['text']}"
    speed, moved, noise = ratios["decode_tok_s"], verdict["moved"], verdict.get("noise")
    figure = {f: f"{NAMES[f]} ({f.replace('_per_', '/')} {ratios[f]:.2f}x)" for f in NAMES}
    both = f"{figure['tokens_per_step']} nor {figure['ms_per_step']}"
    if verdict.get("within_noise") and not moved:
        return (
            f"code against prose: tok/s {speed:.2f}x, inside this run's spread, and neither {both} "
            "moved beyond its own: within noise, no difference in speed can be told from this run."
        )
    fast, slow = ("code", "prose") if speed >= 1 else ("prose", "code")
    lead = f"{fast} decodes {max(speed, 1 / speed):.2f}x as fast as {slow}"
    if verdict.get("spread_unknown"):
        return (
            f"{lead}, but its spread is unknown: each suite kept one request, so no factor can be "
            "told from noise; run the demo again to keep more."
        )
    if not moved:
        return (
            f"{lead}, but neither {both} moved beyond its own spread, so no factor is named as "
            "carrying the gap; run the demo again on a quieter machine."
        )
    still = [f"{figure[f]} did not move beyond its own spread" for f in NAMES if f not in moved]
    if noise is not None and verdict_apart(speed) <= noise:  # the factors moved, tok/s did not
        how = (
            " and ".join(figure[f] for f in moved) + " moved beyond their spreads and cancel"
            if len(moved) == 2
            else f"{figure[moved[0]]} moved beyond its own spread; " + "; ".join(still)
        )
        return (
            f"code against prose: tok/s {speed:.2f}x is inside this run's tok/s spread "
            f"({noise:.0%}), so no speed difference is claimed: {how}."
        )
    shares = verdict["shares"]
    said = [
        f"{figure[f]} carries {_pct(shares[f])} of the gap"
        if shares[f] >= 0
        else f"{figure[f]} works against it ({_pct(shares[f])})"
        for f in sorted(moved, key=lambda f: -abs(shares[f]))
    ]
    carrier = max(moved, key=lambda f: shares[f])
    meaning = verdict.get("meaning")  # what the compare verdict's headline says the factor means
    return f"{lead}: {'; '.join(said + still)}; {NAMES[carrier]} carries the difference" + (
        f": {meaning}." if meaning else "."
    )
