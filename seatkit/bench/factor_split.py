"""The kit's one idea in one picture: each suite's tokens per step against its ms per step, on lines
of equal tok/s."""

from __future__ import annotations

import math
import statistics
from pathlib import Path

from seatkit.bench import figure

# Each suite's median, large, over its prompts' small dots; its min-max as error bars.
SUITE_MARK = {"markersize": 9, "capsize": 4, "zorder": 4}


def _medians(records: list[dict], suite: str) -> list[tuple[float, ...]]:
    """(ms/step, tokens/step) medians of each prompt of a suite, over its repeats."""
    by_prompt: dict[str, list[dict]] = {}
    for r in records:
        if r["suite"] == suite and r["factors"].get("ms_per_step") and r["factors"].get("tokens_per_step"):
            by_prompt.setdefault(r["prompt"], []).append(r["factors"])
    pair = ("ms_per_step", "tokens_per_step")
    return [tuple(statistics.median(f[k] for f in fs) for k in pair) for fs in by_prompt.values()]


def draw(summary: dict, records: list[dict], heading: str, path: Path) -> Path:
    """The kit's one idea in one picture: each suite's tokens per step (acceptance) against its ms
    per step (the rig), on lines of equal tok/s. Two suites on one vertical line differ by the text
    alone; on one horizontal line, by the step alone. Prompts are drawn small where a suite has more
    than one, each suite large at its median with its min-max."""
    plt = figure.pyplot()
    fig, ax = plt.subplots(figsize=(7, 5))
    suites = [
        (name, s)
        for name, s in summary["suites"].items()
        if (s.get("ms_per_step") or {}).get("median") and (s.get("tokens_per_step") or {}).get("median")
    ]
    for i, (name, s) in enumerate(suites):
        ms, tau = s["ms_per_step"], s["tokens_per_step"]
        color = f"C{i}"
        prompts = _medians(records, name)
        if len(prompts) > 1:
            ax.scatter(*zip(*prompts, strict=True), s=18, color=color, alpha=0.5, zorder=3)
        label = f"{name}: {tau['median']:.2f} tokens/step at {ms['median']:.1f} ms/step "
        label += f"({1000 * tau['median'] / ms['median']:.0f} tok/s)"
        xerr, yerr = ([[s["median"] - s["min"]], [s["max"] - s["median"]]] for s in (ms, tau))
        ax.errorbar(ms["median"], tau["median"], yerr, xerr, "o", color=color, label=label, **SUITE_MARK)
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    if suites:  # room around the points, then the contours across the whole frame
        ax.set_xlim(0, ax.get_xlim()[1] * 1.15)
        ax.set_ylim(0, max(ax.get_ylim()[1] * 1.15, 1.5))
        _tok_s_contours(ax)
        ax.legend(fontsize="small", loc="best")
    else:
        ax.text(0.5, 0.5, "no suite has both factors (see report.md)", ha="center", transform=ax.transAxes)
    ax.set_xlabel("ms per step (the rig: kernels, interconnect, host)")
    ax.set_ylabel("tokens per step (acceptance: the text, the drafter)")
    ax.set_title(heading, fontsize="medium")
    return figure.save(fig, path)


def _tok_s_contours(ax) -> None:
    """Lines of equal tok/s (tokens/step = tok/s x ms/step / 1000) at round rates (1, 2, 5 x 10^n)
    fanning around the frame's diagonal, each labelled where it leaves the frame."""
    (_, x_max), (_, y_max) = ax.get_xlim(), ax.get_ylim()
    diagonal = 1000 * y_max / x_max  # the rate of the line through the frame's far corner
    low = 10 ** math.floor(math.log10(diagonal / 8))
    rates = [m * low * 10**n for n in range(4) for m in (1, 2, 5)]
    for rate in [r for r in rates if diagonal / 8 <= r <= diagonal * 4]:
        x_end = min(x_max, 1000 * y_max / rate)
        y_end = rate * x_end / 1000
        ax.plot([0, x_end], [0, y_end], color="0.75", linewidth=0.8, zorder=1)
        on_top = x_end < x_max
        ax.annotate(
            f"{rate:g} tok/s",
            (x_end, y_end),
            fontsize="x-small",
            color="0.4",
            ha="center" if x_end < 0.9 * x_max else "right",
            va="top" if on_top else "bottom",
            xytext=(0, -2) if on_top else (-2, 2),
            textcoords="offset points",
        )
