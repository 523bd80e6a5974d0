"""`seat host status` and `seat host gpus` on fake roots (every file through the root prefix)."""

import json
from pathlib import Path

import pytest
from fake_host import KVER, MACHINE, FakeHost

from seatkit.host import gpus, state, status
from seatkit.host.system import System
from seatkit.seat import host_profiles

FIXTURES = Path(__file__).parent.parent / "fixtures"
FIVE = "ForceP2P=0x11;RMForceP2PType=1;RMPcieP2PType=2;GrdmaPciTopoCheckOverride=1;EnableResizableBar=1"


def write(root, path, text):
    target = root / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)


def fake_host(
    root,
    *,
    vendor="AuthenticAMD",
    boot="grub",
    configured="iommu=off amd_iommu=off",
    live="iommu=off amd_iommu=off",
    dwords=FIVE,
    live_dwords=FIVE,
    hmm="Y",
    driver="595.58.03",
    iommu_units=(),
):
    """A host tree: cpuinfo, a boot configuration of one stack, modprobe.d, /proc and /sys."""
    write(root, "/proc/cpuinfo", f"processor\t: 0\nvendor_id\t: {vendor}\n")
    write(root, "/proc/sys/kernel/random/boot_id", "11111111-2222-3333-4444-555555555555\n")
    write(root, "/proc/cmdline", f"BOOT_IMAGE=/vmlinuz root=/dev/nvme0n1p2 ro quiet {live}\n")
    if boot == "grub":
        write(
            root,
            "/boot/grub/grub.cfg",
            "menuentry 'Ubuntu' {\n"
            f"\tlinux\t/boot/vmlinuz-6.8.0 root=UUID=abc ro quiet splash {configured}\n}}\n"
            "menuentry 'Ubuntu (recovery)' {\n\tlinux\t/boot/vmlinuz-6.8.0 root=UUID=abc ro single\n}\n",
        )
    elif boot == "bls":
        write(
            root,
            "/boot/loader/entries/abc-6.11.conf",
            f"title Fedora\nlinux /vmlinuz-6.11\noptions root=UUID=abc ro rhgb {configured}\n",
        )
    elif boot == "kernel-cmdline":
        write(root, "/etc/kernel/cmdline", f"root=UUID=abc ro {configured}\n")
    write(
        root,
        "/etc/modprobe.d/seatkit-nvidia.conf",
        f'options nvidia NVreg_RegistryDwords="{dwords}"\noptions nvidia_uvm uvm_disable_hmm=1\n',
    )
    write(
        root,
        "/proc/driver/nvidia/version",
        f"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  {driver}  Release Build\n",
    )
    write(
        root,
        "/proc/driver/nvidia/params",
        f'ResmanDebugLevel: 4294967295\nEnableResizableBar: 1\nRegistryDwords: "{live_dwords}"\n',
    )
    write(root, "/sys/module/nvidia_uvm/parameters/uvm_disable_hmm", f"{hmm}\n")
    (root / "sys/class/iommu").mkdir(parents=True, exist_ok=True)
    for unit in iommu_units:
        (root / "sys/class/iommu" / unit).mkdir()
    return System(root=root)


pytestmark = pytest.mark.usefixtures("no_nvml")


def verdicts(system, profile="paper"):
    result = status.status(host_profiles.load(profile), system)
    return {row["setting"]: row for row in result["rows"]}, result


@pytest.mark.parametrize("boot", ["grub", "bls", "kernel-cmdline"])
def test_everything_applied_and_live_is_ok_on_each_boot_stack(tmp_path, boot):
    rows, result = verdicts(fake_host(tmp_path, boot=boot))
    assert rows["iommu"]["verdict"] == "OK" and rows["registry_keys"]["verdict"] == "OK"
    assert rows["hmm_disabled"]["verdict"] == "OK"
    assert rows["rebar"]["verdict"] == "UNKNOWN" and "NVML unavailable" in rows["rebar"]["live_from"]
    assert result["boot_id"].startswith("11111111") and result["driver"] == "595.58.03"
    assert result["data_path"]["verdict"] == "not verified"


def test_configured_but_not_booted_is_pending_reboot(tmp_path):
    rows, _ = verdicts(fake_host(tmp_path, live="iommu=pt"))
    assert rows["iommu"]["verdict"] == "PENDING-REBOOT" and rows["iommu"]["live"] == ["iommu=pt"]


