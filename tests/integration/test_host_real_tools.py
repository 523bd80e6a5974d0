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
from debian_root import KVER, chroot_runner, make
from seatkit.errors import SeatError
from seatkit.host import change, plan as host_plan, settings
from seatkit.host.journal import Journal
from seatkit.host.system import System

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
    ok(system, {"update-initramfs": ["update-initramfs", "-c", "-k", KVER],  # before grub.cfg lists it
                "dracut": ["dracut", "--force", f"/boot/initrd.img-{KVER}", KVER]}[initramfs])
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
    return host_plan.build(settings.load("conservative"), system, host_plan.Choices(**choices))


def default_entry(system: System) -> list[str]:
    text = (system.root / "boot/grub/grub.cfg").read_text()
    return next(line.split() for line in text.splitlines() if line.strip().startswith("linux"))


def test_grub_and_update_initramfs_apply_rollback_byte_exact(base, tmp_path):
    system = host(base, tmp_path)
    cloud = system.root / "etc/default/grub.d/50-cloudimg-settings.cfg"
    cloud.write_text('GRUB_CMDLINE_LINUX_DEFAULT="console=ttyS0"\n')  # the cloud-image drop-in
    ok(system, ["update-grub"])
    pristine = tree(system)
    plan = conservative(system)
    assert not plan.refusals, plan.refusals
    txid = change.apply(plan, system)
    line = default_entry(system)  # what the real grub-mkconfig and 10_linux wrote
    assert "console=ttyS0" in line and line[-1] == "iommu=pt"
    assert "etc/modprobe.d/seatkit-nvidia.conf" in " ".join(
        initramfs_files(system, system.root / f"boot/initrd.img-{KVER}"))
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
    system.fault = lambda at: site.write_text('GRUB_CMDLINE_LINUX_DEFAULT="quiet"\n') \
        if at == "before update-grub" else None
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
    system.fault = lambda at: defaults.write_text(good + 'GRUB_CMDLINE_LINUX="quiet\n') \
        if at == "before update-grub" else None
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
    assert (system.root / "etc/kernel/cmdline").read_bytes() == \
        b'root=/dev/vda1 rw acpi_osi="Windows 2015"\tcaf\xe9=1 iommu=pt\n'
    options = next(line for line in entry.read_bytes().splitlines() if line.startswith(b"options"))
    assert b'rw acpi_osi="Windows 2015" caf\xe9=1 iommu=pt' in options  # the real plugin joins with spaces
    change.rollback(system)
    assert tree(system) == pristine


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
        watch = system.root / {"update-grub": "boot/grub/grub.cfg.new",
                               "update-initramfs": f"boot/initrd.img-{KVER}.new"}[during]
        deadline = time.monotonic() + 600
        while not watch.exists() and time.monotonic() < deadline:
            time.sleep(0.005)
        os.killpg(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    return os.WIFSIGNALED(status)


def test_seeded_sigkills_on_the_real_tool_root_end_pristine_after_recover(base, tmp_path):
    system = host(base, tmp_path)
    pristine = tree(system)
    snapshot = tmp_path / "pristine"
    subprocess.run(["cp", "-a", str(system.root), str(snapshot)], check=True)
    rng = random.Random("issue-11-real")
    cases = [(None, "update-grub"), (None, "update-initramfs")] + [(rng.randint(1, 17), None) for _ in range(6)]
    failures = []
    for kill_at, during in cases:
        killed = _child(system, lambda: change.apply(conservative(system), system), kill_at, during)
        assert killed, (kill_at, during)
        change.recover(system)
        if tree(system) != pristine or Journal(system).open():
            failures.append((kill_at, during))
        shutil.rmtree(system.root / "var/lib/seatkit")
    print(f"\nreal-tool root: {len(cases)} SIGKILLs (2 inside the real tools), failures {failures}")
    assert failures == []
