"""The campaign's picture: ms/step of each visit per arm, and each effect with its 95 % interval.

An unknown spread is drawn as unknown (a hollow point, no bar, the words), never as a zero-width
interval; a setting without an effect is named where its point would be; a simulated campaign
says SIMULATED across the figure; an unverified or incomplete one says so in its titles.
"""

from __future__ import annotations

import statistics
import textwrap
from pathlib import Path

from seatkit.campaign import effects as fx

KIND = {"main": "main", "interaction": "interaction", "simple": "simple", "against": "vs first", "none": ""}


def draw(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from seatkit.seat import what_runs

    arms, rows, found = result["arms"], result["visits"], result["effects"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 0.5 * max(8, len(found)) + 1), layout="constrained")
    for i, arm in enumerate(arms):
        ms = [r["ms"] for r in rows if r["arm"] == arm["arm"]]
        left.scatter([i] * len(ms), ms, color="tab:blue", s=18)
        if ms:
            left.hlines(statistics.median(ms), i - 0.3, i + 0.3, color="black")
        if len(ms) == 1:
            left.annotate(
                "1 visit:\nspread\nunknown", (i, ms[0]), fontsize=7, xytext=(4, 4), textcoords="offset points"
            )
    left.margins(y=0.2)  # room for the words above a lone visit
    left.set_xticks(range(len(arms)), [a["arm"] for a in arms], rotation=30, ha="right", fontsize=8)
    left.set_ylabel("ms per step (each visit; bar: median)")
    left.set_title(what_runs.marked("ms/step per arm", result.get("unverified"), short=True))
    _effects(right, found)
    right.set_title(what_runs.marked("effect of each setting", result.get("unverified"), short=True))
    notes = [f"{k.upper()}: {result[k]}" for k in ("simulated", "incomplete") if result.get(k)]
    if notes:
        fig.suptitle("\n".join(notes), color="red", fontsize=9, fontweight="bold")
    if result.get("simulated"):
        fig.text(
            0.5, 0.5, "SIMULATED", fontsize=90, color="red", alpha=0.12, ha="center", va="center", rotation=20
        )
    fig.savefig(path, dpi=80)
    plt.close(fig)


def _effects(ax, found: list[dict]) -> None:
    """One row per effect, top to bottom as the table lists them."""
    ys = list(range(len(found)))[::-1]
    for y, e in zip(ys, found, strict=True):
        value = e["effect_pct"]
        if value is None:  # no point: the reason, from the panel's left edge
            why = textwrap.fill(e["why"], 55)
            box = {"facecolor": "white", "edgecolor": "none"}
            ax.text(0.02, y, why, transform=ax.get_yaxis_transform(), fontsize=7, va="center", bbox=box)
        elif e["claimed"] is None:  # unknown spread: the point, hollow, and the words; no bar
            ax.plot([value], [y], "o", mfc="none", color="tab:orange")
            ax.annotate(
                "spread unknown",
                (value, y),
                fontsize=7,
                color="tab:orange",
                xytext=(6, 3),
                textcoords="offset points",
            )
        else:
            ax.errorbar(
                [value],
                [y],
                xerr=[[value - e["low_pct"]], [e["high_pct"] - value]],
                fmt="o",
                capsize=4,
                color="tab:red" if e["claimed"] else "tab:blue",
            )
    ax.axvline(0, color="grey", lw=0.8)
    ends = [0.0] + [
        e[k] for e in found for k in ("effect_pct", "low_pct", "high_pct") if e.get(k) is not None
    ]
    span = (max(ends) - min(ends)) or 1.0
    ax.set_xlim(min(ends) - 0.05 * span, max(ends) + 0.3 * span)  # room for the words right of a point
    labels = [f"{fx.name(e)} [{KIND[e['kind']]}]" if KIND[e["kind"]] else fx.name(e) for e in found]
    ax.set_yticks(ys, labels, fontsize=8)
    ax.set_ylim(-0.7, len(found) - 0.3)
    ax.set_xlabel("effect on ms/step, % (95 % intervals, all together; red: beyond noise)", fontsize=8)
