"""PCIe facts (ACS, IOMMU groups, ATS) read from fake sysfs trees shaped like real hosts."""

import os

from seatkit.host import pcie
from seatkit.host.system import System

NO_VIRT = lambda argv: (1, "none\n")  # noqa: E731 - systemd-detect-virt on bare metal


def config(
    vendor: int, device: int, bridge: bool, acs: int | None = None, ats: bool | None = None, size: int = 4096
) -> bytes:
    """Config space with the extended capabilities a real device of this kind carries."""
    data = bytearray(size)
    data[0:2], data[2:4] = vendor.to_bytes(2, "little"), device.to_bytes(2, "little")
    data[0x0E] = 1 if bridge else 0
    caps = [(0x0001, b"")]  # AER first, as on real bridges and GPUs
    if acs is not None:
        caps.append((pcie.EXT_ACS, (0x5F).to_bytes(2, "little") + acs.to_bytes(2, "little")))
    if ats is not None:
        caps.append((pcie.EXT_ATS, b"\x20\x00" + (0x8000 if ats else 0).to_bytes(2, "little")))
    at = 0x100
    for n, (cap_id, body) in enumerate(caps):
        nxt = at + 0x40 if n + 1 < len(caps) else 0
        if size > at:
            data[at : at + 4] = (cap_id | 1 << 16 | nxt << 20).to_bytes(4, "little")
            data[at + 4 : at + 4 + len(body)] = body
        at = nxt
    return bytes(data)


def tree(tmp_path, devices: dict[str, bytes], groups: dict[str, str] | None = None) -> System:
    """devices: sysfs path under /sys/devices -> config bytes; links in /sys/bus/pci/devices."""
    bus = tmp_path / "sys/bus/pci/devices"
    bus.mkdir(parents=True)
    for path, data in devices.items():
        real = tmp_path / "sys/devices" / path
        real.mkdir(parents=True, exist_ok=True)
        (real / "config").write_bytes(data)
        (bus / os.path.basename(path)).symlink_to(real)
    for address, group in (groups or {}).items():
        folder = tmp_path / f"sys/kernel/iommu_groups/{group}/devices"
        folder.mkdir(parents=True, exist_ok=True)
        os.symlink(tmp_path / "sys/bus/pci/devices" / address, folder / address)
        (tmp_path / "sys/bus/pci/devices" / address / "iommu_group").symlink_to(
            tmp_path / f"sys/kernel/iommu_groups/{group}"
        )
    return System(root=tmp_path, runner=NO_VIRT)


GPU = 0x10DE, 0x2335  # an H200
PLX = 0x10B5, 0x8747  # PEX 8747: one upstream port, downstream ports on bus 02
ROOT = 0x1022, 0x1483  # an EPYC root port
REQ_CMPLT = 0b0001101  # SrcValid + ReqRedir + CmpltRedir: what a stock kernel sets on switch ports


def plx(tmp_path, downstream_acs: int, groups=None) -> System:
    up = "pci0000:00/0000:00:01.0/0000:01:00.0"
    return tree(
        tmp_path,
        {
            "pci0000:00/0000:00:01.0": config(*ROOT, True, acs=REQ_CMPLT),
            up: config(*PLX, True),
            f"{up}/0000:02:08.0": config(*PLX, True, acs=downstream_acs),
            f"{up}/0000:02:10.0": config(*PLX, True, acs=downstream_acs),
            f"{up}/0000:02:08.0/0000:03:00.0": config(*GPU, False, ats=False),
            f"{up}/0000:02:10.0/0000:04:00.0": config(*GPU, False, ats=False),
        },
        groups,
    )


def test_behind_a_plx_switch_only_the_downstream_ports_count_and_redirect_is_flagged(tmp_path):
    found = pcie.facts(["00000000:03:00.0", "00000000:04:00.0"], plx(tmp_path, REQ_CMPLT))
    (pair,) = found["pairs"]
    assert [b["address"] for b in pair["bridges"]] == ["0000:02:08.0", "0000:02:10.0"]  # not the root port
    assert pair["verdict"] == "redirected"
    assert "0000:02:08.0 (ReqRedir+CmpltRedir)" in pair["why"]
    assert pair["bridges"][0]["acs"]["SrcValid"] and not pair["bridges"][0]["acs"]["UpstreamFwd"]
    assert [g["ats"] for g in found["gpus"]] == ["disabled", "disabled"]
    assert found["virtualisation"] is None and not found["vmd"]


