"""The kit's simulated four-GPU host, to try the host commands on before the real rig.

    .venv/bin/python tests/simulated_rig.py ROOT seat host plan paper
    .venv/bin/python tests/simulated_rig.py ROOT sudo seat host apply paper --acknowledge-iommu-off --yes
    .venv/bin/python tests/simulated_rig.py ROOT reboot

ROOT is a folder that stands for the machine's `/`: made on first use (Ubuntu with GRUB and
update-initramfs, the NVIDIA driver 595.58.03, as the published rig) and kept between calls, so
plan, apply, reboot, status and rollback follow one another as on the real host. `seat` runs in
this process, as root, with every host file read and written under ROOT and a stand-in NVML that
shows four RTX PRO 6000 GPUs; `reboot` makes what the boot files configure live. A leading `sudo`
is dropped. docs/real-rig.md walks it; tests/unit/test_real_rig_walkthrough.py runs that page
through this same entry point.
"""

from __future__ import annotations

import contextlib
import copy
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "unit"))  # fake_host, as the unit tests have it

from fake_host import FakeHost  # noqa: E402

from seatkit.cli import app  # noqa: E402
from seatkit.doctor import diagnose  # noqa: E402
from seatkit.host.pcie import facts  # noqa: E402

FIXTURES = Path(__file__).resolve().parent / "fixtures"
DRIVER = "595.58.03"
# Every module that opens the host through System(): each reads and writes under the fake root.
READS_THE_HOST = (
    "seatkit.cli.host_change",
    "seatkit.cli.host_p2p",
    "seatkit.doctor.host",
    "seatkit.host.plan",
    "seatkit.host.status",
    "seatkit.host.gpus",
    "seatkit.host.pcie",
    "seatkit.campaign.plan",
)


def four_gpus(system) -> dict:
    """`seat host gpus` of the published rig: four RTX PRO 6000 behind a PCIe switch, P2P between
    every pair; the bus facts (ACS, IOMMU groups) read from the fake root as the real inventory
    reads them (the fake root has no sysfs devices, so they read unknown)."""
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
            "topology": {"bridges_above": 3, "class": "behind a PCIe switch"},
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
    return {**two, "driver": DRIVER, "cuda": "13.2", "gpus": gpus, "p2p": pairs, "pcie": pcie}


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


def host_at(root: Path) -> FakeHost:
    """The simulated host whose `/` is root: made on first use, reopened as it was left after."""
    return FakeHost.reopen(root) if (root / "etc").is_dir() else FakeHost(root, driver=DRIVER)


@contextlib.contextmanager
def simulated(root: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHost]:
    """Within it, `seat` sees the simulated host: every host file under root, NVML its four GPUs."""
    host = host_at(root)
    for module in READS_THE_HOST:
        monkeypatch.setattr(f"{module}.System", lambda *a, **k: host.system)
    inventory = four_gpus(host.system)
    monkeypatch.setattr("seatkit.host.gpus.inventory", lambda system=None: inventory)
    monkeypatch.setattr(diagnose.gpu_readings, "read", lambda: readings(inventory))
    monkeypatch.setenv("SEAT_HOME", str(root / "seat-home"))  # the kit's own state, beside the host's
    yield host


def run(root: Path, argv: list[str]) -> int:
    """One command line on the simulated host (`seat ...` or `reboot`, `sudo` dropped): its exit code."""
    argv = argv[1:] if argv[:1] == ["sudo"] else argv
    with pytest.MonkeyPatch.context() as monkeypatch, simulated(root, monkeypatch) as host:
        if argv == ["reboot"]:
            host.reboot()
            print("rebooted the simulated host: what its boot files configure is live now")
            return 0
        if argv[:1] != ["seat"]:
            print("usage: tests/simulated_rig.py ROOT (seat ARGS... | reboot)", file=sys.stderr)
            return 2
        try:
            app.main(argv[1:])
        except SystemExit as exit:
            return 0 if exit.code is None else exit.code if isinstance(exit.code, int) else 1
        return 0


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit("usage: tests/simulated_rig.py ROOT (seat ARGS... | reboot)")
    sys.exit(run(Path(sys.argv[1]).resolve(), sys.argv[2:]))
