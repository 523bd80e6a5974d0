"""The campaign's one-shot boot against Debian's real tools, in a chroot: update-grub runs the kit's
/etc/grub.d script with Debian's own grub-mkconfig, grub-reboot and grub-editenv set the one-shot,
grub-script-check parses the generated grub.cfg, `systemd-analyze verify` checks the unit, and kmod's
`modprobe --dry-run -v` shows the entry's `module.param=value` tokens reach the module. Stand-ins:
`systemctl reboot`, grub-probe, the kernel image, /proc files and the module files (any bytes:
modprobe --dry-run does not load them)."""

from __future__ import annotations

import shlex
from pathlib import Path

import yaml
from debian_root import KVER
from test_host_real_tools import base, host, ok, tree  # noqa: F401 - base is the module's root fixture

from seatkit.campaign import boot, runner
from seatkit.campaign import plan as campaign_plan
from seatkit.campaign import spec as specs
from seatkit.seat import host_profiles


class NoBench:
    def bench(self, *args):
        raise AssertionError("no bench runs before the reboot")

    def stop(self, campaign):
        return []


def campaign(tmp_path: Path):
    path = tmp_path / "real.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "description": "real tools",
                "seat": "cpu-smoke",
                "host": "conservative",  # three keys: judged without a driver in the chroot
                "suites": ["code"],
                "repeats": 1,
                "arms": [{"name": "p2p+hmm", "host": ["p2p", "hmm"]}],
            }
        )
    )
    return specs.load(str(path))


def linux_args(cfg: str, ident: str) -> list[str]:
    block = cfg.split(f"--id {ident}", 1)[1].split("\n}", 1)[0]
    line = next(x for x in block.splitlines() if x.strip().startswith("linux"))
    return shlex.split(line.strip())[2:]  # GRUB's quoting as the entry uses it: '...' around `;`


def test_one_shot_entry_with_debians_grub_and_kmod(base, tmp_path):  # noqa: F811
    system = host(base, tmp_path)
    real, reboots = system.runner, []

    def runner_(argv):  # the one stand-in command: a chroot cannot reboot
        if argv == ["systemctl", "reboot"]:
            reboots.append(argv)
            return 0, ""
        return real(argv)

    system.runner = runner_
    (system.root / "etc/systemd/system").mkdir(parents=True, exist_ok=True)
    (system.root / "proc/self").mkdir(parents=True, exist_ok=True)
    (system.root / "proc/self/mounts").write_text("/dev/vda1 / ext4 rw 0 0\n")  # grubenv on a plain disk
    cfg_before = (system.root / "boot/grub/grub.cfg").read_text()
    default = boot.default_entry(system)
    plan = campaign_plan.build(campaign(tmp_path), system)
    assert plan.refusals == []
    seat = system.root / "usr/local/bin/seat"  # root's own install: what the unit may run as root
    seat.parent.mkdir(parents=True, exist_ok=True)
    seat.write_text("#!/bin/sh\n")
    seat.chmod(0o755)
    before = tree(system)
    runner.start(plan, system, "/usr/local/bin/seat")
    # the step installs (real update-grub), arms (real grub-reboot) and asks for the reboot
    assert runner.step(system, NoBench()) == "rebooting" and len(reboots) == 1
    cfg = (system.root / "boot/grub/grub.cfg").read_text()
    assert boot.default_entry(system) == default  # the normal entry, byte for byte
    assert "--id seatkit-campaign-p2p+hmm" in cfg
    assert 'if [ "${next_entry}" ] ; then' in cfg  # Debian's header boots next_entry once, then clears it
    ok(system, ["grub-script-check", "/boot/grub/grub.cfg"])  # GRUB's own parser takes the entry
    assert "next_entry=seatkit-campaign-p2p+hmm" in ok(system, ["grub-editenv", "/boot/grub/grubenv", "list"])
    ok(system, ["systemd-analyze", "verify", "--man=no", boot.UNIT, boot.FALLBACK])

    # kmod: the entry's command line reaches the modules (modprobe reads /proc/cmdline)
    args = linux_args(cfg, "seatkit-campaign-p2p+hmm")
    (system.root / "proc/cmdline").write_text(f"BOOT_IMAGE=/boot/vmlinuz-{KVER} {' '.join(args)}\n")
    modules = system.root / f"lib/modules/{KVER}/kernel/drivers/video"
    modules.mkdir(parents=True, exist_ok=True)
    for name in ("nvidia", "nvidia_uvm"):
        (modules / f"{name}.ko").write_bytes(b"stand-in module\n")
    ok(system, ["depmod", "-a", KVER])  # indexes them (it cannot read a stand-in's symbols, and says so)
    uvm = ok(system, ["modprobe", "--dry-run", "-v", "-S", KVER, "nvidia_uvm"])
    assert f"insmod /lib/modules/{KVER}/kernel/drivers/video/nvidia_uvm.ko uvm_disable_hmm=1" in uvm
    nvidia = ok(system, ["modprobe", "--dry-run", "-v", "-S", KVER, "nvidia"])
    dwords = ";".join(f"{k}={v}" for k, v in boot.p2p_keys(host_profiles.load("conservative")).items())
    assert f"nvidia.ko NVreg_RegistryDwords={dwords}" in nvidia  # the whole string, `;` and all

    # the end: entries and unit removed, grub.cfg and grubenv as they were
    (system.root / "proc/cmdline").write_text(f"BOOT_IMAGE=/boot/vmlinuz-{KVER} root=/dev/vda1 ro quiet\n")
    assert runner.abort(system, NoBench()) == "aborted"
    assert (system.root / "boot/grub/grub.cfg").read_text() == cfg_before
    for path in (boot.UNIT, boot.WANTS, boot.SCRIPT):
        assert not (system.root / path.lstrip("/")).exists()
    assert tree(system) == before  # /etc and /boot: every file, mode and owner
