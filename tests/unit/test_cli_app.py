"""The `seat` group: its table names every command where it lives, with the summary its help gives,
and `seat --help` lists them all without importing one command's module."""

import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from seatkit.cli.app import COMMANDS, seat


def first_sentence(help_text: str) -> str:
    """The summary click would show with room enough: the help's first sentence."""
    return click.Command("x", help=help_text).get_short_help_str(limit=10_000)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_entry_is_the_command_it_names_with_its_own_summary(name):
    command = seat.get_command(click.Context(seat), name)
    assert isinstance(command, click.Command) and command.name == name
    assert COMMANDS[name].summary == first_sentence(command.help or "")


def test_an_unknown_command_is_none_as_click_expects():
    assert seat.get_command(click.Context(seat), "nosuch") is None


def test_a_misspelt_command_is_answered_with_the_close_one():
    result = CliRunner().invoke(seat, ["stat"])
    assert result.exit_code == 2 and "Did you mean 'status'?" in result.output


def test_help_lists_every_command_and_imports_none_of_their_modules():
    script = (
        "import sys; from click.testing import CliRunner; from seatkit.cli.app import seat; "
        "result = CliRunner().invoke(seat, ['--help']); print(result.output); "
        "print(sorted(m for m in sys.modules if m.startswith('seatkit.cli.') and m != 'seatkit.cli.app'))"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    *help_lines, imported = done.stdout.strip().splitlines()
    assert imported == "[]"
    listed = [line.split()[0] for line in help_lines[help_lines.index("Commands:") + 1 :] if line.strip()]
    assert listed == sorted(COMMANDS)


def test_help_loads_none_of_the_heavy_libraries():
    """`seat --help` starts fast because it needs click and rich alone: not the profile model
    (pydantic), the docker SDK, NVML, numpy or matplotlib."""
    heavy = ("pydantic", "docker", "pynvml", "numpy", "matplotlib", "requests", "yaml")
    script = (
        "import sys; sys.argv = ['seat', '--help']; from seatkit.entry import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {heavy!r}))"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout.strip().splitlines()[-1] == "[]"