def test_configured_but_modules_not_reloaded_is_pending_reload(tmp_path):
    rows, _ = verdicts(fake_host(tmp_path, live_dwords="", hmm="N"))
    assert rows["registry_keys"]["verdict"] == "PENDING-RELOAD"
    assert rows["hmm_disabled"]["verdict"] == "PENDING-RELOAD"


def test_files_that_say_otherwise_are_drift(tmp_path):
    rows, _ = verdicts(
        fake_host(
            tmp_path,
            configured="iommu=pt",
            live="iommu=pt",
            dwords="ForceP2P=0x11",
            live_dwords="ForceP2P=0x11",
        )
    )
    assert rows["iommu"]["verdict"] == "DRIFT" and rows["registry_keys"]["verdict"] == "DRIFT"


def test_live_tokens_with_iommu_units_still_present_are_drift(tmp_path):
    rows, _ = verdicts(fake_host(tmp_path, iommu_units=("ivhd0",)))
    assert rows["iommu"]["verdict"] == "DRIFT" and "IOMMU units" in rows["iommu"]["why"]


def test_intel_tokens_follow_the_cpu_vendor(tmp_path):
    system = fake_host(
        tmp_path,
        vendor="GenuineIntel",
        configured="iommu=off intel_iommu=off",
        live="iommu=off intel_iommu=off",
    )
    rows, _ = verdicts(system)
    assert rows["iommu"]["desired"] == ["intel_iommu=off", "iommu=off"]
    assert rows["iommu"]["verdict"] == "OK"


def test_unknown_vendor_is_unknown_with_the_reason(tmp_path):
    rows, _ = verdicts(fake_host(tmp_path, vendor="HygonGenuine"))
    assert rows["iommu"]["verdict"] == "UNKNOWN" and "CPU vendor" in rows["iommu"]["why"]


@pytest.mark.parametrize(
    "driver, refused",
    [("570.133.20", True), ("580.167.08", True), ("580.159.04", False), ("595.58.03", False)],
)
def test_five_key_string_is_refused_where_it_is_known_to_be_wrong(tmp_path, driver, refused):
    rows, _ = verdicts(fake_host(tmp_path, driver=driver))
    assert (rows["registry_keys"]["verdict"] == "REFUSED") == refused
    if refused:
        assert rows["registry_keys"]["why"]
    three, _ = verdicts(
        fake_host(
            tmp_path / "three",
            driver=driver,
            dwords="ForceP2P=0x11;GrdmaPciTopoCheckOverride=1;EnableResizableBar=1",
            live_dwords="ForceP2P=0x11;GrdmaPciTopoCheckOverride=1;EnableResizableBar=1",
            configured="iommu=pt",
            live="iommu=pt",
        ),
        "conservative",
    )
    assert three["registry_keys"]["verdict"] == "OK" and three["iommu"]["verdict"] == "OK"


def test_etc_modprobe_overrides_the_same_name_in_usr_lib(tmp_path):
    system = fake_host(tmp_path)
    write(tmp_path, "/usr/lib/modprobe.d/seatkit-nvidia.conf", "options nvidia_uvm uvm_disable_hmm=0\n")
    rows, _ = verdicts(system)
    assert rows["hmm_disabled"]["configured"] is True


def test_rebar_compares_bar1_with_vram(tmp_path, monkeypatch):
    system = fake_host(tmp_path)
    inventory = {
        "driver": "595.58.03",
        "gpus": [
            {"bar1_total_mib": 131072, "memory_mib": 97887},
            {"bar1_total_mib": 256, "memory_mib": 97887},
        ],
    }
    monkeypatch.setattr(gpus, "inventory", lambda system=None: inventory)
    rows, _ = verdicts(system)
    assert rows["rebar"]["verdict"] == "PENDING-RELOAD"  # configured, but one GPU has a 256 MiB BAR1
    inventory["gpus"].pop()
    assert verdicts(system)[0]["rebar"]["verdict"] == "OK"


