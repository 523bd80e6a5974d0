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
    lost = [name for name in SUITES if name not in summary["suites"]]
    if lost:  # every request of it was discarded (not alone on the seat): nothing to split
        rows: list[tuple[str, ...]] = [
            (label, _cell(code.get(key), scale, digits), _cell(prose.get(key), scale, digits), "", "")
            for key, label, scale, digits in FACTORS
        ]
        return rows, (
            f"code against prose: {', '.join(lost)} kept no request (each was discarded: "
            "not alone on the seat); run the demo again with nothing else using the seat"
        )
    split = verdicts.run_split(path, summary, *SUITES)
    shares = _shares(split)
    rows = []
    for key, label, scale, digits in FACTORS:
        ratio = split["ratios"].get(key)
        share = shares.get(key)
        rows.append(
            (
                label,
                _cell(code.get(key), scale, digits),
                _cell(prose.get(key), scale, digits),
                f"{ratio:.2f}x" if ratio else "",
                _pct(share) if share is not None else "",
            )
        )
    return rows, _sentence(split)


def _pct(share: float) -> str:
    return f"{share:.0%}".replace("-0%", "0%")


def _shares(split: dict) -> dict:
    """Each factor's share of the tok/s gap; none when there is no gap beyond its spread, where a
    share would be noise over noise (thousands of percent, or a division by zero)."""
    verdict, speed = split["verdict"], split["ratios"].get("decode_tok_s")
    shares, noise = verdict.get("shares"), verdict.get("noise")
    if not shares or None in shares.values() or (noise is not None and abs(speed - 1) <= noise):
        return {}
    return shares


def _sentence(split: dict) -> str:
    verdict, ratios = split["verdict"], split["ratios"]
    if "shares" not in verdict:
        return f"code against prose: {verdict['text']}"
    speed, shares = ratios["decode_tok_s"], _shares(split)
    if not shares:
        return (
            f"code and prose decode at the same speed within noise ({speed:.2f}x): acceptance "
            f"(tokens/step {ratios['tokens_per_step']:.2f}x) and step time (ms/step "
            f"{ratios['ms_per_step']:.2f}x) cancel. ({verdict['text']})"
        )
    names = {"tokens_per_step": "acceptance", "ms_per_step": "step time"}
    lead = max(names, key=lambda f: abs(shares[f]))
    if lead not in verdict["moved"]:  # the biggest share, but of a move inside its own spread
        return (
            f"code against prose: tok/s {speed:.2f}x, but neither acceptance (tokens/step "
            f"{ratios['tokens_per_step']:.2f}x) nor step time (ms/step {ratios['ms_per_step']:.2f}x) "
            "moved beyond its own spread, so no factor is named as carrying the gap; run the demo "
            f"again on a quieter machine. ({verdict['text']})"
        )
    against = [f"; {names[f]} works against it" for f in names if shares[f] < 0]
    fast, slow = ("code", "prose") if speed >= 1 else ("prose", "code")
    pct = {f: _pct(shares[f]) for f in names}
    return (
        f"{fast} decodes {max(speed, 1 / speed):.2f}x as fast as {slow}; acceptance "
        f"(tokens/step) carries {pct['tokens_per_step']} of the gap and step time (ms/step) "
        f"{pct['ms_per_step']}{''.join(against)}: {names[lead]}, not "
        f"{names['ms_per_step' if lead == 'tokens_per_step' else 'tokens_per_step']}, carries the "
        f"difference. ({verdict['text']})"
    )
