"""A run's PNG plots: the factor split (tokens/step against ms/step, per suite and prompt, on tok/s
contours), tok/s by prompt with spread, acceptance by position (a reference card's curve over it when given), ms/step against drafted tokens with a fitted line, TTFT against prompt tokens
with a fitted fixed cost and marginal rate; a sweep's tok/s and ms/step against concurrency.
Every title names the model, k, content and context the figures belong to."""

from __future__ import annotations

import math
import statistics
from pathlib import Path

from seatkit.bench import factor_split, figure
from seatkit.seat import what_runs

# Below this spread of x the points stand in one vertical strip: no line to fit, no plot to draw.
MIN_SPREAD = {"drafted_length": 0.5, "prompt_tokens": 16}
# Series drawn over one another stay visible: each its own marker, size and line style, the later
# ones smaller and on top.
STYLES = [
    {"marker": "o", "markersize": 9, "linestyle": "-", "linewidth": 2.5, "fillstyle": "none"},
    {"marker": "s", "markersize": 5, "linestyle": "--", "linewidth": 1.5},
    {"marker": "^", "markersize": 4, "linestyle": ":", "linewidth": 1.2},
    {"marker": "D", "markersize": 3, "linestyle": "-.", "linewidth": 1.0},
]


def fit(xs: list[float], ys: list[float], min_spread: float = 0.0) -> dict | None:
    """Least-squares line y = intercept + slope x, with what a prediction's spread needs: the
    residuals' standard deviation (None from 2 points), x's mean and sum of squares. None when x
    does not vary (by min_spread)."""
    if len(xs) < 2 or len(set(xs)) < 2 or max(xs) - min(xs) < min_spread:
        return None
    import numpy  # a bench pays for it when it fits, an import of the kit never does

    slope, intercept = numpy.polyfit(xs, ys, 1)
    residuals = [y - intercept - slope * x for x, y in zip(xs, ys, strict=True)]
    mean = statistics.fmean(xs)
    return {
        "slope": float(slope),
        "intercept": float(intercept),
        "points": len(xs),
        "residual_sd": math.sqrt(sum(r * r for r in residuals) / (len(xs) - 2)) if len(xs) > 2 else None,
        "x_mean": mean,
        "x_sum_squares": sum((x - mean) ** 2 for x in xs),
    }


def fits(records: list[dict]) -> dict:
    f = [r["factors"] for r in records]
    drafted = [
        (x["drafted_length"], x["ms_per_step"]) for x in f if x.get("drafted_length") and x.get("ms_per_step")
    ]
    # Cold requests only: a prefix-cache hit's TTFT is withheld (None), never fitted.
    cold = [(x["prompt_tokens"], x["ttft_ms"]) for x in f if x.get("ttft_ms") is not None]
    return {  # fewer than two points: no line
        "ms_per_step_vs_drafted_tokens": fit(*_columns(drafted), MIN_SPREAD["drafted_length"]),
        "ttft_ms_vs_prompt_tokens": fit(*_columns(cold), MIN_SPREAD["prompt_tokens"]),
    }


def _columns(points: list[tuple[float, float]]) -> tuple[list[float], list[float]]:
    return [x for x, _ in points], [y for _, y in points]


def title(conditions: dict, suites: dict) -> str:
    """model, k, content and context of what a plot shows, marked as its conditions say (an
    UNVERIFIED seat's figures are never drawn without the mark)."""

    def values(key: str) -> str:
        return ", ".join(
            dict.fromkeys(
                str(s.get(key) or 0) if key == "context" else str(s.get(key)) for s in suites.values()
            )
        )

    model = conditions.get("base_model") or conditions["model"]
    k = conditions.get("k")
    context = values("context")
    head = f"{str(model).rsplit('/', 1)[-1]}, {f'k={k}' if k else 'k unknown'}"
    return (
        f"{what_runs.marked(head, what_runs.mark(conditions), short=True)}\ncontent {values('content')}, "
        + ("the prompt alone (no padding)" if context == "0" else f"context {context} tokens")
    )


# The two scatter plots with their fitted line: the fit's key, x and y factors, axis labels, the
# fit's unit, and the file.
SCATTERS = (
    (
        "ms_per_step_vs_drafted_tokens",
        "drafted_length",
        "ms_per_step",
        "drafted tokens per step",
        "ms per step",
        "drafted token",
        "ms_per_step_vs_drafted.png",
    ),
    (
        "ttft_ms_vs_prompt_tokens",
        "prompt_tokens",
        "ttft_ms",
        "prompt tokens",
        "TTFT (ms)",
        "prompt token",
        "ttft_vs_prompt_tokens.png",
    ),
)


def draw(records: list[dict], summary: dict, folder: Path, reference=None) -> list[Path]:
    """The run's plots; `reference` (a cards.Card) overlays its acceptance curves."""
    folder.mkdir(exist_ok=True)
    heading = title(summary["conditions"], summary["suites"])
    out = [
        factor_split.draw(summary, records, heading, folder / "factor_split.png"),
        _tok_s_by_prompt(records, heading, folder / "tok_s_by_prompt.png"),
        _acceptance(summary, reference, heading, folder / "acceptance_by_position.png"),
    ]
    for scatter in SCATTERS:
        drawn = _scatter(records, summary["fits"], scatter, heading, folder)
        if drawn:
            out.append(drawn)
    return out


