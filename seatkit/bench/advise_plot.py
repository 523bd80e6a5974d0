"""The advice's figure: tokens/step and tok/s against k per suite, the measured points (with their
intervals) over the predicted curves and their bands; extrapolated lengths dashed."""

from __future__ import annotations

import math
from pathlib import Path

from seatkit.bench import figure

PANELS = (("tokens_per_step", "tokens per step"), ("decode_tok_s", "decode tok/s"))


def _values(cells: list[dict], side: str, factor: str) -> list[tuple[int, dict, str]]:
    return [(c["k"], c[side][factor], c["from"]) for c in cells if c[side] and c[side].get(factor)]


def _curve(ax, points: list[tuple[int, dict, str]], color: str, label: str) -> None:
    """The predicted line, solid where measured positions give it and dashed where extrapolated,
    with the band of its interval where known."""
    for dashed in (False, True):
        part = [p for p in points if (p[2] == "extrapolated") == dashed]
        if dashed and part:  # joined to the last interpolated point
            part = [p for p in points if p[2] != "extrapolated"][-1:] + part
        if not part:
            continue
        ks = [k for k, _, _ in part]
        ax.plot(
            ks,
            [e["value"] for _, e, _ in part],
            color=color,
            linestyle="--" if dashed else "-",
            label=None if dashed else f"{label}: predicted",
        )
        low = [e["low"] if e["low"] is not None else math.nan for _, e, _ in part]
        high = [e["high"] if e["high"] is not None else math.nan for _, e, _ in part]
        ax.fill_between(ks, low, high, color=color, alpha=0.08 if dashed else 0.18, linewidth=0)


def _points(ax, points: list[tuple[int, dict, str]], color: str, label: str) -> None:
    """Each measured point with its interval, or an 'x' where its spread is unknown; the legend
    names both kinds where both are drawn."""
    labelled = set()
    for k, e, _ in points:
        known = e["low"] is not None
        ax.errorbar(
            k,
            e["value"],
            yerr=[[e["value"] - e["low"]], [e["high"] - e["value"]]] if known else None,
            fmt="o" if known else "x",
            color=color,
            capsize=4,
            markersize=7,
            label=None
            if known in labelled
            else f"{label}: measured" + ("" if known else " (spread unknown)"),
        )
        labelled.add(known)


def draw(advice: dict, path: Path) -> Path:
    plt = figure.pyplot()
    from matplotlib.ticker import MaxNLocator

    fig, axes = plt.subplots(2, 1, figsize=(8, 7.5), sharex=True)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (name, column) in enumerate(advice["columns"].items()):
        color = colors[i % len(colors)]
        for ax, (factor, _) in zip(axes, PANELS, strict=True):
            _curve(ax, _values(column["cells"], "predicted", factor), color, name)
            _points(ax, _values(column["cells"], "measured", factor), color, name)
    for ax, (_, ylabel) in zip(axes, PANELS, strict=True):
        ax.set_ylabel(ylabel)
        ax.set_ylim(bottom=0)  # from 0: a small difference stays small
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        if ax.lines:
            ax.legend(fontsize="small")
    if not axes[1].lines:
        axes[1].text(
            0.5, 0.5, "no tok/s: the step-time slope is unknown", ha="center", transform=axes[1].transAxes
        )
    axes[1].set_xlabel("draft length k (dashed: extrapolated past the longest draft measured)")
    axes[0].set_title(
        "draft length: measured points over predicted curves (bands: intervals)", fontsize="medium"
    )
    return figure.save(fig, path)
