"""`seat host apply | rollback | recover` against Debian's real boot tools, in a chroot.

Real: grub-mkconfig with Debian's /etc/grub.d scripts (update-grub), update-initramfs (the image is
unpacked to check the module options reached it), dracut, kernel-install with systemd's own
plugins. Stand-ins: grub-probe (no disk in a chroot), the kernel image, /proc files.
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import unavailable
from debian_root import KVER, chroot_runner, kernel, make, module

from seatkit.errors import SeatError
from seatkit.host import change, modprobe, ops, status
from seatkit.host import plan as host_plan
from seatkit.host.journal import Journal
from seatkit.host.system import System
from seatkit.seat import host_profiles

MACHINE = "0123456789abcdef0123456789abcdef"
ENTRY = f"/boot/efi/loader/entries/{MACHINE}-{KVER}.conf"


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    if os.geteuid() != 0:
        unavailable("the Debian root needs root for chroot")
    try:
        return make(tmp_path_factory.mktemp("debian") / "root")
    except (subprocess.CalledProcessError, OSError) as exc:
        unavailable(f"could not make the Debian root with mmdebstrap: {exc}")


def host(base: Path, where: Path, stack: str = "grub", initramfs: str = "update-initramfs") -> System:
    """A copy of the base root set up as one boot stack; the pristine images made by the real tools."""
    root = where / "root"
    subprocess.run(["cp", "-a", "--reflink=auto", str(base), str(root)], check=True)
    (root / "proc/sys/kernel/random").mkdir(parents=True, exist_ok=True)
    (root / "proc/cpuinfo").write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\nflags\t\t: fpu\n")
    (root / "proc/cmdline").write_text(f"BOOT_IMAGE=/boot/vmlinuz-{KVER} root=/dev/vda1 ro quiet\n")
    (root / "proc/sys/kernel/random/boot_id").write_text("6f1c0000-0000-4000-8000-000000000001\n")
    other = {"update-initramfs": "usr/bin/dracut", "dracut": "usr/sbin/update-initramfs"}[initramfs]
    (root / other).rename(root / f"{other}.hidden")  # one generator, as a real host has
    system = System(root=root, runner=chroot_runner(root), euid=0)
    ok(system, ["depmod", KVER])  # dracut --regenerate-all skips a kernel without modules.dep
    ok(
        system,
        {
            "update-initramfs": ["update-initramfs", "-c", "-k", KVER],  # before grub.cfg lists it
            "dracut": ["dracut", "--force", f"/boot/initrd.img-{KVER}", KVER],
        }[initramfs],
    )
    if stack == "grub":
        ok(system, ["update-grub"])
    else:  # systemd-boot: an ESP with the BLS layout, entries written by kernel-install
        (root / "etc/kernel").mkdir(exist_ok=True)
        (root / "etc/kernel/cmdline").write_bytes(b'root=/dev/vda1 rw acpi_osi="Windows 2015"\tcaf\xe9=1\n')
        (root / "etc/kernel/install.conf").write_text("layout=bls\n")
        (root / f"boot/efi/{MACHINE}").mkdir(parents=True)
        (root / "boot/efi/loader/entries").mkdir(parents=True)
        ok(system, ["kernel-install", "add", KVER, f"/boot/vmlinuz-{KVER}"])
    return system


def ok(system: System, argv: list[str]) -> str:
    rc, output = system.run(argv)
    assert rc == 0, f"{argv}: {output[-2000:]}"
    return output


def tree(system: System) -> dict[str, str]:
    """/etc and /boot: contents, folders, modes, owners, symlink targets. Initramfs images are
    regenerated, never byte-restored (their cpio carries timestamps): listed by their file list."""
    out = {}
    for top in ("etc", "boot"):
        for p in sorted((system.root / top).rglob("*")):
            st = p.lstat()
            if p.is_symlink():
                what = "-> " + os.readlink(p)
            elif p.is_dir():
                what = "dir"
            elif p.name.startswith("initrd.img-"):
                what = "initramfs " + " ".join(sorted(initramfs_files(system, p)))
            else:
                what = hashlib.sha256(p.read_bytes()).hexdigest()
            out[str(p.relative_to(system.root))] = f"{what} {oct(st.st_mode)} {st.st_uid}:{st.st_gid}"
    return out


def initramfs_files(system: System, image: Path) -> set[str]:
    """The image's modprobe.d files, by the real lsinitramfs / lsinitrd."""
    path = f"/{image.relative_to(system.root)}"
    rc, output = system.run(["lsinitramfs", path])
    return {line for line in output.splitlines() if "modprobe.d/" in line}


