"""What commands print: their data as JSON when asked (`--json`, as kubectl's `-o json`), else the
view people read; and tables that fit the console (as a grid when they fit, else one block of
`header: value` per row)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import TypeVar

import click
from rich.console import Console, Group, RenderableType
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

Data = TypeVar("Data")


def json_option(what: str):
    """The `--json` flag of a command that prints what."""
    return click.option("--json", "as_json", is_flag=True, help=f"Print {what} as JSON.")


def emit(data: Data, as_json: bool, view: Callable[[Data], object]) -> None:
    """The one printer: data as indented JSON, or view(data) for people."""
    if as_json:
        click.echo(json.dumps(data, indent=2))
    else:
        view(data)


def fold_paths(text: str, width: int) -> str:
    """text with each absolute path longer than width broken after a `/`, so a narrow cell folds it between
    its parts (`.../parameters/` then `uvm_disable_hmm`), never in the middle of a name."""

    def fold(word: str) -> str:
        if len(word) <= width or not word.lstrip("(`'\"").startswith("/"):  # a path, not an image name
            return word
        lines, line = [], ""
        for piece in re.findall(r"[^/]*/|[^/]+$", word):  # each part with its slash, then the name
            if line and len(line) + len(piece) > width:
                lines.append(line)
                line = ""
            line += piece
        return "\n".join([*lines, line])

    return "\n".join(" ".join(fold(w) for w in line.split(" ")) for line in text.split("\n"))


def fits(console: Console, table: Table) -> bool:
    unbounded = console.options.update_width(10_000)  # the width it wants, not what it would get
    return Measurement.get(console, unbounded, table).maximum <= console.width


def show_table(console: Console, table: Table) -> None:
    if fits(console, table):
        console.print(table)
        return
    headers = [str(c.header) for c in table.columns]
    columns = [list(c.cells) for c in table.columns]
    width = max(map(len, headers))
    blocks: list[RenderableType] = [Text(str(table.title), style="bold")] if table.title else []
    for row in zip(*columns, strict=True):
        # A grid, so that a value that wraps goes on under itself, not under the header.
        block = Table.grid(padding=(0, 1))
        block.add_column(justify="right", width=width + 1, no_wrap=True)
        block.add_column(overflow="fold")
        for header, cell in zip(headers, row, strict=True):
            block.add_row(f"{header}:", cell if isinstance(cell, Text) else Text.from_markup(str(cell)))
        blocks += [Text(""), block]
    # Line by line, trailing blanks cut: the grid pads each block to its widest value.
    for line in console.render_lines(Group(*blocks), pad=False):
        text = Text.assemble(*((s.text, s.style or "") for s in line))
        text.rstrip()
        console.print(text, soft_wrap=True)
