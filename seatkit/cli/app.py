"""The `seat` group, its consoles, and the entry point that turns SeatError into a clean exit."""

from __future__ import annotations

import sys

import click
from rich.console import Console
from rich.markup import escape

from seatkit import engine
from seatkit.errors import SeatError
from seatkit.seat import profiles
from seatkit.text import printable

out = Console()
err = Console(stderr=True)
PROFILE = click.argument("profile", default=profiles.DEFAULT_PROFILE, metavar="[PROFILE]")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="seatkit")
def seat():
    """Reproduce one fast LLM serving seat and explain its numbers.

    PROFILE is a name from profiles/ (or a path to a YAML file). Without one, commands use the
    original seat, dsv4-flash-dspark-tp4; `seat demo` uses the CPU-only cpu-smollm2 seat
    (SmolLM2-135M).
    """


def main():
    try:
        seat(standalone_mode=False)
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
