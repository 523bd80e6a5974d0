"""Detection finds the loader that boots (the firmware's word where efivars give it), or refuses;
and it refuses inside a container, whose boot files boot no kernel."""

import pytest
from fake_host import KVER, FakeHost

from seatkit.host import detect, ops
from seatkit.host import plan as host_plan
from seatkit.seat import host_profiles

EFI = "/sys/firmware/efi/efivars"
LOADER = "4a67b082-0a4c-41cf-b6c7-440b29bb8c4f"  # systemd-boot's vendor GUID
GLOBAL = "8be4df61-93ca-11d2-aa0d-00e098032b8c"  # EFI_GLOBAL_VARIABLE


pytestmark = pytest.mark.usefixtures("no_nvml")


def efivar(host, name: str, guid: str, value: bytes) -> None:
    host.path(f"{EFI}/{name}-{guid}").parent.mkdir(parents=True, exist_ok=True)
    host.path(f"{EFI}/{name}-{guid}").write_bytes(b"\x06\x00\x00\x00" + value)


def utf16(text: str) -> bytes:
    return (text + "\0").encode("utf-16-le")


def boot_entry(host, number: int, description: str, path: str) -> None:
    """BootCurrent and its Boot#### load option: attributes, path list length, description, path."""
    efivar(host, "BootCurrent", GLOBAL, number.to_bytes(2, "little"))
    efivar(
        host,
        f"Boot{number:04X}",
        GLOBAL,
        b"\x01\x00\x00\x00\x20\x00" + utf16(description) + b"\x04\x04" + utf16(path),
    )


def with_systemd_boot(host) -> None:
    """`apt install systemd-boot` on a GRUB host: entries on the ESP, kernel-install, grub.cfg kept."""
    host.tool("kernel-install")
    host.write(f"/usr/lib/modules/{KVER}/vmlinuz", "kernel image\n")
    host.write("/etc/kernel/cmdline", "root=UUID=abc ro quiet splash\n")
    host.kernel_install(KVER)


def plan(host, profile="conservative"):
    return host_plan.build(
        host_profiles.load(profile), host.system, host_plan.Choices(acknowledge_iommu_off=True)
    )


@pytest.mark.parametrize("evidence", ["LoaderInfo", "BootCurrent"])
def test_a_grub_host_that_systemd_boot_boots_is_planned_as_systemd_boot(tmp_path, evidence):
    host = FakeHost(tmp_path, "grub")
    with_systemd_boot(host)
    if evidence == "LoaderInfo":
        efivar(host, "LoaderInfo", LOADER, utf16("systemd-boot 252.31-1~deb12u1"))
    else:
        boot_entry(host, 3, "Linux Boot Manager", "\\EFI\\systemd\\systemd-bootx64.efi")
    made = plan(host)
    assert made.facts.stack == "systemd-boot" and not made.refusals, made.refusals
    assert any(isinstance(op, ops.FileOp) and op.path == "/etc/kernel/cmdline" for op in made.ops)


def test_firmware_that_names_a_loader_whose_signals_are_absent_is_a_refusal(tmp_path):
    host = FakeHost(tmp_path, "grub")  # no loader entries, no kernel-install
    efivar(host, "LoaderInfo", LOADER, utf16("systemd-boot 254"))
    made = plan(host)
    assert made.facts.stack is None
    assert any(
        "the firmware booted systemd-boot (efivar LoaderInfo=systemd-boot 254), but its signals "
        "are not here; found instead: grub" in r
        for r in made.refusals
    ), made.refusals


def test_grub_named_by_boot_current_keeps_a_grub_host_grub(tmp_path):
    host = FakeHost(tmp_path, "systemd-boot")
    boot_entry(host, 1, "debian", "\\EFI\\debian\\shimx64.efi")
    made = plan(host)
    assert made.facts.stack is None and any("the firmware booted grub" in r for r in made.refusals)


def test_rhel_8_uefi_with_grub_cfg_on_the_esp_is_grub_with_bls(tmp_path):
    host = FakeHost(tmp_path, "bls")
    host.path("/boot/efi/EFI/redhat").mkdir(parents=True)
    host.path("/boot/grub2/grub.cfg").rename(host.path("/boot/efi/EFI/redhat/grub.cfg"))
    host.tool("kernel-install")  # RHEL 8 has it: kernel packages run it
    assert detect.boot_stack(host.system)[0] == "bls"


@pytest.mark.parametrize("how", ["systemd-detect-virt", "/.dockerenv", "/run/.containerenv", "cgroup"])
def test_inside_a_container_apply_is_refused(tmp_path, how):
    host = FakeHost(tmp_path, "grub", virt="docker" if how == "systemd-detect-virt" else "none")
    if how.startswith("/"):
        host.write(how, "")
    elif how == "cgroup":
        host.write("/proc/1/cgroup", "0::/system.slice/docker-4f2a.scope\n")
    made = plan(host)
    assert any(
        r.startswith("this runs in a container (") and "run seatkit on the host itself" in r
        for r in made.refusals
    ), made.refusals


def test_the_driver_the_next_boot_loads_decides_the_key_form(tmp_path):
    host = FakeHost(tmp_path, "grub", driver="580.95.05")  # runs; 580.167.08 is installed for the kernel
    host.installed = {KVER: "580.167.08"}
    made = plan(host, "paper")
    assert made.facts.next_kernel == KVER and made.facts.next_driver == "580.167.08"
    assert any(
        r.startswith(
            "the five-key registry form is wrong on driver 580.167.08 (installed for the "
            f"next boot's kernel {KVER})"
        )
        for r in made.refusals
    ), made.refusals
    assert any("driver 580.95.05 runs, but the next boot" in w for w in made.warnings)


def test_the_next_kernel_is_the_default_loader_entrys(tmp_path):
    host = FakeHost(tmp_path, "systemd-boot")
    host.install_kernel("6.8.0-50-generic")
    host.installed = {"6.8.0-50-generic": "580.167.08"}
    made = plan(host, "paper")
    assert made.facts.next_kernel == "6.8.0-50-generic" and made.facts.next_driver == "580.167.08"


def test_no_module_built_yet_for_the_next_kernel_is_not_judged_on_the_running_driver(tmp_path):
    """A kernel upgrade whose nvidia DKMS build has not run: modinfo -k finds nothing, and the driver
    the next boot loads (built at that boot, from whatever source is installed) is unknown."""
    host = FakeHost(tmp_path, "systemd-boot", driver="580.95.05")  # five-key is allowed on what runs
    host.install_kernel("6.8.0-50-generic")
    host.installed = {"6.8.0-50-generic": None}
    made = plan(host, "paper")
    assert made.facts.next_kernel == "6.8.0-50-generic" and made.facts.next_driver is None
    assert any(
        "no nvidia module is installed for the next boot's kernel 6.8.0-50-generic" in w
        for w in made.warnings
    ), made.warnings
    assert any("five-key" in r and "unknown" in r for r in made.refusals), made.refusals
    assert not any("no nvidia module" in w for w in plan(host, "conservative").refusals)
