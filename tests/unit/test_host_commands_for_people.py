"""What `seat host` prints and the exit code it ends with, on the simulated four-GPU host: the rule
of the README (0 done or already so, 1 a check failed, 2 refused or bad input), and output a
person reads at 80 columns without a glossary."""

import os
import re
import subprocess
import sys

import pytest
import simulated_rig
from click.testing import CliRunner
from conftest import REPO

from seatkit.cli import app
from seatkit.cli.app import seat

ACK = "--acknowledge-iommu-off"


@pytest.fixture
def sim(tmp_path, monkeypatch, capsys):
    """A command line on one simulated host: (exit code, what it printed, stdout and stderr)."""
    monkeypatch.setattr(app.out, "width", 80)
    monkeypatch.setattr(app.err, "width", 80)

    def run(line: str) -> tuple[int, str]:
        code = simulated_rig.run(tmp_path / "root", line.split())
        printed = capsys.readouterr()
        return code, printed.out + printed.err

    return run


def wide(text: str) -> list[str]:
    """Lines over 80 columns, a diff's added or removed lines left out (printed whole, to paste)."""
    return [line for line in text.splitlines() if len(line) > 80 and not re.match(r"[+-][^+-]", line)]


def test_host_gpus_without_a_driver_is_a_failed_check(monkeypatch):
    monkeypatch.setattr("seatkit.host.gpus.inventory", lambda system=None: None)
    done = CliRunner().invoke(seat, ["host", "gpus"])
    assert done.exit_code == 1 and "no GPUs to list" in done.output


def test_host_gpus_names_a_rig_of_one_model_once_and_fits_80_columns(sim):
    code, said = sim("seat host gpus")
    assert code == 0 and not wide(said)
    assert said.count("RTX PRO 6000") == 1 and "4 x NVIDIA RTX PRO 6000 Blackwell Workstation Edition" in said


def test_apply_refused_exits_2_and_says_the_refusal_once_at_80_columns(sim):
    code, said = sim("seat host apply paper --yes")
    assert code == 2, said
    assert said.count("turning the IOMMU off needs --acknowledge-iommu-off") == 1
    assert "apply refused: 1 refusal above; nothing was changed" in said and not wide(said)


def test_apply_without_root_exits_2_and_changes_nothing(tmp_path, monkeypatch, capsys):
    with simulated_rig.simulated(tmp_path / "root", monkeypatch) as host:
        before = host.tree()
        host.system.euid = 1000
        with pytest.raises(SystemExit) as exit:
            app.main(["host", "apply", "paper", ACK, "--yes"])
        assert exit.value.code == 2 and host.tree() == before
    assert "changing the host needs root" in capsys.readouterr().err


@pytest.mark.parametrize("line", ["seat host plan nosuch", "seat host status --profile nosuch"])
def test_a_host_profile_that_does_not_exist_is_bad_input(sim, line):
    code, said = sim(line)
    assert code == 2 and "no host profile at" in said and "host profiles: conservative, paper" in said


def test_plan_says_what_the_command_line_gains_in_words_and_nothing_once_it_has_it(sim):
    code, said = sim(f"seat host plan paper {ACK}")
    assert code == 0 and "kernel command line: adds iommu=off amd_iommu=off\n" in said
    assert "replace -" not in said and not wide(said)
    assert sim(f"seat host apply paper {ACK} --yes")[0] == 0
    code, said = sim(f"seat host plan paper {ACK}")
    assert code == 0 and "nothing to do: the files already say what the profile asks" in said
    assert "adds" not in said


def test_apply_prints_each_next_command_whole_on_its_own_line(sim):
    code, said = sim(f"seat host apply paper {ACK} --yes")
    assert code == 0 and "`" not in said.split("applied as transaction")[1]
    tail = said.split("applied as transaction")[1].splitlines()[1:]
    assert tail == [
        "It takes effect at the next boot:",
        "  sudo reboot",
        "  seat host status",
        "To undo it (before or after the reboot):",
        "  sudo seat host rollback",
    ]


def test_status_shows_the_tokens_in_the_plans_order_without_trailing_blanks(sim):
    sim(f"seat host apply paper {ACK} --yes")
    code, said = sim("seat host status")
    assert code == 0 and "desired: iommu=off amd_iommu=off" in said
    assert "amd_iommu=off iommu=off" not in said
    assert [line for line in said.splitlines() if line != line.rstrip()] == []


def test_help_shows_default_paths_as_the_clone_has_them():
    for args in (["build", "--help"], ["overlay", "fetch", "--help"]):
        said = CliRunner().invoke(seat, args, terminal_width=80).output
        assert "overlay/overlay.lock" in said and str(REPO) not in said, said


def test_a_reader_that_closes_the_pipe_early_ends_it_quietly_with_0(tmp_path):
    read, write = os.pipe()
    os.close(read)  # as `| head` does once it has its lines: every write now breaks the pipe
    done = subprocess.run(
        [
            sys.executable,
            str(REPO / "tests" / "simulated_rig.py"),
            str(tmp_path / "root"),
            "seat",
            "host",
            "status",
        ],
        stdout=write,
        stderr=subprocess.PIPE,
        text=True,
    )
    os.close(write)
    assert done.returncode == 0 and done.stderr == ""


def test_rollback_names_the_transaction_apply_printed(tmp_path, monkeypatch):
    with simulated_rig.simulated(tmp_path / "root", monkeypatch):
        applied = CliRunner().invoke(seat, ["host", "apply", "paper", ACK, "--yes"])
        found = re.search(r"applied as transaction (\S+)\.", applied.output)
        assert applied.exit_code == 0 and found, applied.output
        undone = CliRunner().invoke(seat, ["host", "rollback"])
    assert undone.exit_code == 0 and f"rolled back transaction {found.group(1)};" in undone.output, (
        undone.output
    )
