"""docs/real-rig.md, command by command, on the kit's simulated four-GPU host.

The commands are read out of the guide's `sh` blocks, so the test fails when a step no longer works
as written: every `seat` line must parse as the CLI has it, and the steps the simulated host can do
(look, plan, apply, reboot, status, doctor, rollback) run in the guide's order against a fake root
with GRUB and update-initramfs and a stand-in NVML of four RTX PRO 6000 GPUs. A step that needs
what the fake host lacks (the network, docker, CUDA) must sit in a section that says so.
"""

import json
import re
import shlex

import click
import pytest
import simulated_rig
from conftest import REPO

from seatkit.cli import app
from seatkit.cli.app import seat

GUIDE = REPO / "docs" / "real-rig.md"
# What the simulated host cannot do, and the phrase its section must carry.
ELSEWHERE = "Not on the simulated host"
NEEDS_MORE = {
    "overlay fetch",
    "image pin",
    "build",
    "model lock",
    "host verify-p2p",
    "up",
    "bench run",
    "bench compare",
    "down",
}
# The section that drives the simulated host by hand, with `$SIM` (tests/simulated_rig.py ROOT).
TRY = "Try it first on the simulated host"
# Lines of the guide that are not `seat`: the test runs in a clone already made.
SHELL = {"git clone", "make install", "hf download"}


def steps() -> list[tuple[str, str]]:
    """Each command line of the guide's sh blocks, with the text of the section it sits in."""
    text = GUIDE.read_text()
    found = []
    for section in re.split(r"^## ", text, flags=re.M)[1:]:
        if section.startswith(TRY):
            continue
        for block in re.findall(r"^```sh\n(.*?)^```", section, re.M | re.S):
            found += [(line.strip(), section) for line in block.splitlines() if line.strip()]
    return found


def words(line: str) -> list[str]:
    argv = shlex.split(line)
    return argv[1:] if argv[0] == "sudo" else argv


def command_of(argv: list[str]) -> tuple[str, click.Command, list[str]]:
    """The leaf command an argv (after `seat`) names, its path and its own arguments."""
    ctx = click.Context(seat, info_name="seat")
    group: click.Command = seat
    path = []
    rest = argv
    while isinstance(group, click.Group):
        name, sub, rest = group.resolve_command(ctx, rest)
        assert sub is not None, f"no command {' '.join([*path, str(name)])}"
        path.append(sub.name or "")
        ctx = click.Context(sub, info_name=sub.name, parent=ctx)
        group = sub
    return " ".join(path), group, rest