def test_plx_with_acs_cleared_is_direct_and_shares_one_iommu_group(tmp_path):
    groups = {"0000:03:00.0": "17", "0000:04:00.0": "17"}
    found = pcie.facts(["00000000:03:00.0", "00000000:04:00.0"], plx(tmp_path, 0, groups))
    assert found["pairs"][0]["verdict"] == "direct"
    assert found["iommu"]["verdict"] == "shared" and "group 17" in found["iommu"]["why"]
    assert found["gpus"][0]["iommu_group_members"] == ["0000:03:00.0", "0000:04:00.0"]


def test_root_ports_on_two_host_bridges_cross_the_root_complex(tmp_path):
    system = tree(
        tmp_path,
        {
            "pci0000:00/0000:00:01.1": config(*ROOT, True, acs=0b0011101),  # + UpstreamFwd
            "pci0000:00/0000:00:01.1/0000:01:00.0": config(*GPU, False, ats=True),
            "pci0000:80/0000:80:01.1": config(*ROOT, True, acs=0),
            "pci0000:80/0000:80:01.1/0000:81:00.0": config(*GPU, False, ats=True),
        },
        {"0000:01:00.0": "30", "0000:81:00.0": "61"},
    )
    found = pcie.facts(["00000000:01:00.0", "00000000:81:00.0"], system)
    (pair,) = found["pairs"]
    assert [b["address"] for b in pair["bridges"]] == ["0000:00:01.1", "0000:80:01.1"]
    assert pair["verdict"] == "redirected" and "across host bridges (0000:00 and 0000:80)" in pair["why"]
    assert "0000:00:01.1 (ReqRedir+CmpltRedir)" in pair["why"] and "0000:80:01.1" not in pair["why"]
    assert found["iommu"]["verdict"] == "separate" and "30, 61" in found["iommu"]["why"]
    assert [g["ats"] for g in found["gpus"]] == ["enabled", "enabled"]


def test_a_vm_flat_bus_has_no_bridges_and_names_the_hypervisor(tmp_path):
    system = tree(
        tmp_path,
        {"pci0000:00/0000:00:06.0": config(*GPU, False), "pci0000:00/0000:00:07.0": config(*GPU, False)},
    )
    system.runner = lambda argv: (0, "kvm\n")
    found = pcie.facts(["00000000:00:06.0", "00000000:00:07.0"], system)
    assert found["virtualisation"] == "kvm"
    assert found["pairs"][0]["verdict"] == "direct" and "no bridge between them" in found["pairs"][0]["why"]
    assert found["iommu"]["verdict"] == "no groups" and "IOMMU is off" in found["iommu"]["why"]
    assert found["gpus"][0]["ats"] == "no ATS capability"


def test_without_root_acs_is_unknown_with_the_reason(tmp_path):
    up = "pci0000:00/0000:00:01.0/0000:01:00.0"
    system = tree(
        tmp_path,
        {
            "pci0000:00/0000:00:01.0": config(*ROOT, True, size=64),
            up: config(*PLX, True, size=64),
            f"{up}/0000:02:08.0": config(*PLX, True, acs=REQ_CMPLT, size=64),
            f"{up}/0000:02:10.0": config(*PLX, True, acs=REQ_CMPLT, size=64),
            f"{up}/0000:02:08.0/0000:03:00.0": config(*GPU, False, size=64),
            f"{up}/0000:02:10.0/0000:04:00.0": config(*GPU, False, size=64),
        },
    )
    pair = pcie.facts(["00000000:03:00.0", "00000000:04:00.0"], system)["pairs"][0]
    assert pair["verdict"] == "unknown" and "needs root" in pair["why"]
    assert pair["bridges"][0]["acs"] is None


def test_all_ones_config_space_is_unknown_not_a_verdict(tmp_path):
    (tmp_path / "x").mkdir()
    system = tree(
        tmp_path / "x",
        {
            "pci0000:00/0000:00:01.0": b"\xff" * 4096,
            "pci0000:00/0000:00:01.0/0000:01:00.0": config(*GPU, False),
        },
    )
    found = pcie.device(system, "0000:00:01.0")
    assert found["acs"] is None and "all ones" in found["why"]
    broken_ext = bytearray(config(*ROOT, True, acs=REQ_CMPLT))
    broken_ext[0x100:] = b"\xff" * (4096 - 0x100)
    (tmp_path / "x/sys/devices/pci0000:00/0000:00:01.0/config").write_bytes(bytes(broken_ext))
    assert "extended config space reads as all ones" in pcie.device(system, "0000:00:01.0")["why"]


def test_a_looping_capability_list_ends(tmp_path):
    data = bytearray(4096)
    data[0x100:0x104] = (0x0001 | 1 << 16 | 0x100 << 20).to_bytes(4, "little")  # next points at itself
    assert pcie.extended_caps(bytes(data)) == {0x0001: 0x100}