def conservative(system: System, **choices):
    return host_plan.build(host_profiles.load("conservative"), system, host_plan.Choices(**choices))


def default_entry(system: System) -> list[str]:
    text = (system.root / "boot/grub/grub.cfg").read_text()
    return next(line.split() for line in text.splitlines() if line.strip().startswith("linux"))


def test_grub_and_update_initramfs_apply_rollback_byte_exact(base, tmp_path):
    system = host(base, tmp_path)
    cloud = system.root / "etc/default/grub.d/50-cloudimg-host_profiles.cfg"
    cloud.write_text('GRUB_CMDLINE_LINUX_DEFAULT="console=ttyS0"\n')  # the cloud-image drop-in
    ok(system, ["update-grub"])
    pristine = tree(system)
    plan = conservative(system)
    assert not plan.refusals, plan.refusals
    txid = change.apply(plan, system)
    line = default_entry(system)  # what the real grub-mkconfig and 10_linux wrote
    assert "console=ttyS0" in line and line[-1] == "iommu=pt"
    assert "etc/modprobe.d/seatkit-nvidia.conf" in " ".join(
        initramfs_files(system, system.root / f"boot/initrd.img-{KVER}")
    )
    change.rollback(system)
    assert tree(system) == pristine and txid in Journal(system).undone()


def test_a_later_drop_in_is_refused_by_plan_and_rolled_back_when_it_appears_during_apply(base, tmp_path):
    system = host(base, tmp_path)
    pristine = tree(system)
    site = system.root / "etc/default/grub.d/zz-site.cfg"
    site.write_text('GRUB_CMDLINE_LINUX_DEFAULT="quiet console=ttyS0"\n')
    assert any("zz-site.cfg sets GRUB_CMDLINE_LINUX_DEFAULT" in r for r in conservative(system).refusals)
    site.unlink()
    plan = conservative(system)
    system.fault = lambda at: (
        site.write_text('GRUB_CMDLINE_LINUX_DEFAULT="quiet"\n') if at == "before update-grub" else None
    )
    with pytest.raises(SeatError, match="does not carry the change") as caught:
        change.apply(plan, system)
    assert "zz-site.cfg sets GRUB_CMDLINE_LINUX_DEFAULT" in str(caught.value)
    assert "iommu=pt" not in default_entry(system)
    site.unlink()
    ok(system, ["update-grub"])  # grub.cfg is regenerated from the defaults, zz-site.cfg gone now
    assert tree(system) == pristine and Journal(system).active() == [] and Journal(system).open() == []


def test_broken_defaults_are_refused_and_a_failing_update_grub_ends_recover_with_the_fix(base, tmp_path):
    system = host(base, tmp_path)
    defaults = system.root / "etc/default/grub"
    good = defaults.read_text()
    defaults.write_text(good + 'GRUB_CMDLINE_LINUX="quiet\n')
    assert any("/etc/default/grub does not parse" in r for r in conservative(system).refusals)
    defaults.write_text(good)
    pristine = tree(system)
    plan = conservative(system)
    system.fault = lambda at: (
        defaults.write_text(good + 'GRUB_CMDLINE_LINUX="quiet\n') if at == "before update-grub" else None
    )
    with pytest.raises(SeatError, match="seat host recover"):
        change.apply(plan, system)
    system.fault = lambda at: None
    with pytest.raises(SeatError, match=r"(?s)/etc/default/grub does not parse.*then run: update-grub"):
        change.recover(system)
    assert change.recover(system) == []
    defaults.write_text(good)
    ok(system, ["update-grub"])
    assert tree(system) == pristine


def test_dracut_regenerates_and_rollback_gives_the_tree_back(base, tmp_path):
    system = host(base, tmp_path, initramfs="dracut")
    pristine = tree(system)
    plan = conservative(system)
    assert plan.regen[0][0] == "dracut", plan.regen
    # Debian's dracut builds generic images: /etc/modprobe.d stays out (hostonly copies it)
    assert any("non-hostonly" in w for w in plan.warnings), plan.warnings
    image = system.root / f"boot/initrd.img-{KVER}"
    before = image.stat().st_mtime_ns
    change.apply(plan, system)
    assert image.stat().st_mtime_ns != before  # the real dracut rebuilt it
    assert "etc/modprobe.d/seatkit-nvidia.conf" not in " ".join(initramfs_files(system, image))
    change.rollback(system)
    assert tree(system) == pristine


