"""The `seat` group, its consoles, and the entry point that turns SeatError into a clean exit.

Each command's module is imported only when that command runs: `seat --help` reads the table of
commands below, so it never pays for the libraries behind a command it only names."""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from typing import NamedTuple

import click
from rich.console import Console
from rich.markup import escape

from seatkit import engine, paths
from seatkit.errors import SeatError
from seatkit.text import printable


class _Console(Console):
    """A console for a pipe's reader too: `seat ... | head` closing the pipe early ends quietly, 0."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing more to flush at exit
        raise SystemExit(0)


out = _Console()
err = _Console(stderr=True)


class Entry(NamedTuple):
    """Where a command lives, and the first sentence of its help (a test keeps the two equal)."""

    module: str
    attribute: str
    summary: str


COMMANDS = {
    "bench": Entry(
        "seatkit.cli.bench", "bench_group", "Decode speed split into tokens per step x milliseconds per step."
    ),
    "build": Entry(
        "seatkit.cli.image",
        "build_cmd",
        "Build the seat's image: the pinned base, the verified overlay copied over its vllm package, "
        "a smoke import of the DSpark integration, provenance labels and an overlay check at build.",
    ),
    "campaign": Entry(
        "seatkit.cli.campaign",
        "campaign_group",
        "Host arms booted once each (the normal boot never touched), seat and live arms: one answer.",
    ),
    "demo": Entry(
        "seatkit.cli.demo",
        "demo_cmd",
        "The main job on a fresh machine: set up, start, run a short bench (code and prose), stop.",
    ),
    "doctor": Entry(
        "seatkit.cli.doctor",
        "doctor_cmd",
        "Check every layer of the seat: driver and GPUs, host settings, image, models, the running "
        "server and the last bench against its reference card.",
    ),
    "down": Entry(
        "seatkit.cli.serve", "down_cmd", "Stop exactly what `seat up` started (its PID or container id)."
    ),
    "host": Entry(
        "seatkit.cli.host",
        "host_group",
        "IOMMU, P2P registry keys, Resizable BAR and HMM: status, plan, apply, rollback, recover.",
    ),
    "image": Entry(
        "seatkit.cli.image",
        "image_group",
        "The base image's digest (pin) and a built image's provenance (inspect).",
    ),
    "lint": Entry(
        "seatkit.cli.render",
        "lint_cmd",
        "Check the profile's vLLM flags and speculative config with a real vLLM parser.",
    ),
    "logs": Entry(
        "seatkit.cli.serve",
        "logs_cmd",
        "Print the server's output; with -f, follow it, as `docker logs -f` does.",
    ),
    "model": Entry(
        "seatkit.cli.models",
        "model_group",
        "Model weights pinned file by file (profiles/PROFILE.models.lock): lock, verify, fetch.",
    ),
    "overlay": Entry(
        "seatkit.cli.overlay",
        "overlay_group",
        "The overlay layered onto the base image, pinned file by file (overlay/overlay.lock).",
    ),
    "render": Entry(
        "seatkit.cli.render",
        "render_cmd",
        "Render serve/<profile>.sh for every profile, and docker-compose.yml, .env and LAUNCH_CONFIG.md "
        "for the default profile; rewrite docs/commands.md's command table from this help and the "
        "Dockerfile's build-argument defaults from the default profile and the overlay lock.",
    ),
    "setup": Entry(
        "seatkit.cli.serve",
        "setup_cmd",
        "Make a native profile's runtime venv and build its local models (idempotent).",
    ),
    "status": Entry(
        "seatkit.cli.serve",
        "status_cmd",
        "What `seat up` started for PROFILE, whether it still runs, and its /health answer.",
    ),
    "up": Entry(
        "seatkit.cli.serve",
        "up_cmd",
        "Preflight, start the seat, and wait until /health and /v1/models answer.",
    ),
}


class LazyGroup(click.Group):
    """A group that lists its commands from COMMANDS and imports one's module when it is asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = COMMANDS.get(cmd_name)
        if entry is None:
            return None
        command = getattr(importlib.import_module(entry.module), entry.attribute)
        assert isinstance(command, click.Command), f"{entry.module}.{entry.attribute} is no command"
        _defaults_relative_to_the_clone(command)
        return command

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        try:
            return super().resolve_command(ctx, args)
        except click.exceptions.NoSuchCommand as exc:  # click finds close names in self.commands, empty here
            raise click.exceptions.NoSuchCommand(exc.command_name, possibilities=COMMANDS, ctx=ctx) from None

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """As click writes the list, each summary cut to the width, from the table alone."""
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(map(len, names))
        rows = [
            (name, click.Command(name, help=COMMANDS[name].summary).get_short_help_str(limit))
            for name in names
        ]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def _defaults_relative_to_the_clone(command: click.Command) -> None:
    """--help shows a default path inside the clone as the clone has it (overlay/overlay.lock): the
    same on every machine, and short enough that it never wraps in the middle."""
    for param in command.params:
        if not isinstance(param, click.Option) or param.show_default is not True:
            continue
        if isinstance(param.default, str) and Path(param.default).is_relative_to(paths.REPO):
            param.show_default = str(Path(param.default).relative_to(paths.REPO))
    for sub in getattr(command, "commands", {}).values():
        _defaults_relative_to_the_clone(sub)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="seatkit")
def seat():
    """Reproduce one fast LLM serving seat and explain its numbers.

    PROFILE is a name from profiles/ (or a path to a YAML file). Without one, commands use the
    original seat, dsv4-flash-dspark-tp4; `seat demo` uses the CPU-only cpu-smollm2 seat
    (SmolLM2-135M).
    """


def main(argv: list[str] | None = None):
    """`seat` with argv (the command line's by default); a SeatError becomes its message and exit code."""
    try:
        seat.main(argv, prog_name="seat", standalone_mode=False)
    except (click.exceptions.Abort, KeyboardInterrupt):
        err.print("aborted")
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except SeatError as exc:
        show(exc)
    except Exception as exc:  # the docker engine refused, or went away in the middle of a call
        failure = engine.as_seat_error(exc)
        if failure is None:
            raise
        show(failure)


def show(exc: SeatError):
    # Messages can quote a server's answer: no control character reaches the terminal. Soft wrap:
    # the terminal folds a long line, so a command or path in it is never broken by a newline.
    err.print(f"[red]error:[/] {escape(printable(exc.message))}", highlight=False, soft_wrap=True)
    if exc.hint:
        err.print(f"[yellow]hint:[/] {escape(printable(exc.hint))}", highlight=False, soft_wrap=True)
    sys.exit(exc.code)
