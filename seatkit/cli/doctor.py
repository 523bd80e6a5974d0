"""`seat doctor`: one table of every layer of a seat, each row OK, WARN or FAIL with the fix."""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Column, Table

from seatkit.cli import output
from seatkit.cli.app import out
from seatkit.cli.arguments import PROFILE
from seatkit.doctor.diagnose import diagnose
from seatkit.errors import SeatError

COLOUR = {"OK": "green", "WARN": "yellow", "FAIL": "red"}


@click.command("doctor")
@PROFILE
@click.option(
    "--host-profile",
    default="paper",
    show_default=True,
    help="Host profile from host/ the settings are judged against.",
)
@click.option(
    "--runs",
    default="runs",
    show_default=True,
    type=click.Path(),
    help="Where `seat bench` wrote its runs (the newest of PROFILE is compared with its card).",
)
@output.json_option("every row, and the NVML readings,")
def doctor_cmd(profile: str, host_profile: str, runs: str, as_json: bool):
    """Check every layer of the seat: driver and GPUs, host settings, image, models, the running
    server and the last bench against its reference card.

    Each row is OK, WARN or FAIL with its evidence and fix; a check that cannot run here says why.
    Exit 0 when no row failed (a WARN is said, not failed), 1 on a FAIL, 2 when there is no
    diagnosis at all (an unknown profile)."""
    try:
        result = diagnose(profile, host_profile, Path(runs))
    except SeatError as exc:  # bad input, not a failed check
        raise SeatError(exc.message, exc.hint, code=2) from None
    output.emit(result, as_json, _show_rows)
    sys.exit(result["exit_code"])


def _show_rows(result: dict) -> None:
    width = min(out.width, 120)  # wider, the evidence reads as one long line
    # Folded, not cut: an image tag or a path is read whole, over two lines when it must.
    table = Table(
        "layer",
        "check",
        "",
        Column("evidence / fix", overflow="fold"),
        width=width,
        show_lines=True,
        title=f"seat doctor {result['profile']}"
        + (f" (host profile {result['host_profile']})" if result["host_profile"] else ""),
    )
    # The evidence column's width: the table's, less the other columns, their padding and borders.
    room = (
        width
        - 13
        - max(len(r["layer"]) for r in result["rows"])
        - max(len(r["check"]) for r in result["rows"])
        - 4
    )
    for row in result["rows"]:
        evidence, fix = (output.fold_paths(row[k], room) for k in ("evidence", "fix"))
        text = escape(evidence) + (f"\n[dim]fix: {escape(fix)}[/]" if fix else "")
        table.add_row(row["layer"], row["check"], f"[{COLOUR[row['status']]}]{row['status']}[/]", text)
    Console(width=width, file=out.file, force_terminal=out.is_terminal).print(table)
    out.print(f"worst: {result['status']} (exit {result['exit_code']})")