def test_kernel_install_entries_carry_the_exact_bytes_and_come_back(base, tmp_path):
    system = host(base, tmp_path, stack="systemd-boot")
    entry = system.root / ENTRY.lstrip("/")
    entry.write_bytes(entry.read_bytes() + b"# a hand edit\n")
    pristine = tree(system)
    plan = conservative(system)
    assert not plan.refusals, plan.refusals
    change.apply(plan, system)
    assert (
        system.root / "etc/kernel/cmdline"
    ).read_bytes() == b'root=/dev/vda1 rw acpi_osi="Windows 2015"\tcaf\xe9=1 iommu=pt\n'
    options = next(line for line in entry.read_bytes().splitlines() if line.startswith(b"options"))
    assert b'rw acpi_osi="Windows 2015" caf\xe9=1 iommu=pt' in options  # the real plugin joins with spaces
    change.rollback(system)
    assert tree(system) == pristine


NEW = "6.1.0-100-amd64"


def install_kernel(system: System, version: str) -> None:
    """What a kernel package's hooks do on a systemd-boot host: modules, initramfs, kernel-install add."""
    kernel(system.root, version)
    ok(system, ["depmod", version])
    ok(system, ["update-initramfs", "-c", "-k", version])
    ok(system, ["kernel-install", "add", version, f"/boot/vmlinuz-{version}"])


def esp_initrd(system: System, version: str) -> set[str]:
    """The modprobe.d files of the image the kernel's loader entry names (kernel-install's copy)."""
    text = (system.root / f"boot/efi/loader/entries/{MACHINE}-{version}.conf").read_text(errors="replace")
    named = next(line.split()[1] for line in text.splitlines() if line.startswith("initrd"))
    image = next(
        p for p in (system.root / f"boot/efi{named}", system.root / named.lstrip("/")) if p.is_file()
    )
    assert image.is_relative_to(system.root / "boot/efi"), image  # on the ESP, not /boot's own image
    return initramfs_files(system, image)


def entry_options(system: System, version: str) -> list[str]:
    text = (system.root / f"boot/efi/loader/entries/{MACHINE}-{version}.conf").read_text(errors="replace")
    return next(line.split()[1:] for line in text.splitlines() if line.startswith("options"))


def test_real_kernel_install_a_kernel_installed_after_apply_is_regenerated_clean(base, tmp_path):
    system = host(base, tmp_path, stack="systemd-boot")
    change.apply(conservative(system), system)
    install_kernel(system, NEW)  # the real plugins: its entry and its ESP initrd carry the kit's change
    assert "iommu=pt" in entry_options(system, NEW)
    assert "etc/modprobe.d/seatkit-nvidia.conf" in esp_initrd(system, NEW)
    change.rollback(system)
    for version in (KVER, NEW):
        assert "iommu=pt" not in entry_options(system, version)
        assert "etc/modprobe.d/seatkit-nvidia.conf" not in esp_initrd(system, version)


def test_real_kernel_install_a_kernel_removed_after_apply_stays_removed(base, tmp_path):
    system = host(base, tmp_path, stack="systemd-boot")
    install_kernel(system, NEW)
    change.apply(conservative(system), system)
    ok(system, ["kernel-install", "remove", KVER])  # what the package's prerm runs
    for path in (f"boot/vmlinuz-{KVER}", f"boot/initrd.img-{KVER}", f"boot/config-{KVER}"):
        (system.root / path).unlink()
    shutil.rmtree(system.root / f"lib/modules/{KVER}")
    change.rollback(system)
    assert not (system.root / f"boot/efi/loader/entries/{MACHINE}-{KVER}.conf").exists()
    assert "iommu=pt" not in entry_options(system, NEW)


def modprobe_resolved(system: System, name: str) -> dict[str, str]:
    """What the real modprobe would pass to the module: its `insmod` line, the last value winning."""
    output = ok(system, ["modprobe", "--dry-run", "-v", "-S", KVER, name])
    line = next(line for line in output.splitlines() if line.startswith("insmod "))
    return dict(word.split("=", 1) for word in line.split()[2:])


KMOD_CASES = {  # files, the next boot's command line, whether a source other than the kit's sets HMM
    "usr-local-lib": ({"/usr/local/lib/modprobe.d/zz-local.conf": "uvm_disable_hmm=0"}, "", True),
    "run-masks-usr-lib": (
        {
            "/run/modprobe.d/hmm.conf": "uvm_disable_hmm=1",
            "/usr/local/lib/modprobe.d/hmm.conf": "uvm_disable_hmm=0",
            "/usr/lib/modprobe.d/hmm.conf": "uvm_disable_hmm=0",
        },
        "",
        True,
    ),
    "etc-masks-run": (
        {"/etc/modprobe.d/zz.conf": "uvm_perf_prefetch=1", "/run/modprobe.d/zz.conf": "uvm_disable_hmm=0"},
        "",
        False,
    ),
    "kernel-command-line": ({}, "nvidia_uvm.uvm_disable_hmm=0", True),
    "dashed-module-name": ({}, "nvidia-uvm.uvm_disable_hmm=0", True),
}