@pytest.fixture
def rig(tmp_path, monkeypatch, capsys):
    """The guide's commands, each through tests/simulated_rig.py as the page tells a user to run it:
    (exit code, what it printed) per command line, the host kept under one root between them."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(app.out, "width", 80)
    monkeypatch.setattr(app.err, "width", 80)

    def run(line: str) -> tuple[int, str]:
        code = simulated_rig.run(tmp_path / "root", shlex.split(line))
        printed = capsys.readouterr()
        return code, printed.out + printed.err

    return run


def verdicts(output: str) -> list[str]:
    return re.findall(r"^ +verdict: (.+?)\s*$", output, re.M)


def test_every_command_of_the_guide_parses_and_each_one_the_host_lacks_is_said_so():
    seen = set()
    for line, section in steps():
        if any(line.startswith(s) for s in SHELL) or line == "sudo reboot":
            continue
        argv = words(line)
        assert argv[0] == "seat", f"the guide runs {line!r}: neither seat nor a known shell step"
        path, command, rest = command_of(argv[1:])
        command.make_context(path, list(rest))  # options and arguments as the CLI has them
        seen.add(path)
        if path in NEEDS_MORE:
            assert ELSEWHERE in section, f"`{line}` needs more than the simulated host: say so there"
    # The guide's order covers the road the issue names.
    assert {"overlay fetch", "image pin", "build", "model fetch", "model lock", "host plan"} <= seen
    assert {"host status", "host verify-p2p", "up", "bench run", "bench compare", "doctor"} <= seen
    assert {"host apply", "host rollback", "down"} <= seen


def test_the_guide_runs_on_the_simulated_host_from_a_first_look_to_the_way_back(rig):
    # The page's first section drives the simulated host itself: its lines must run as written too.
    assert "tests/simulated_rig.py" in GUIDE.read_text()
    phase = "fresh"  # fresh -> applied -> rebooted -> rolled back -> back
    ran = []
    for line, _ in steps():
        if line == "sudo reboot":
            assert rig("reboot")[0] == 0
            phase = {"applied": "rebooted", "rolled back": "back"}[phase]
            ran.append(line)
            continue
        if any(line.startswith(s) for s in SHELL):
            continue
        argv = words(line)
        path, _, _ = command_of(argv[1:])
        if path in NEEDS_MORE:
            continue
        code, said = rig(line)
        assert "Traceback" not in said, (line, said)
        ran.append(line)
        if path == "host gpus":
            assert code == 0, said
            assert said.count("read OK, write OK") == 12 and "RTX" in said
        elif path == "host status":
            assert code == 0, said
            expected = {
                "fresh": lambda v: "OK" not in v[:2],  # IOMMU and the registry keys not set yet
                "applied": lambda v: v[0] == "PENDING-REBOOT" and "PENDING-RELOAD" in v,
                "rebooted": lambda v: v == ["OK"] * 4,
                "back": lambda v: v[0] == "DRIFT" and v[1] == "DRIFT",
            }[phase]
            assert expected(verdicts(said)), (phase, said)
            if phase == "applied":
                assert "reboot to take effect" in said
        elif path == "model fetch":  # the published profile ships no models lock: the guide says so
            assert code == 1 and "has no models lock" in said, said
        elif path == "host plan":
            acknowledged = "--acknowledge-iommu-off" in argv
            assert code == (0 if acknowledged else 2), said
            assert ("refused:" in said) is not acknowledged and "/etc/modprobe.d/seatkit-nvidia.conf" in said
        elif path == "host apply":
            assert code == 0 and "applied as transaction" in said, said
            phase = "applied"
        elif path == "host rollback":
            assert code == 0 and "rolled back" in said, said
            phase = "rolled back"
        elif path == "doctor":
            rows = {r["check"]: r["status"] for r in json.loads(rig(f"{line} --json")[1])["rows"]}
            assert phase == "rebooted", "the guide runs doctor after the reboot"
            for check in ("iommu", "registry_keys", "rebar", "hmm_disabled", "GPU count", "power limit"):
                assert rows[check] == "OK", (check, said)
        else:
            raise AssertionError(f"the guide runs `{line}`: add what the simulated host shows for it")
    assert phase == "back" and ran.count("sudo reboot") == 2


def test_the_try_it_first_block_runs_as_written_with_the_exit_codes_it_names(rig):
    section = next(p for p in re.split(r"^## ", GUIDE.read_text(), flags=re.M) if p.startswith(TRY))
    (block,) = re.findall(r"^```sh\n(.*?)^```", section, re.M | re.S)
    lines = block.splitlines()
    assert lines[0] == 'SIM=".venv/bin/python tests/simulated_rig.py /tmp/rig"'
    said = []
    for line in lines[1:]:
        command, _, note = line.partition("#")
        assert command.startswith("$SIM "), line
        code, printed = rig(command.removeprefix("$SIM ").strip())
        expected = int(re.match(r" exit (\d)", note).group(1)) if note else 0
        assert code == expected, (line, printed)
        said.append(printed)
    assert verdicts(said[-1]) == verdicts(said[1])  # the way back ends where it started
    assert verdicts(said[-4]) == ["OK"] * 4  # after apply and the reboot, every row OK
