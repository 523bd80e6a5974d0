"""A run's PNG plots: the factor split (tokens/step against ms/step, per suite and prompt, on tok/s
contours), tok/s by prompt with spread, acceptance by position (a reference card's curve over it when given), ms/step against drafted tokens with a fitted line, TTFT against prompt tokens
with a fitted fixed cost and marginal rate; a sweep's tok/s and ms/step against concurrency.
Every title names the model, k, content and context the figures belong to."""

from __future__ import annotations

import math
import statistics
from pathlib import Path

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


def _pyplot():
    """matplotlib, imported only when a plot is drawn (`seat --help` never pays for it)."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    return plt


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
    return {
        "ms_per_step_vs_drafted_tokens": (
            fit([x for x, _ in drafted], [y for _, y in drafted], MIN_SPREAD["drafted_length"])
            if drafted
            else None
        ),
        "ttft_ms_vs_prompt_tokens": (
            fit([x for x, _ in cold], [y for _, y in cold], MIN_SPREAD["prompt_tokens"]) if cold else None
        ),
    }


def _save(fig, path: Path) -> Path:
    plt = _pyplot()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


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
    return f"{what_runs.marked(head, conditions, short=True)}\ncontent {values('content')}, " + (
        "the prompt alone (no padding)" if context == "0" else f"context {context} tokens"
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
        factor_split(summary, records, heading, folder / "factor_split.png"),
        _tok_s_by_prompt(records, heading, folder / "tok_s_by_prompt.png"),
        _acceptance(summary, reference, heading, folder / "acceptance_by_position.png"),
    ]
    for scatter in SCATTERS:
        drawn = _scatter(records, summary["fits"], scatter, heading, folder)
        if drawn:
            out.append(drawn)
    return out


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


def factor_split(summary: dict, records: list[dict], heading: str, path: Path) -> Path:
    """The kit's one idea in one picture: each suite's tokens per step (acceptance) against its ms
    per step (the rig), on lines of equal tok/s. Two suites on one vertical line differ by the text
    alone; on one horizontal line, by the step alone. Prompts are drawn small where a suite has more
    than one, each suite large at its median with its min-max."""
    plt = _pyplot()
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
    return _save(fig, path)


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


def _tok_s_by_prompt(records: list[dict], heading: str, path: Path) -> Path:
    plt = _pyplot()
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
    return _save(fig, path)


def _acceptance(summary: dict, reference, heading: str, path: Path) -> Path:
    plt = _pyplot()
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
    return _save(fig, path)


def _scatter(records: list[dict], fitted: dict, scatter: tuple, heading: str, folder: Path) -> Path | None:
    key, x_name, y_name, xlabel, ylabel, per, file = scatter
    points = [(r["factors"].get(x_name), r["factors"].get(y_name)) for r in records]
    points = [(x, y) for x, y in points if x is not None and y is not None]
    xs = [x for x, _ in points]
    if not points or max(xs) - min(xs) < MIN_SPREAD[x_name]:
        (folder / file).unlink(missing_ok=True)  # one vertical strip says nothing
        return None
    plt = _pyplot()
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
    return _save(fig, folder / file)


def draw_sweep(summary: dict, folder: Path) -> Path:
    """Aggregate tok/s and ms/step against concurrency; tokens/step (acceptance) on a second axis."""
    plt = _pyplot()
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
    return _save(fig, folder / "sweep.png")
