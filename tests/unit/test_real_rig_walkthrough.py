"""docs/real-rig.md, command by command, on the kit's simulated four-GPU host.

The commands are read out of the guide's `sh` blocks, so the test fails when a step no longer works
as written: every `seat` line must parse as the CLI has it, and the steps the simulated host can do
(look, plan, apply, reboot, status, doctor, rollback) run in the guide's order against a fake root
with GRUB and update-initramfs and a stand-in NVML of four RTX PRO 6000 GPUs. A step that needs
what the fake host lacks (the network, docker, CUDA) must sit in a section that says so.
"""

import copy
import json
import re
import shlex

import click
import pytest
from click.testing import CliRunner
from conftest import REPO
from fake_host import FakeHost

from seatkit.cli import app
from seatkit.cli.app import seat
from seatkit.doctor import diagnose
from seatkit.errors import SeatError
from seatkit.host.pcie import facts

GUIDE = REPO / "docs" / "real-rig.md"
FIXTURES = REPO / "tests" / "fixtures"
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
# Lines of the guide that are not `seat`: the test runs in a clone already made.
SHELL = {"git clone", "make install", "hf download"}


def steps() -> list[tuple[str, str]]:
    """Each command line of the guide's sh blocks, with the text of the section it sits in."""
    text = GUIDE.read_text()
    found = []
    for section in re.split(r"^## ", text, flags=re.M)[1:]:
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


def four_gpus(system) -> dict:
    """`seat host gpus` of the published rig: four RTX PRO 6000 on PCIe, P2P between every pair; the
    bus facts (ACS, IOMMU groups) read from the fake root as the real inventory reads them."""
    two = json.loads((FIXTURES / "h200x2-host-gpus.json").read_text())
    one = two["gpus"][0]
    gpus = [
        {
            **copy.deepcopy(one),
            "index": i,
            "name": "NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
            "bus_id": f"00000000:{0x17 + 0x20 * i:02x}:00.0",
            "memory_mib": 97887,
            "bar1_total_mib": 131072,
            "power_limit_w": 300.0,
            "power_default_limit_w": 600.0,
        }
        for i in range(4)
    ]
    pairs = [
        {
            "from": a,
            "to": b,
            "read": "OK",
            "write": "OK",
            "nvlink": "not supported",
            "common_ancestor": "PCIe switch",
        }
        for a in range(4)
        for b in range(4)
        if a != b
    ]
    pcie = facts([g["bus_id"] for g in gpus], system)
    return {**two, "driver": "595.58.03", "cuda": "13.2", "gpus": gpus, "p2p": pairs, "pcie": pcie}


def readings(inventory: dict) -> dict:
    """What doctor reads from NVML on that rig: idle clocks, persistence on."""
    return {
        "driver": inventory["driver"],
        "gpus": [
            {
                "index": g["index"],
                "name": g["name"],
                "pcie_gen": 5,
                "pcie_width": 16,
                "pcie_max_gen": 5,
                "pcie_max_width": 16,
                "power_limit_w": 300.0,
                "sm_clock_mhz": 180,
                "max_sm_clock_mhz": 2617,
                "clock_event_reasons": ["gpu_idle"],
                "persistence_mode": 1,
            }
            for g in inventory["gpus"]
        ],
    }


@pytest.fixture
def rig(tmp_path, monkeypatch):
    """The simulated host: every file through its root, NVML answering for four GPUs."""
    host = FakeHost(tmp_path / "root", driver="595.58.03")
    for module in (
        "seatkit.cli.host_change",
        "seatkit.cli.host_p2p",
        "seatkit.doctor.host",
        "seatkit.host.plan",
        "seatkit.host.status",
        "seatkit.host.gpus",
        "seatkit.host.pcie",
        "seatkit.campaign.plan",
    ):
        monkeypatch.setattr(f"{module}.System", lambda *a, **k: host.system)
    inventory = four_gpus(host.system)
    monkeypatch.setattr("seatkit.host.gpus.inventory", lambda system=None: inventory)
    monkeypatch.setattr(diagnose.gpu_readings, "read", lambda: readings(inventory))
    monkeypatch.setenv("SEAT_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(app.out, "width", 80)
    return host


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
    cli = CliRunner()
    phase = "fresh"  # fresh -> applied -> rebooted -> rolled back -> back
    ran = []
    for line, _ in steps():
        if line == "sudo reboot":
            rig.reboot()
            phase = {"applied": "rebooted", "rolled back": "back"}[phase]
            ran.append(line)
            continue
        if any(line.startswith(s) for s in SHELL):
            continue
        argv = words(line)
        path, _, _ = command_of(argv[1:])
        if path in NEEDS_MORE:
            continue
        done = cli.invoke(seat, argv[1:])
        # An error reaches the person through the entry point's printer: its message is what they read.
        said = done.output + (str(done.exception) if isinstance(done.exception, SeatError) else "")
        assert done.exception is None or isinstance(done.exception, SeatError | SystemExit), (line, said)
        ran.append(line)
        if path == "host gpus":
            assert done.exit_code == 0, said
            assert said.count("read OK, write OK") == 12 and "RTX" in said
        elif path == "host status":
            assert done.exit_code == 0, said
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
            assert done.exit_code == 1 and "has no models lock" in said, said
        elif path == "host plan":
            acknowledged = "--acknowledge-iommu-off" in argv
            assert done.exit_code == (0 if acknowledged else 2), said
            assert ("refused:" in said) is not acknowledged and "/etc/modprobe.d/seatkit-nvidia.conf" in said
        elif path == "host apply":
            assert done.exit_code == 0 and "applied as transaction" in said, said
            phase = "applied"
        elif path == "host rollback":
            assert done.exit_code == 0 and "rolled back" in said, said
            phase = "rolled back"
        elif path == "doctor":
            rows = {
                r["check"]: r["status"]
                for r in json.loads(cli.invoke(seat, [*argv[1:], "--json"]).output)["rows"]
            }
            assert phase == "rebooted", "the guide runs doctor after the reboot"
            for check in ("iommu", "registry_keys", "rebar", "hmm_disabled", "GPU count", "power limit"):
                assert rows[check] == "OK", (check, said)
        else:
            raise AssertionError(f"the guide runs `{line}`: add what the simulated host shows for it")
    assert phase == "back" and ran.count("sudo reboot") == 2
