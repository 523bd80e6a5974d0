"""`seat bench advise`: which draft length, predicted for every k and each suite from runs and cards."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.markup import escape
from rich.table import Table

from seatkit.bench import advise, advise_plot, advise_verdict, run
from seatkit.cli import output
from seatkit.cli.app import out

INTERVALS = (
    "tokens/step as the drafter keeps them (1 + accepted / steps; a short run delivers a little "
    "less, what max_tokens cuts from its last step; measured tok/s is what the run delivered). A value "
    "alone, or repeats all equal, has spread ?. Intervals: mean +- 2 standard deviations of "
    "the requests; ms/step between measured lengths: the step-time line's prediction interval; "
    "tok/s: the two relative spreads added in quadrature; extrapolated tokens/step: from no gain to "
    "each position more keeping as many as the last measured, and tok/s wide enough for both ends."
)


@click.command("advise")
@click.argument("sources", nargs=-1, required=True, metavar="RUN_OR_CARD...")
@click.option(
    "--max-k",
    type=click.IntRange(1, 16),
    help="Longest draft length to predict (at most a suite's longest measured + 2, extrapolated).",
)
@click.option("--out", "out_dir", default="runs", show_default=True, type=click.Path())
@output.json_option("the advice")
def bench_advise_cmd(sources: tuple[str, ...], max_k: int | None, out_dir: str, as_json: bool):
    """Which draft length: tokens/step, ms/step and tok/s for every k and each suite, from runs (runs/...) and cards.

    Tokens per step at k is 1 + the share of steps kept through each draft position up to k, where
    runs at two k agree on the positions they share; ms/step is a line against drafted tokens per
    step over every request given (one slope, each suite's intercept). Writes advice.json and advice.png into a new
    folder under --out.
    """
    advice = advise_verdict.judge(advise.advise(list(sources), max_k))
    folder = run.new_folder(Path(out_dir), "advise")
    (folder / "advice.json").write_text(json.dumps(advice, indent=2) + "\n")
    advise_plot.draw(advice, folder / "advice.png")
    output.emit(advice, as_json, lambda data: _print(data, folder))


def _cell(est: dict | None, digits: int) -> str:
    if not est:
        return "-"
    if est["value"] >= 100:
        digits = 0
    value = f"{est['value']:.{digits}f}"
    if est["low"] is None:
        return f"{value} (spread ?)"
    return f"{value} ({est['low']:.{digits}f}-{est['high']:.{digits}f})"


def _line(line: dict | None, off: dict[str, dict]) -> str:
    if line is None:
        return "step time: one drafted length (or none timed): the slope is unknown, tokens/step only past it"
    said = (
        f"step time: {line['slope']:.3f} ms per drafted token "
        f"(within each suite, over {line['points']} requests)"
    )
    if line["falls"]:
        return said + ": it falls, so it is load (a busy host), not a slope; no step time predicted"
    zero = [f"{suite} {_cell(e['decode_tok_s'], 1)}" for suite, e in off.items() if e["decode_tok_s"]]
    return said + ("; no drafting (k=0), tok/s: " + ", ".join(zero) if zero else "")


def _print(advice: dict, folder: Path) -> None:
    for name, column in advice["columns"].items():
        table = Table(
            "k", "tokens/step", "ms/step", "tok/s", "from", title=escape(f"{name}: {column['source']}")
        )
        for cell in column["cells"]:
            table.add_row(
                str(cell["k"]),
                _cell(advise.shown(cell, "tokens_per_step"), 2),
                _cell(advise.shown(cell, "ms_per_step"), 1),
                _cell(advise.shown(cell, "decode_tok_s"), 1),
                cell["from"],
            )
        output.show_table(out, table)
        notes = [column["check"]["text"], *column["notes"]]
        if column["adaptive"]:
            notes.append("an adaptive policy's acceptance is not a fixed k's: measured figures only")
        for note in notes:
            out.print(f"  {escape(note)}", highlight=False)
    out.print(_line(advice["line"], advice["no_draft"]), highlight=False)
    out.print(escape(INTERVALS), highlight=False, style="dim")
    out.print("[bold]advice[/]")
    for verdict in advice["best"].values():
        out.print(f"  {escape(verdict['text'])}", highlight=False)
    if advice["ceiling"]:
        out.print(f"  {escape(advice['ceiling']['text'])}", highlight=False)
    out.print("[bold]to make it firmer[/]")
    for step in advice["next"] or ["nothing: the best length stands apart from the others"]:
        out.print(f"  {escape(step)}", highlight=False)
    for left in advice["left_out"]:
        out.print(f"left out: {escape(left)}", highlight=False, style="dim")
    # A path on a line of its own, never split by wrapping: it is pasted, not read.
    for what, name in (("advice", "advice.json"), ("figure", "advice.png")):
        out.print(f"{what}: {escape(str(folder / name))}", soft_wrap=True, highlight=False)
