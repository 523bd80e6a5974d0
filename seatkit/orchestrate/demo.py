"""The main job on the embedded default: set up, start, bench briefly, stop.

Whatever happens after the start, the seat is stopped before this returns, so no process is left.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

from seatkit.bench import run as bench_run, target as bench_target, workload
from seatkit.serve import launch, profile as profiles, runtime, spec as specs

SUITES = ["code", "prose"]
SHORT = bench_run.Options(warmups=1, repeats=3)
MAX_TOKENS = 256


def run(name: str, out_dir: Path, say: Callable[[str], None]) -> tuple[dict, Path]:
    """A short bench of code and prose on a seat this call starts and stops."""
    profile = profiles.load(name)
    start = time.monotonic()  # the whole of this command; the kit's own install (make) came before
    if profile.runtime == "native":
        runtime.setup(profile, say=lambda m: say(f"setup: {m}"))
    setup_s = time.monotonic() - start
    seat, waited = launch.up(specs.build(profile),
                             tick=lambda stage, t: say(f"starting {name}: waiting for {stage} ({t:.0f} s)"))
    try:
        say(f"{name} up after {waited:.1f} s at {seat.url}; benchmarking")
        out = bench_run.RunDir(out_dir, f"demo-{name}")
        summary = bench_run.bench(bench_target.of_profile(name),
                                  workload.suites(SUITES, MAX_TOKENS), SHORT, out, progress=say)
    finally:
        launch.stop(seat, grace=30)
        total = time.monotonic() - start
        say(f"{name} stopped; the demo took {total:.0f} s: setup {setup_s:.0f} s (venv and model, "
            f"reused once made), start {waited:.0f} s, bench and stop {total - setup_s - waited:.0f} s "
            "(installing the kit itself, before, is not counted)")
    return summary, out.path