def test_topology_from_sysfs_paths(tmp_path):
    devices = tmp_path / "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:08.0/0000:17:00.0"
    devices.mkdir(parents=True)
    link = tmp_path / "sys/bus/pci/devices"
    link.mkdir(parents=True)
    (link / "0000:17:00.0").symlink_to(devices)
    found = gpus.topology(System(root=tmp_path), "00000000:17:00.0")
    assert found["bridges_above"] == 3 and found["class"] == "behind a PCIe switch"
    assert gpus.topology(System(root=tmp_path), "00000000:99:00.0")["class"] == "unknown"


def test_real_h200_status_and_inventory_are_complete():
    """Fixtures from `seat host status --json` and `seat host gpus --json` on one H200."""
    result = json.loads((FIXTURES / "h200-host-status.json").read_text())
    assert result["boot_id"] and result["driver"] == "580.159.04"
    assert {row["setting"] for row in result["rows"]} == {"iommu", "registry_keys", "rebar", "hmm_disabled"}
    for row in result["rows"]:
        assert row["verdict"] in ("OK", "PENDING-REBOOT", "PENDING-RELOAD", "DRIFT", "UNKNOWN", "REFUSED")
        for column in ("configured", "live"):  # each column filled, or its reason given
            assert row[column] is not None or row.get(f"{column}_from") or row.get("why"), row
    assert result["transactions"] == {"in_force": [], "interrupted": []}
    rebar = next(r for r in result["rows"] if r["setting"] == "rebar")
    assert rebar["live"] is True and rebar["verdict"] == "OK"
    inventory = json.loads((FIXTURES / "h200-host-gpus.json").read_text())
    (gpu,) = inventory["gpus"]
    assert gpu["bar1_total_mib"] >= gpu["memory_mib"] and gpu["pcie_gen"] == 5
    assert inventory["p2p"] == [] and inventory["p2p_note"] == "one GPU: no peers to check"
    assert all(value is not None for value in gpu.values())


def test_real_h200_plan_knows_the_host_and_refuses_what_it_cannot_be_sure_of():
    """`seat host plan conservative --json` on the H200 machine (a VM without a boot loader of its own)."""
    plan = json.loads((FIXTURES / "h200-host-plan.json").read_text())
    facts = plan["facts"]
    assert facts["driver"] == "580.159.04" and facts["vendor"] == "intel" and facts["cpus"] == 16
    assert facts["virt"] and facts["stack"] is None and facts["boot_id"]
    assert plan["tokens"] == ["iommu=pt"]
    (op,) = plan["ops"]
    assert op["file"] == "/etc/modprobe.d/seatkit-nvidia.conf"
    assert (
        'NVreg_RegistryDwords="ForceP2P=0x11;GrdmaPciTopoCheckOverride=1;EnableResizableBar=1"' in op["diff"]
    )
    assert any("no boot stack recognised" in r for r in plan["refusals"])


def test_intel_iommu_on_beside_iommu_pt_is_ok_for_conservative_as_plan_judges_it(tmp_path):
    system = fake_host(
        tmp_path, vendor="GenuineIntel", configured="intel_iommu=on iommu=pt", live="intel_iommu=on iommu=pt"
    )
    rows, _ = verdicts(system, "conservative")
    assert rows["iommu"]["verdict"] == "OK" and rows["iommu"]["configured"] == ["iommu=pt"]
    rows, _ = verdicts(
        fake_host(
            tmp_path / "b",
            vendor="GenuineIntel",
            configured="intel_iommu=on iommu=off",
            live="intel_iommu=on iommu=pt",
        ),
        "conservative",
    )
    assert rows["iommu"]["verdict"] == "REVERTS"  # same key, another value: it decides


EFI_PICKS = ("LoaderEntryDefault", "LoaderEntryOneShot")


def efivar(root, name: str, value: str) -> None:
    """A systemd-boot variable as efivarfs shows it: four attribute bytes, then UTF-16 text."""
    target = root / f"sys/firmware/efi/efivars/{name}-4a67b082-0a4c-41cf-b6c7-440b29bb8c4f"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(b"\x07\x00\x00\x00" + (value + "\0").encode("utf-16-le"))