def test_plan_and_status_resolve_module_options_as_the_real_modprobe_does(base, tmp_path):
    system = host(base, tmp_path)  # one root for every case (a root costs a real initramfs)
    module(system.root, KVER, "nvidia_uvm")
    ok(system, ["depmod", KVER])
    kit = system.root / ops.MODPROBE_FILE.lstrip("/")  # the kit's file, as apply writes it
    kit.write_text(host_plan.modprobe_text(host_profiles.load("conservative"), "ForceP2P=0x11"))
    for case, (files, line, foreign) in KMOD_CASES.items():
        for path, options in files.items():
            target = system.root / path.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(f"options nvidia_uvm {options}\n")
        dropin = system.root / "etc/default/grub.d/50-op.cfg"  # the next boot's line, by the operator
        dropin.write_text(f'GRUB_CMDLINE_LINUX="{line}"\n')
        ok(system, ["update-grub"])
        next_boot = " ".join(default_entry(system)[2:])
        (system.root / "proc/cmdline").write_text(f"BOOT_IMAGE=/boot/vmlinuz-{KVER} {next_boot}\n")
        real = modprobe_resolved(system, "nvidia_uvm")["uvm_disable_hmm"]
        assert real == ("1" if case in ("run-masks-usr-lib", "etc-masks-run") else "0"), case  # kmod's word
        row = next(
            r
            for r in status.status(host_profiles.load("conservative"), system)["rows"]
            if r["setting"] == "hmm_disabled"
        )
        assert row["configured"] is (real == "1"), (case, real, row)
        claimed, _ = modprobe.options(system, "nvidia_uvm", next_boot.split())
        assert claimed["uvm_disable_hmm"] == real, case
        refusals = conservative(system).refusals
        assert any("uvm_disable_hmm" in r for r in refusals) is foreign, (case, refusals)
        for path in files:
            (system.root / path.lstrip("/")).unlink()


def _child(system: System, act, kill_at: int | None, during: str | None) -> bool:
    """Run act in a child (its own process group) killed with SIGKILL at fault call kill_at, or
    with its whole group, the real tool included, while the tool `during` writes its output."""
    pid = os.fork()
    if pid == 0:
        os.setpgid(0, 0)
        calls = [0]

        def fault(at):
            calls[0] += 1
            if calls[0] == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)

        system.fault = fault
        try:
            act()
        finally:
            os._exit(0)
    try:
        os.setpgid(pid, pid)
    except OSError:
        pass  # the child did it first
    if during:  # the tool's half-written output: grub-mkconfig and update-initramfs write *.new first
        watch = (
            system.root
            / {"update-grub": "boot/grub/grub.cfg.new", "update-initramfs": f"boot/initrd.img-{KVER}.new"}[
                during
            ]
        )
        deadline = time.monotonic() + 600
        while not watch.exists() and time.monotonic() < deadline:
            time.sleep(0.005)
        os.killpg(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    return os.WIFSIGNALED(status)


def real_tool_kills(system: System, seeded: int) -> tuple[list, list]:
    """SIGKILL apply inside each real tool (update-grub, update-initramfs), then at `seeded` points
    drawn from a fixed seed, each followed by recover: the cases made, and those not ending pristine."""
    pristine = tree(system)
    rng = random.Random("issue-11-real")
    cases = [(None, "update-grub"), (None, "update-initramfs")] + [
        (rng.randint(1, 17), None) for _ in range(seeded)
    ]
    failures = []
    for kill_at, during in cases:
        killed = _child(system, lambda: change.apply(conservative(system), system), kill_at, during)
        assert killed, (kill_at, during)
        change.recover(system)
        if tree(system) != pristine or Journal(system).open():
            failures.append((kill_at, during))
        shutil.rmtree(system.root / "var/lib/seatkit")
    return cases, failures


def test_seeded_sigkills_on_the_real_tool_root_end_pristine_after_recover(base, tmp_path):
    """One seeded point a run (the full count: tests/benchmarks/real_tool_kills.py)."""
    cases, failures = real_tool_kills(host(base, tmp_path), seeded=1)
    print(f"\nreal-tool root: {len(cases)} SIGKILLs (2 inside the real tools), failures {failures}")
    assert failures == []
