"""The command table of docs/commands.md, written from click's own help so it cannot drift from the CLI, and
the other marked regions `seat render` keeps (the Dockerfile's build-argument defaults)."""

from __future__ import annotations

from pathlib import Path

import click

from seatkit import paths, regions
from seatkit.cli.app import seat
from seatkit.image import dockerfile
from seatkit.seat import overlay_lock, profiles

# The page that holds the table, relative to the checkout.
COMMANDS = Path("docs") / "commands.md"


def _commands(group: click.Group, ctx: click.Context):
    """Every leaf command under group, with its context (for its usage line), in help order."""
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if command is None or command.hidden:
            continue
        sub = click.Context(command, info_name=name, parent=ctx)
        if isinstance(command, click.Group):
            yield from _commands(command, sub)
        else:
            yield command, sub


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _usage(command: click.Command, ctx: click.Context) -> str:
    """The command path and its arguments, as `seat CMD --help` writes them."""
    args = [p.make_metavar(ctx) for p in command.params if isinstance(p, click.Argument)]
    return " ".join([ctx.command_path, *args])


def _options(command: click.Command) -> str:
    names = [
        max(p.opts, key=len)
        for p in command.params
        if isinstance(p, click.Option) and not p.hidden and p.name != "help"
    ]
    return " Options: " + ", ".join(f"`{n}`" for n in names) + "." if names else ""


def _summary(command: click.Command) -> str:
    """The help's first paragraph: the sentence people read in `seat CMD --help`."""
    return (command.help or command.short_help or "").split("\n\n")[0]


def table(group: click.Group) -> str:
    root = click.Context(group, info_name="seat")
    rows = ["| command | what it does |", "|---|---|"]
    for command, ctx in _commands(group, root):
        rows.append(f"| `{_cell(_usage(command, ctx))}` | {_cell(_summary(command) + _options(command))} |")
    return "\n".join(rows) + "\n"


def regions_of(root: Path | None = None) -> dict[Path, str]:
    """docs/commands.md and the Dockerfile as `seat render` would write them (their marked regions
    redone). The checkout is looked up when called, not when this module is first imported."""
    root = root or paths.REPO
    commands, docker = root / COMMANDS, root / "Dockerfile"
    default = profiles.load(profiles.DEFAULT_PROFILE)
    return {
        commands: regions.replace(commands.read_text(), table(seat), str(COMMANDS)),
        docker: dockerfile.rendered(
            docker.read_text(), default, overlay_lock.load(root / "overlay" / "overlay.lock")
        ),
    }