def test_a_vmd_domain_is_followed_through_and_reported(tmp_path):
    vmd = "pci0000:00/0000:00:0e.0/pci10000:00/10000:00:01.0"
    system = tree(
        tmp_path,
        {
            "pci0000:00/0000:00:0e.0": config(0x8086, 0x28C0, False),
            f"{vmd}": config(0x8086, 0x352A, True, acs=0),
            f"{vmd}/10000:01:00.0": config(*GPU, False),
        },
    )
    found = pcie.facts(["10000:01:00.0"], system)
    assert found["vmd"] and found["gpus"][0]["address"] == "10000:01:00.0"
    assert found["gpus"][0]["bridges"] == ["10000:00:01.0"] and found["gpus"][0]["root_bus"] == "10000:00"


def test_a_gpu_missing_from_sysfs_makes_its_pairs_unknown(tmp_path):
    found = pcie.facts(
        ["00000000:03:00.0", "00000000:04:00.0"],
        tree(tmp_path, {"pci0000:00/0000:00:06.0": config(*GPU, False)}),
    )
    assert (
        found["pairs"][0]["verdict"] == "unknown" and "no readable sysfs device" in found["pairs"][0]["why"]
    )
    assert pcie.facts([], System(root=tmp_path, runner=NO_VIRT))["iommu"]["verdict"] == "no GPUs"


def test_doctor_rows_flag_redirect_unknown_and_one_gpu(tmp_path):
    from seatkit.doctor import host

    found = pcie.facts(["00000000:03:00.0", "00000000:04:00.0"], plx(tmp_path, REQ_CMPLT))
    acs, groups = host.pcie_rows(found)
    assert acs.status == "WARN" and "1 of 1 pairs redirected" in acs.evidence and "setpci" in acs.fix
    assert groups.check == "IOMMU groups" and groups.evidence.startswith("no groups")
    found["pairs"][0].update(verdict="unknown", why="ACS not readable (needs root)")
    assert host.pcie_rows(found)[0].evidence.startswith("cannot check: GPU0-GPU1: ACS not readable")
    found["pairs"][0].update(verdict="direct", why="through 2 bridge(s); no bridge on the path redirects")
    assert host.pcie_rows(found)[0].status == "OK"
    found["pairs"] = []
    assert host.pcie_rows(found)[0].evidence == "one GPU: no peer path to check"
    (none,) = host.pcie_rows(None)
    assert none.status == "WARN" and "no NVIDIA driver" in none.evidence


def test_status_and_doctor_carry_the_pcie_facts(tmp_path, monkeypatch):
    from seatkit.doctor import host
    from seatkit.host import gpus, status
    from seatkit.seat import host_profiles, profiles

    system = plx(tmp_path, REQ_CMPLT)
    (tmp_path / "proc/sys/kernel/random").mkdir(parents=True)
    (tmp_path / "proc/sys/kernel/random/boot_id").write_text("b\n")
    found = pcie.facts(["00000000:03:00.0", "00000000:04:00.0"], system)
    monkeypatch.setattr(gpus, "inventory", lambda system=None: {"driver": None, "gpus": [], "pcie": found})
    result = status.status(host_profiles.load("paper"), system)
    assert result["pcie"]["pairs"][0]["verdict"] == "redirected"
    checks = [r.check for r in host.rows(result, profiles.load("dsv4-flash-dspark-tp4"))]
    assert checks[-4:] == ["PCIe ACS", "IOMMU groups", "step probe", "verify-p2p"]


