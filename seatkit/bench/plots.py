"""A run's PNG plots: tok/s by prompt with spread, acceptance by position (a reference card's curve
over it when given), ms/step against drafted tokens with a fitted line, TTFT against prompt tokens
with a fitted fixed cost and marginal rate; a sweep's tok/s and ms/step against concurrency.
Every title names the model, k, content and context the figures belong to."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402


def fit(xs: list[float], ys: list[float]) -> dict | None:
    """Least-squares line y = intercept + slope x; None when x does not vary."""
    if len(xs) < 2 or len(set(xs)) < 2:
        return None
    slope, intercept = np.polyfit(xs, ys, 1)
    return {"slope": float(slope), "intercept": float(intercept), "points": len(xs)}


def fits(records: list[dict]) -> dict:
    f = [r["factors"] for r in records]
    drafted = [(x["drafted_length"], x["ms_per_step"]) for x in f
               if x.get("drafted_length") and x.get("ms_per_step")]
    # Cold requests only: a prefix-cache hit's TTFT is withheld (None), never fitted.
    cold = [(x["prompt_tokens"], x["ttft_ms"]) for x in f if x.get("ttft_ms") is not None]
    return {"ms_per_step_vs_drafted_tokens": fit(*zip(*drafted)) if drafted else None,
            "ttft_ms_vs_prompt_tokens": fit(*zip(*cold)) if cold else None}


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def title(conditions: dict, suites: dict) -> str:
    """model, k, content and context of what a plot shows."""
    def values(key: str) -> str:
        return ", ".join(dict.fromkeys(str(s.get(key) or 0) if key == "context" else str(s.get(key))
                                       for s in suites.values()))
    model = conditions.get("base_model") or conditions["model"]
    k = conditions.get("k")
    return (f"{str(model).rsplit('/', 1)[-1]}, {f'k={k}' if k else 'k unknown'}\n"
            f"content {values('content')}, context {values('context')} tokens")


def draw(records: list[dict], summary: dict, folder: Path, reference=None) -> list[Path]:
    """The run's plots; `reference` (a cards.Card) overlays its acceptance curves."""
    folder.mkdir(exist_ok=True)
    out = []
    heading = title(summary["conditions"], summary["suites"])
    names = list(dict.fromkeys(f"{r['suite']}: {r['prompt']}" for r in records))
    fig, ax = plt.subplots(figsize=(8, 0.5 * len(names) + 1.5))
    for i, name in enumerate(names):
        values = [r["factors"]["decode_tok_s"] for r in records
                  if f"{r['suite']}: {r['prompt']}" == name]
        median = float(np.median(values))
        ax.errorbar(median, i, xerr=[[median - min(values)], [max(values) - median]], fmt="o",
                    capsize=4)
    ax.set_yticks(range(len(names)), names)
    ax.set_xlabel("decode tok/s (median, min-max)")
    ax.set_title(heading, fontsize="medium")
    out.append(_save(fig, folder / "tok_s_by_prompt.png"))

    fig, ax = plt.subplots(figsize=(7, 4))
    for suite, s in summary["suites"].items():
        if s["acceptance_by_position"]:
            positions = range(1, len(s["acceptance_by_position"]) + 1)
            ax.plot(positions, [100 * p for p in s["acceptance_by_position"]], marker="o", label=suite)
    for figure in (reference.figures if reference else []):
        if figure.acceptance_by_position:
            ax.plot(range(1, len(figure.acceptance_by_position) + 1),
                    [100 * p for p in figure.acceptance_by_position], linestyle="--", marker="x",
                    label=f"{reference.name}: {figure.id}")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("draft position")
    ax.set_title(heading, fontsize="medium")
    ax.set_ylabel("accepted, % of drafted steps")
    if ax.lines:
        ax.legend(fontsize="small")
    else:  # the counters were withheld (see report.md) or absent: say so on the plot
        ax.text(0.5, 0.5, "no acceptance curve: the spec-decode counters were withheld or absent",
                ha="center", transform=ax.transAxes)
    out.append(_save(fig, folder / "acceptance_by_position.png"))

    for key, x_name, y_name, xlabel, ylabel, file in (
            ("ms_per_step_vs_drafted_tokens", "drafted_length", "ms_per_step",
             "drafted tokens per step", "ms per step", "ms_per_step_vs_drafted.png"),
            ("ttft_ms_vs_prompt_tokens", "prompt_tokens", "ttft_ms", "prompt tokens", "TTFT (ms)",
             "ttft_vs_prompt_tokens.png")):
        points = [(r["factors"].get(x_name), r["factors"].get(y_name)) for r in records]
        points = [(x, y) for x, y in points if x is not None and y is not None]
        fig, ax = plt.subplots(figsize=(7, 4))
        if points:
            ax.scatter(*zip(*points), s=14)
        line = summary["fits"].get(key)
        if line:
            xs = np.linspace(min(p[0] for p in points), max(p[0] for p in points), 20)
            ax.plot(xs, line["intercept"] + line["slope"] * xs, color="black",
                    label=f"{line['intercept']:.2f} + {line['slope']:.4f} x")
            ax.legend(fontsize="small")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_title(heading, fontsize="medium")
        out.append(_save(fig, folder / file))
    return out


def draw_sweep(summary: dict, folder: Path) -> Path:
    """Aggregate tok/s and ms/step against concurrency; tokens/step (acceptance) on a second axis."""
    folder.mkdir(exist_ok=True)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, 6.5), sharex=True)
    for name, suite in summary["suites"].items():
        rows = suite["levels"]
        levels = [r["concurrency"] for r in rows]
        top.plot(levels, [r.get("aggregate_tok_s") or np.nan for r in rows], marker="o",
                 label=f"{name}: aggregate")
        top.plot(levels, [(r["per_request_decode_tok_s"] or {}).get("median", np.nan) for r in rows],
                 marker=".", linestyle=":", label=f"{name}: per request (median)")
        bottom.plot(levels, [r.get("ms_per_step") or np.nan for r in rows], marker="o",
                    label=f"{name}: ms/step")
    right = bottom.twinx()
    for name, suite in summary["suites"].items():
        right.plot([r["concurrency"] for r in suite["levels"]],
                   [r.get("tokens_per_step") or np.nan for r in suite["levels"]], marker="s",
                   linestyle="--", color="tab:green", label=f"{name}: tokens/step")
    k = summary["conditions"].get("k")
    # On its whole scale, so a tiny change stays tiny; upward even with no point to scale it by.
    right.set_ylim(1, k + 1.2 if k else max(2.0, right.get_ylim()[1]))
    levels = sorted({r["concurrency"] for s in summary["suites"].values() for r in s["levels"]})
    bottom.set_xscale("log", base=2)
    bottom.set_xticks(levels, [str(n) for n in levels])
    bottom.minorticks_off()
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
