"""`seat bench compare | parity | parity-diff`: two runs or cards side by side; greedy outputs byte for byte."""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.markup import escape
from rich.table import Table

from seatkit.bench import compare, parity, verdicts, workload
from seatkit.cli import output
from seatkit.cli.app import err, out
from seatkit.cli.bench_run import target_of
from seatkit.cli.progress import progress
from seatkit.seat import profiles


@click.command("compare")
@click.argument("a")
@click.argument("b")
@click.option("--force", is_flag=True, help="Compare even across different models.")
@click.option(
    "--format", "fmt", type=click.Choice(["table", "markdown", "json"]), default="table", show_default=True
)
def bench_compare_cmd(a: str, b: str, force: bool, fmt: str):
    """Two runs (runs/...) or reference cards (bench/references/NAME) side by side, factor by factor; NAME#ID picks one figure or suite.

    Conditions that differ come first; a comparison across models is refused unless --force.
    Code against prose is compared (the verdict says the text moved tokens/step). Against a card
    from another harness (llm_decode_bench sustained), the run's figure as that harness would
    print it is used, or the row is refused with the reason.
    """
    result = compare.compare(a, b, force)
    if fmt == "json":
        click.echo(compare.as_json(result))
    elif fmt == "markdown":
        click.echo(compare.markdown(result), nl=False)
    else:
        _print_comparison(result)
    if result.refused:
        sys.exit(2)


def _print_comparison(result: compare.Comparison) -> None:
    out.print(f"A = {escape(str(result.a))}\nB = {escape(str(result.b))}")
    out.print("[bold]conditions (A vs B)[/]")
    for key, values in result.conditions.items():  # in words: host settings, never host_settings
        name = verdicts.condition_name(key)
        differs = " [yellow](differs)[/]" if {key, name} & set(result.differing) else ""
        out.print(f"  {name}: {escape(values)}{differs}")
    out.print(
        "conditions that differ: " + (", ".join(map(verdicts.condition_name, result.differing)) or "none")
    )
    for line in compare.unverified_lines(result):
        out.print(f"[yellow]{escape(line)}[/]")
    if result.refused:
        err.print(f"[red]{escape(result.refused)}[/]")
        return
    table = Table(
        "A",
        "B",
        "tok/s A / B",
        "tokens/step A / B",
        "ms/step A / B",
        "verdict",
        title="seat bench compare",
        show_lines=True,
    )
    for row in result.rows:
        table.add_row(
            escape(row["a"]),
            escape(row["b"]),
            *map(escape, compare.cells(row)),
            escape(row["verdict"]["text"]),
        )
    output.show_table(out, table)
    for line in [*compare.under_table(result), compare.FOOTNOTE]:
        out.print(escape(line), highlight=False)


@click.command("parity")
@click.argument("profile", default=profiles.DEFAULT_PROFILE, metavar="[PROFILE]")
@click.option("--url", help="Any OpenAI-compatible server instead of a profile's seat.")
@click.option("--model", help="Served model name (with --url).")
@click.option("--api-key", envvar="SEAT_BENCH_API_KEY", help="Bearer key (with --url).")
@click.option("--max-tokens", default=256, show_default=True)
@click.option("--against", type=click.Path(exists=True), help="A parity record to compare with.")
@click.option("--out", "out_dir", default="runs", show_default=True, type=click.Path())
def bench_parity_cmd(profile, url, model, api_key, max_tokens, against, out_dir):
    """Record greedy outputs of the code and prose prompts (hashed), and compare with --against."""
    target = target_of(profile, url, model, None, api_key)
    prompts = workload.suites(["code", "prose"], max_tokens)
    with progress(err, "parity") as update:
        folder = parity.record(target, prompts, Path(out_dir), model if url else profile, progress=update)
    out.print(f"parity record: {folder / 'parity.json'}")
    if against:
        _print_parity(parity.compare(against, folder))


@click.command("parity-diff")
@click.argument("a", type=click.Path(exists=True))
@click.argument("b", type=click.Path(exists=True))
def bench_parity_diff_cmd(a: str, b: str):
    """Compare two parity records: byte-identical, or the first divergence of each prompt."""
    _print_parity(parity.compare(a, b))


def _print_parity(result: dict) -> None:
    for name, p in result["prompts"].items():  # names and texts come from files and servers
        name = escape(name)
        if p["identical"]:
            out.print(f"{name}: byte-identical")
        elif "reason" in p:
            out.print(f"{name}: not comparable: {escape(p['reason'])}")
        else:
            out.print(
                f"{name}: diverges at token {p['token_position']}, character "
                f"{p['char_position']}\n  A: {escape(repr(p['a']))}\n  B: {escape(repr(p['b']))}",
                highlight=False,
            )
    out.print("[green]all byte-identical[/]" if result["identical"] else "[red]outputs differ[/]")
    sys.exit(0 if result["identical"] else 1)