@pytest.mark.parametrize(
    "pick, boots",
    [
        (None, "abc-6.10.conf"),  # no default: the newest version, not the alphabetically first
        ("loader.conf", "abc-6.9.conf"),
        ("grubenv", "abc-6.9.conf"),
        ("LoaderEntryDefault", "abc-6.9.conf"),
        ("LoaderEntryOneShot", "abc-6.9.conf"),
        ("@saved", "abc-6.9.conf"),
    ],
)
def test_status_reads_the_entry_that_boots(tmp_path, pick, boots):
    system = fake_host(tmp_path, boot="bls")
    (tmp_path / "boot/loader/entries/abc-6.11.conf").unlink()
    for version in ("5.15", "6.9", "6.10"):  # 6.10 sorts before 6.9 as text, after it as a version
        write(
            tmp_path,
            f"/boot/loader/entries/abc-{version}.conf",
            f"title Fedora\nlinux /vmlinuz-{version}\n"
            "options root=UUID=abc ro " + ("iommu=off amd_iommu=off\n" if version in boots else "quiet\n"),
        )
    if pick == "loader.conf":
        write(tmp_path, "/boot/loader/loader.conf", "timeout 3\ndefault abc-6.9*\n")
    elif pick == "grubenv":
        write(tmp_path, "/boot/grub2/grubenv", "# GRUB Environment Block\nsaved_entry=abc-6.9\n")
    elif pick in EFI_PICKS:  # `bootctl set-default` / `set-oneshot`: the variable beats loader.conf
        write(tmp_path, "/boot/loader/loader.conf", "default abc-6.10.conf\n")
        efivar(tmp_path, pick, "abc-6.9.conf")
    elif pick == "@saved":  # loader.conf `default @saved`: the entry booted last time
        write(tmp_path, "/boot/loader/loader.conf", "default @saved\n")
        efivar(tmp_path, "LoaderEntryLastBooted", "abc-6.9.conf")
    rows, _ = verdicts(system)
    assert rows["iommu"]["configured_from"] == f"/boot/loader/entries/{boots}"
    assert rows["iommu"]["verdict"] == "OK"


GRUB_SUBMENU = """set default="${saved_entry}"
menuentry 'Ubuntu' --class ubuntu $menuentry_id_option 'gnulinux-simple-abc' {
\tlinux\t/boot/vmlinuz-6.8.0-50 root=UUID=abc ro quiet
}
submenu 'Advanced options for Ubuntu' $menuentry_id_option 'gnulinux-advanced-abc' {
\tmenuentry 'Ubuntu, with Linux 6.8.0-50' $menuentry_id_option 'gnulinux-6.8.0-50-advanced-abc' {
\t\tlinux\t/boot/vmlinuz-6.8.0-50 root=UUID=abc ro quiet
\t}
\tmenuentry 'Ubuntu, with Linux 6.8.0-45' $menuentry_id_option 'gnulinux-6.8.0-45-advanced-abc' {
\t\tlinux\t/boot/vmlinuz-6.8.0-45 root=UUID=abc ro quiet iommu=off amd_iommu=off
\t}
}
"""


@pytest.mark.parametrize(
    "saved",
    [
        "gnulinux-advanced-abc>gnulinux-6.8.0-45-advanced-abc",
        "Advanced options for Ubuntu>Ubuntu, with Linux 6.8.0-45",
        "1>1",
    ],
)
def test_status_reads_grubs_saved_entry_not_the_first(tmp_path, saved):
    system = fake_host(tmp_path)
    write(tmp_path, "/boot/grub/grub.cfg", GRUB_SUBMENU)
    write(tmp_path, "/boot/grub/grubenv", f"# GRUB Environment Block\nsaved_entry={saved}\n")
    rows, _ = verdicts(system)
    assert rows["iommu"]["verdict"] == "OK" and rows["iommu"]["configured"] == ["amd_iommu=off", "iommu=off"]


def test_status_reads_loader_entries_under_efi(tmp_path):
    host = FakeHost(tmp_path, "systemd-boot")
    for entry in host.root.glob("boot/efi/loader/entries/*.conf"):
        entry.unlink()
    host.path("/etc/kernel/cmdline").unlink()
    host.write(
        f"/efi/loader/entries/{MACHINE}-{KVER}.conf", "title x\noptions root=x iommu=off amd_iommu=off\n"
    )
    reading = state.configured_cmdline(host.system)
    assert reading.value == {"iommu=off", "amd_iommu=off"}
    assert reading.source == f"/efi/loader/entries/{MACHINE}-{KVER}.conf"