def test_seat_host_gpus_shows_the_pcie_facts(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from seatkit.cli.app import seat
    from seatkit.host import gpus

    found = pcie.facts(["00000000:03:00.0", "00000000:04:00.0"], plx(tmp_path, REQ_CMPLT))
    inventory = {"driver": "580", "cuda": "13.0", "gpus": [], "p2p": [], "p2p_note": None, "pcie": found}
    monkeypatch.setattr(gpus, "inventory", lambda system=None: inventory)
    shown = CliRunner().invoke(seat, ["host", "gpus"], terminal_width=80)
    assert shown.exit_code == 0, shown.output
    assert "GPU0 <-> GPU1: ACS redirected" in shown.output and "IOMMU groups no groups" in shown.output
    assert "GPU0 0000:03:00.0: group -, ATS disabled" in shown.output
    as_json = CliRunner().invoke(seat, ["host", "gpus", "--json"])
    assert '"verdict": "redirected"' in as_json.output


def test_the_real_one_h200_vm_read_from_its_sysfs_dump(tmp_path):
    """tests/fixtures/h200-sysfs-pci.json: every PCI function's path and config space, as the one-GPU
    H200 machine (a Firecracker VM, no systemd-detect-virt, no IOMMU groups) showed them."""
    import json
    from pathlib import Path

    dump = json.loads((Path(__file__).parent.parent / "fixtures/h200-sysfs-pci.json").read_text())
    devices = {
        v["path"].removeprefix("/sys/devices/"): bytes.fromhex(v["config"])
        for k, v in dump.items()
        if not k.startswith("_")
    }
    system = tree(tmp_path, devices)
    (tmp_path / "sys/kernel/iommu_groups").mkdir(parents=True)
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/cpuinfo").write_text("flags\t\t: fpu sse2 hypervisor avx512f\n")
    system.runner = lambda argv: (127, "systemd-detect-virt: not found")
    system.euid = 0  # the dump was read as root: 4096 bytes where there are more than 256
    found = pcie.facts(["00000000:00:06.0"], system)
    (gpu,) = found["gpus"]
    assert gpu["root_bus"] == "0000:00" and gpu["bridges"] == [] and gpu["config_why"] is None
    assert gpu["ats"] == "no ATS capability" and found["pairs"] == []
    assert found["virtualisation"] == "a hypervisor (cpuinfo flag)"
    assert found["iommu"]["verdict"] == "no groups" and "IOMMU is off" in found["iommu"]["why"]
    assert pcie.device(system, "0000:00:06.0")["vendor"] == "10de"
    virtio = pcie.device(system, "0000:00:03.0")  # 256 bytes, read by root: it has no more
    assert virtio["acs"] == "no ACS capability" and "conventional PCI" in virtio["why"]


def test_odd_bus_ids_and_a_half_readable_path(tmp_path):
    assert pcie.sysfs_address("unavailable (Not Supported)") == "unavailable (not supported)"
    assert pcie.sysfs_address("00010000:01:00.0") == "10000:01:00.0"
    up = "pci0000:00/0000:00:01.0/0000:01:00.0"
    system = tree(
        tmp_path,
        {
            "pci0000:00/0000:00:01.0": config(*ROOT, True),
            up: config(*PLX, True),
            f"{up}/0000:02:08.0": config(*PLX, True, acs=0),
            f"{up}/0000:02:10.0": config(*PLX, True, acs=0, size=64),  # this one shows only 64 bytes
            f"{up}/0000:02:08.0/0000:03:00.0": config(*GPU, False),
            f"{up}/0000:02:10.0/0000:04:00.0": config(*GPU, False),
        },
    )
    pair = pcie.facts(["00000000:03:00.0", "00000000:04:00.0"], system)["pairs"][0]
    assert pair["verdict"] == "unknown" and "not readable at 0000:02:10.0 (only the first 64" in pair["why"]


def test_a_config_space_cut_short_inside_its_capability_list_is_unknown_not_no_acs(tmp_path):
    cut = config(*ROOT, True, acs=REQ_CMPLT)[:300]  # ACS at 0x140, past the end of what was read
    system = tree(
        tmp_path,
        {
            "pci0000:00/0000:00:01.0": cut,
            "pci0000:00/0000:00:01.0/0000:01:00.0": config(*GPU, False),
            "pci0000:00/0000:00:02.0": config(*ROOT, True, acs=0),
            "pci0000:00/0000:00:02.0/0000:02:00.0": config(*GPU, False),
        },
    )
    found = pcie.device(system, "0000:00:01.0")
    assert found["acs"] is None and "ends at byte 300" in found["why"]
    pair = pcie.facts(["00000000:01:00.0", "00000000:02:00.0"], system)["pairs"][0]
    assert pair["verdict"] == "unknown"


def test_a_gpu_in_no_group_beside_grouped_ones_is_not_all_share(tmp_path):
    groups = {"0000:03:00.0": "17", "0000:04:00.0": "17"}
    system = plx(tmp_path, 0, groups)
    (tmp_path / "sys/devices/pci0000:00/0000:00:01.0/0000:02:0c.0/0000:05:00.0").mkdir(parents=True)
    extra = tmp_path / "sys/devices/pci0000:00/0000:00:01.0/0000:02:0c.0"
    (extra / "config").write_bytes(config(*PLX, True, acs=0))
    (extra / "0000:05:00.0/config").write_bytes(config(*GPU, False))
    (tmp_path / "sys/bus/pci/devices/0000:05:00.0").symlink_to(extra / "0000:05:00.0")
    found = pcie.facts(["00000000:03:00.0", "00000000:04:00.0", "00000000:05:00.0"], system)
    assert found["iommu"]["verdict"] == "partial" and "GPU2 is in no IOMMU group" in found["iommu"]["why"]


def test_a_device_path_with_no_root_bus_is_unknown_not_a_flat_bus(tmp_path):
    bus = tmp_path / "sys/bus/pci/devices"
    for address in ("0000:03:00.0", "0000:04:00.0"):  # plain folders, no link to a host bridge's tree
        (bus / address).mkdir(parents=True)
        (bus / address / "config").write_bytes(config(*GPU, False))
    found = pcie.facts(["00000000:03:00.0", "00000000:04:00.0"], System(root=tmp_path, runner=NO_VIRT))
    assert found["pairs"][0]["verdict"] == "unknown" and "names no PCI root bus" in found["pairs"][0]["why"]


def test_a_bridge_with_only_egress_control_is_blocked_not_direct(tmp_path):
    from seatkit.doctor import host

    egress_only = 0b0100000  # EgressCtrl alone: requests to the ports in its vector are blocked
    found = pcie.facts(["00000000:03:00.0", "00000000:04:00.0"], plx(tmp_path, egress_only))
    (pair,) = found["pairs"]
    assert pair["verdict"] == "blocked" and "egress control at 0000:02:08.0" in pair["why"]
    acs = host.pcie_rows(found)[0]
    assert acs.status == "WARN" and "EgressCtrl" in acs.fix


def test_odd_iommu_group_names_are_shown_as_written_not_read_as_markup(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from seatkit.cli.app import seat
    from seatkit.host import gpus

    groups = {"0000:03:00.0": "[red]", "0000:04:00.0": "[bold]x"}  # a fake tree's names, not digits
    found = pcie.facts(["00000000:03:00.0", "00000000:04:00.0"], plx(tmp_path, 0, groups))
    inventory = {"driver": "580", "cuda": "13.0", "gpus": [], "p2p": [], "p2p_note": None, "pcie": found}
    monkeypatch.setattr(gpus, "inventory", lambda system=None: inventory)
    shown = CliRunner().invoke(seat, ["host", "gpus"])
    assert shown.exit_code == 0, shown.exception
    text = " ".join(shown.output.split())  # lines wrap at 80 columns
    assert "IOMMU groups [red], [bold]x" in text and "group [bold]x," in text


def test_doctor_asks_for_root_only_where_root_would_see_more(tmp_path):
    from seatkit.doctor import host

    found = pcie.facts(
        ["00000000:03:00.0", "00000000:04:00.0"],
        tree(tmp_path, {"pci0000:00/0000:00:06.0": config(*GPU, False)}),
    )
    (acs,) = [r for r in host.pcie_rows(found) if r.check == "PCIe ACS"]
    assert "no readable sysfs device" in acs.evidence and "as root" not in acs.fix
    found["pairs"][0]["why"] = (
        "ACS not readable at 0000:00:01.0 (only the first 256 bytes are readable "
        "(extended config space needs root))"
    )
    assert "as root" in host.pcie_rows(found)[0].fix


def test_doctor_warns_when_a_gpu_sits_outside_the_iommu_the_others_are_behind():
    from seatkit.doctor import host

    found = {
        "pairs": [],
        "virtualisation": None,
        "iommu": {"verdict": "partial", "why": "GPU2 is in no IOMMU group while others are"},
    }
    (_, groups) = host.pcie_rows(found)
    assert groups.status == "WARN" and "GPU2" in groups.evidence and "iommu_group" in groups.fix


def test_root_reading_256_bytes_is_a_conventional_bridge_not_a_call_to_run_as_root(tmp_path):
    from seatkit.doctor import host

    system = tree(
        tmp_path,
        {
            "pci0000:00/0000:00:01.0": config(*ROOT, True, size=256),  # QEMU's pci-bridges
            "pci0000:00/0000:00:01.0/0000:01:00.0": config(*GPU, False),
            "pci0000:00/0000:00:02.0": config(*ROOT, True, size=256),
            "pci0000:00/0000:00:02.0/0000:02:00.0": config(*GPU, False),
        },
    )
    system.euid = 0
    found = pcie.facts(["00000000:01:00.0", "00000000:02:00.0"], system)
    assert found["pairs"][0]["verdict"] == "direct" and "through 2 bridge(s)" in found["pairs"][0]["why"]
    assert "as root" not in (host.pcie_rows(found)[0].fix or "")
    system.euid = 1000
    pair = pcie.facts(["00000000:01:00.0", "00000000:02:00.0"], system)["pairs"][0]
    assert pair["verdict"] == "unknown" and "only the first 256 bytes" in pair["why"]