def _tok_s_by_prompt(records: list[dict], heading: str, path: Path) -> Path:
    plt = figure.pyplot()
    names = list(dict.fromkeys(f"{r['suite']}: {r['prompt']}" for r in records))
    fig, ax = plt.subplots(figsize=(8, 0.5 * len(names) + 1.5))
    for i, name in enumerate(names):
        values = [r["factors"]["decode_tok_s"] for r in records if f"{r['suite']}: {r['prompt']}" == name]
        median = statistics.median(values)
        ax.errorbar(median, i, xerr=[[median - min(values)], [max(values) - median]], fmt="o", capsize=4)
    ax.set_yticks(range(len(names)), names)
    ax.set_xlim(left=0)  # a rate from 0: a small spread stays small
    ax.set_xlabel("decode tok/s (median, min-max)")
    ax.set_title(heading, fontsize="medium")
    return figure.save(fig, path)


def _acceptance(summary: dict, reference, heading: str, path: Path) -> Path:
    plt = figure.pyplot()
    from matplotlib.ticker import MaxNLocator

    fig, ax = plt.subplots(figsize=(7, 4))
    series = [
        (suite, s["acceptance_by_position"])
        for suite, s in summary["suites"].items()
        if s["acceptance_by_position"]
    ]
    series += [
        (f"{reference.name}: {figure.id}", figure.acceptance_by_position)
        for figure in (reference.figures if reference else [])
        if figure.acceptance_by_position
    ]
    for i, (label, rates) in enumerate(series):
        ax.plot(
            range(1, len(rates) + 1),
            [100 * p for p in rates],
            label=label,
            zorder=2 + i,
            **STYLES[i % len(STYLES)],
        )
    ax.set_ylim(0, 105)  # a rate from 0: a dip of a point or two is not a cliff
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("draft position")
    ax.set_title(heading, fontsize="medium")
    ax.set_ylabel("accepted, % of drafted steps")
    if ax.lines:
        ax.legend(fontsize="small")
    else:  # the counters were withheld (see report.md) or absent: say so on the plot
        ax.text(
            0.5,
            0.5,
            "no acceptance curve: the spec-decode counters were withheld or absent",
            ha="center",
            transform=ax.transAxes,
        )
    return figure.save(fig, path)


def _scatter(records: list[dict], fitted: dict, scatter: tuple, heading: str, folder: Path) -> Path | None:
    key, x_name, y_name, xlabel, ylabel, per, file = scatter
    points = [(r["factors"].get(x_name), r["factors"].get(y_name)) for r in records]
    points = [(x, y) for x, y in points if x is not None and y is not None]
    xs = [x for x, _ in points]
    if not points or max(xs) - min(xs) < MIN_SPREAD[x_name]:
        (folder / file).unlink(missing_ok=True)  # one vertical strip says nothing
        return None
    plt = figure.pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.scatter(*zip(*points, strict=True), s=14)
    line = fitted.get(key)
    if line:
        import numpy

        along = numpy.linspace(min(xs), max(xs), 20)
        ax.plot(
            along,
            line["intercept"] + line["slope"] * along,
            color="black",
            label=f"fit: {line['intercept']:.2f} ms + {line['slope']:.4f} ms per {per}",
        )
        ax.legend(fontsize="small")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(heading, fontsize="medium")
    return figure.save(fig, folder / file)


def draw_sweep(summary: dict, folder: Path) -> Path:
    """Aggregate tok/s and ms/step against concurrency; tokens/step (acceptance) on a second axis."""
    plt = figure.pyplot()
    folder.mkdir(exist_ok=True)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, 6.5), sharex=True)
    for name, suite in summary["suites"].items():
        rows = suite["levels"]
        levels = [r["concurrency"] for r in rows]
        top.plot(
            levels,
            [r.get("aggregate_tok_s") or math.nan for r in rows],
            marker="o",
            label=f"{name}: aggregate",
        )
        top.plot(
            levels,
            [(r["per_request_decode_tok_s"] or {}).get("median", math.nan) for r in rows],
            marker=".",
            linestyle=":",
            label=f"{name}: per request (median)",
        )
        bottom.plot(
            levels, [r.get("ms_per_step") or math.nan for r in rows], marker="o", label=f"{name}: ms/step"
        )
    right = bottom.twinx()
    for name, suite in summary["suites"].items():
        right.plot(
            [r["concurrency"] for r in suite["levels"]],
            [r.get("tokens_per_step") or math.nan for r in suite["levels"]],
            marker="s",
            linestyle="--",
            color="tab:green",
            label=f"{name}: tokens/step",
        )
    k = summary["conditions"].get("k")
    # On its whole scale, so a tiny change stays tiny; upward even with no point to scale it by.
    right.set_ylim(1, k + 1.2 if k else max(2.0, right.get_ylim()[1]))
    levels = sorted({r["concurrency"] for s in summary["suites"].values() for r in s["levels"]})
    bottom.set_xscale("log", base=2)
    bottom.set_xticks(levels, [str(n) for n in levels])
    bottom.minorticks_off()
    top.set_ylim(bottom=0)  # rates and times from 0: a small change stays small
    bottom.set_ylim(bottom=0)
    top.set_ylabel("output tok/s")
    bottom.set_ylabel("ms per step (steady window)")
    right.set_ylabel("tokens per step (acceptance)")
    bottom.set_xlabel("concurrent streams")
    top.legend(fontsize="small")
    handles = bottom.get_legend_handles_labels()
    more = right.get_legend_handles_labels()
    bottom.legend(handles[0] + more[0], handles[1] + more[1], fontsize="small")
    top.set_title(title(summary["conditions"], summary["suites"]), fontsize="medium")
    return figure.save(fig, folder / "sweep.png")
