"""Fake hosts for the host-settings tests: a root tree per boot stack and fake boot tools.

The fake tools do what the real ones do to the files that matter, deterministically: update-grub
sources /etc/default/grub and grub.d/*.cfg with a real shell in grub-mkconfig's order, grubby and
kernelstub edit entries and their config, kernel-install writes entries from /etc/kernel/cmdline,
the initramfs generators copy modprobe.d into the image.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shlex
import stat
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

from seatkit.host import change, cmdline, modprobe
from seatkit.host import plan as host_plan
from seatkit.host import system as host_system
from seatkit.host.system import System
from seatkit.seat import host_profiles

KVER = "6.8.0-45-generic"
MACHINE = "0123456789abcdef"
READ_ONLY = {"systemd-detect-virt", "uname", "modinfo", "lsinitramfs", "lsinitrd", "lsinitcpio"}
INITRAMFS_TOOLS = ("update-initramfs", "dracut", "mkinitcpio")
LISTERS = ("lsinitramfs", "lsinitrd", "lsinitcpio")
CONTAINERS = {"docker", "podman", "lxc", "systemd-nspawn", "container-other"}


class Death(BaseException):
    """The process dies here (not an Exception: nothing may catch it)."""


def tree(root: Path) -> dict[str, str]:
    """Every file, folder and symlink: contents (SHA-256), symlink target, mode, owner and extended
    attributes; seatkit's own state folder left out (it keeps the journal and backups)."""
    out = {}
    for p in sorted(root.rglob("*")):
        name = str(p.relative_to(root))
        if name == "var/lib/seatkit" or name.startswith("var/lib/seatkit/"):
            continue
        st = p.lstat()
        what = (
            "-> " + os.readlink(p)
            if p.is_symlink()
            else "dir"
            if p.is_dir()
            else hashlib.sha256(p.read_bytes()).hexdigest()
        )
        xattrs = (
            sorted(
                (n, os.getxattr(p, n, follow_symlinks=False)) for n in os.listxattr(p, follow_symlinks=False)
            )
            if not p.is_symlink()
            else []
        )
        out[name] = f"{what} {oct(st.st_mode)} {st.st_uid}:{st.st_gid} {xattrs}"
    return out


class Disk:
    """The write-loss model: what of the root a power cut keeps. A write is volatile until it is
    synced: a file's fsync keeps its bytes, a folder's fsync keeps its entries whose bytes were kept
    (so a rename is durable once both are), syncfs or `sync` keeps everything. The boot tools the
    fake host simulates never sync, as the real ones do not. /proc and /sys are the boot's own."""

    def __init__(self, root: Path):
        self.root = root
        self.kept: dict[str, bytes] = {}  # path -> bytes a power cut leaves there
        self.inodes: dict[int, bytes] = {}  # inode -> bytes its fsync kept (a renamed temp file)
        self.sync()

    def files(self) -> dict[str, Path]:
        return {
            str(p.relative_to(self.root)): p
            for p in self.root.rglob("*")
            if p.is_file() and not p.is_symlink() and p.relative_to(self.root).parts[0] not in ("proc", "sys")
        }

    def sync(self) -> None:
        self.kept = {name: p.read_bytes() for name, p in self.files().items()}

    def fsync(self, fd: int) -> None:
        path = Path(os.readlink(f"/proc/self/fd/{fd}"))
        if not path.is_relative_to(self.root):
            return
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            prefix = str(path.relative_to(self.root)) + "/" if path != self.root else ""
            for name in [n for n in self.kept if n.startswith(prefix) and "/" not in n[len(prefix) :]]:
                if not (self.root / name).is_file():
                    del self.kept[name]  # a removal is durable with its folder
            for p in path.iterdir():
                if p.is_file() and p.stat().st_ino in self.inodes:
                    self.kept[str(p.relative_to(self.root))] = self.inodes[p.stat().st_ino]
        else:
            data = path.read_bytes()
            self.inodes[os.fstat(fd).st_ino] = data
            if str(path.relative_to(self.root)) in self.kept:  # its name is durable already
                self.kept[str(path.relative_to(self.root))] = data

    def power_cut(self) -> None:
        """Every write not synced is lost."""
        for name, p in self.files().items():
            if name not in self.kept:
                p.unlink()
        for name, data in self.kept.items():
            target = self.root / name
            if not target.is_file() or target.read_bytes() != data:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
        self.inodes.clear()


class FakeHost:
    def __init__(
        self,
        root: Path,
        stack: str = "grub",
        *,
        vendor: str = "AuthenticAMD",
        driver: str | None = "595.58.03",
        virt: str = "none",
        cpus: int = 64,
        initramfs: tuple[str, ...] = ("update-initramfs",),
        cmdline: str = "quiet splash",
        euid: int = 0,
    ):
        self.root, self.stack, self.virt, self.driver = root, stack, virt, driver
        self.calls: list[list[str]] = []
        self.installed: dict[str, str] = {}  # kernel -> nvidia module version modinfo -k finds
        self.failing: set[str] = set()
        self.write("/proc/cpuinfo", f"processor\t: 0\nvendor_id\t: {vendor}\nflags\t\t: fpu sse2\n")
        self.write("/sys/devices/system/cpu/possible", f"0-{cpus - 1}\n")
        self.write("/etc/os-release", 'ID=ubuntu\nVERSION_ID="24.04"\n')
        self.write("/etc/modprobe.d/blacklist-nouveau.conf", "blacklist nouveau\n")
        if driver:
            self.write(
                "/proc/driver/nvidia/version",
                f"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  {driver}  Release Build\n",
            )
        self.write("/proc/driver/nvidia/params", 'EnableResizableBar: 0\nRegistryDwords: ""\n')
        self.write("/sys/module/nvidia_uvm/parameters/uvm_disable_hmm", "N\n")
        (root / "sys/class/iommu/ivhd0").mkdir(parents=True, exist_ok=True)
        (root / "var/lib").mkdir(
            parents=True, exist_ok=True
        )  # a real host has it; seatkit adds var/lib/seatkit
        self.write(f"/boot/vmlinuz-{KVER}", "kernel image\n")
        for tool in initramfs:
            self.tool(tool)
        getattr(self, f"_make_{stack.replace('-', '_')}")(cmdline)
        for tool in initramfs:  # the pristine host has its images, as a real one does
            self.run([tool])
        self.reboot()
        self.calls.clear()
        self.system = System(root=root, runner=self.run, euid=euid)

    @classmethod
    def reopen(cls, root: Path, *, driver: str | None = "595.58.03", euid: int = 0) -> FakeHost:
        """The GRUB host made at root before, as it was left (another process may have changed it)."""
        host = cls.__new__(cls)
        host.root, host.stack, host.virt, host.driver = root, "grub", "none", driver
        host.calls, host.installed, host.failing = [], {}, set()
        host.system = System(root=root, runner=host.run, euid=euid)
        return host

    # --- tree -----------------------------------------------------------------------------------
    def path(self, path: str) -> Path:
        return self.root / path.lstrip("/")

    def write(self, path: str, text: str) -> None:
        self.path(path).parent.mkdir(parents=True, exist_ok=True)
        self.path(path).write_text(text)

    def read(self, path: str) -> str:
        return self.path(path).read_text()

    def tool(self, name: str) -> None:
        self.write(f"/usr/sbin/{name}", "#!/bin/sh\n")

    def tree(self) -> dict[str, str]:
        return tree(self.root)

    def changing_calls(self) -> list[list[str]]:
        return [c for c in self.calls if c[0] not in READ_ONLY]

    @contextlib.contextmanager
    def write_loss(self) -> Iterator[Disk]:
        """While inside, the root's writes are volatile until synced; the Disk cuts the power."""
        self.disk = Disk(self.root)
        fsync, syncfs = os.fsync, host_system.syncfs
        os.fsync = lambda fd: (fsync(fd), self.disk.fsync(fd))[0]
        host_system.syncfs = lambda folder: (syncfs(folder), self.disk.sync())[0]
        try:
            yield self.disk
        finally:
            os.fsync, host_system.syncfs = fsync, syncfs
            del self.disk

    # --- boot stacks ----------------------------------------------------------------------------
    def _make_grub(self, cmdline: str) -> None:
        self.write(
            "/etc/default/grub",
            f'GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX_DEFAULT="{cmdline}"\nGRUB_CMDLINE_LINUX=""\n',
        )
        self.tool("update-grub")
        self.update_grub()

    def _make_bls(self, cmdline: str) -> None:
        self.write("/etc/os-release", 'ID=fedora\nVERSION_ID="41"\n')
        self.write("/etc/default/grub", 'GRUB_ENABLE_BLSCFG=true\nGRUB_CMDLINE_LINUX="rhgb"\n')
        self.write("/boot/grub2/grub.cfg", "blscfg\n")
        self.write(
            f"/boot/loader/entries/{MACHINE}-{KVER}.conf",
            f"title Fedora\nlinux /vmlinuz-{KVER}\noptions root=UUID=abc ro {cmdline}\n",
        )
        self.write("/etc/kernel/cmdline", f"root=UUID=abc ro {cmdline}\n")
        self.tool("grubby")

    def _make_kernelstub(self, cmdline: str) -> None:
        self.write("/etc/os-release", 'ID=pop\nVERSION_ID="22.04"\n')
        config = {
            "default": {"kernel_options": ["quiet", "splash"]},
            "user": {"kernel_options": cmdline.split(), "esp_path": "/boot/efi"},
        }
        self.write("/etc/kernelstub/configuration", json.dumps(config, indent=2) + "\n")
        self.tool("kernelstub")
        self.kernelstub_entry()

    def _make_systemd_boot(self, cmdline: str) -> None:
        self.write("/etc/os-release", "ID=arch\n")
        self.write("/etc/kernel/cmdline", f"root=UUID=abc rw {cmdline}\n")
        self.write(f"/usr/lib/modules/{KVER}/vmlinuz", "kernel image\n")
        self.tool("kernel-install")
        self.kernel_install(KVER)

    # --- the fake tools -------------------------------------------------------------------------
    def run(self, argv: list[str]) -> tuple[int, str]:
        self.calls.append(list(argv))
        name = argv[0]
        if name in self.failing:
            return 1, f"{name}: simulated failure\n"
        if name == "systemd-detect-virt":  # -c: containers only, as the real one
            if self.virt == "none" or ("-c" in argv and self.virt not in CONTAINERS):
                return 1, "none\n"
            return 0, f"{self.virt}\n"
        if name == "uname":
            return 0, f"{KVER}\n"
        if name == "modinfo":  # -k KERNEL: the module installed for that kernel
            found = (
                self.installed.get(argv[argv.index("-k") + 1], self.driver) if "-k" in argv else self.driver
            )
            return (0, f"{found}\n") if found else (1, "modinfo: ERROR: Module nvidia not found.\n")
        if name == "sync":  # `sync` and `sync -f PATH`: every write so far is durable
            if hasattr(self, "disk"):
                self.disk.sync()
        elif name == "update-grub":
            return self.update_grub()
        elif name in INITRAMFS_TOOLS:
            for version in self.kernels():  # every installed kernel's image, as `-k all` does
                self.initramfs(name, version)
        elif name in LISTERS:  # lsinitramfs and friends: the image's file list
            data = self.path(argv[1]).read_text() if self.path(argv[1]).is_file() else None
            if data is None:
                return 1, f"{name}: {argv[1]}: no such file\n"
            return 0, "".join(f"{m}\n" for m in re.findall(r"^== (.*) ==$", data, re.M))
        elif name == "grubby":
            self.grubby(argv[1:])
        elif name == "kernelstub":
            self.kernelstub(argv[1:])
        elif name == "kernel-install":
            if not self.path(argv[3]).is_file():  # as the real one: no image, no entry
                return 1, f"kernel-install: {argv[3]}: No such file or directory\n"
            self.kernel_install(argv[2])
        else:
            return 127, f"{name}: not found\n"
        return 0, f"{name}: done\n"

    def kernels(self) -> list[str]:
        return sorted(
            {p.name[len("vmlinuz-") :] for p in self.root.glob("boot/vmlinuz-*")}
            | {p.parent.name for p in self.root.glob("usr/lib/modules/*/vmlinuz")}
        )

    def initramfs(self, tool: str, version: str) -> None:
        """An image that lists the modprobe.d files it carries (as `== path ==` headers)."""
        modprobe = "".join(
            f"== etc/modprobe.d/{p.name} ==\n{p.read_text()}"
            for p in sorted(self.path("/etc/modprobe.d").glob("*.conf"))
            if p.is_file()
        )
        self.write(f"/boot/initrd.img-{version}", f"initramfs by {tool}\n")  # written in two goes
        self.inside(tool)
        self.write(f"/boot/initrd.img-{version}", f"initramfs by {tool}\n{modprobe}")

    def install_kernel(self, version: str) -> None:
        """What a kernel package does: the image, its modules folder, its initramfs, its boot entry."""
        self.write(f"/boot/vmlinuz-{version}", "kernel image\n")
        if self.stack == "systemd-boot":
            self.write(f"/usr/lib/modules/{version}/vmlinuz", "kernel image\n")
        self.initramfs("update-initramfs", version)
        if self.stack == "systemd-boot":
            self.kernel_install(version)
        elif self.stack == "bls":  # kernel-install's 20-grub plugin: options from /etc/kernel/cmdline
            self.write(
                f"/boot/loader/entries/{MACHINE}-{version}.conf",
                f"title Fedora\nlinux /vmlinuz-{version}\noptions {self.read('/etc/kernel/cmdline').strip()}\n",
            )
        elif self.stack == "grub":
            self.update_grub()

    def remove_kernel(self, version: str) -> None:
        for path in (
            f"boot/vmlinuz-{version}",
            f"boot/initrd.img-{version}",
            f"usr/lib/modules/{version}/vmlinuz",
            f"boot/efi/loader/entries/{MACHINE}-{version}.conf",
            f"boot/loader/entries/{MACHINE}-{version}.conf",
        ):
            self.path(path).unlink(missing_ok=True)
        if self.path(f"usr/lib/modules/{version}").exists():
            self.path(f"usr/lib/modules/{version}").rmdir()

    def inside(self, tool: str) -> None:
        """A kill point in the middle of a tool's work (its files half written)."""
        if hasattr(self, "system"):
            self.system.fault(f"inside {tool}")

    def update_grub(self) -> tuple[int, str]:
        """Like grub-mkconfig: source the defaults under set -e, write grub.cfg.new, then rename."""
        script = (
            'set -e; for f in "$1"/etc/default/grub "$1"/etc/default/grub.d/*.cfg; do '
            'if [ -f "$f" ]; then . "$f"; fi; done; '
            'printf "%s\\n%s" "$GRUB_CMDLINE_LINUX" "$GRUB_CMDLINE_LINUX_DEFAULT"'
        )
        done = subprocess.run(["sh", "-c", script, "sh", str(self.root)], capture_output=True)
        if done.returncode:
            return 1, done.stderr.decode("utf-8", "replace")
        linux, default = (done.stdout.decode().split("\n") + [""])[:2]
        self.write("/boot/grub/grub.cfg.new", "#\n# DO NOT EDIT THIS FILE\n")
        self.inside("update-grub")
        self.write(
            "/boot/grub/grub.cfg.new",
            f"menuentry 'Ubuntu' {{\n\tlinux\t/boot/vmlinuz-{KVER} root=UUID=abc ro {linux} {default}\n}}\n"
            f"menuentry 'Ubuntu (recovery mode)' {{\n\tlinux\t/boot/vmlinuz-{KVER} root=UUID=abc ro single {linux}\n}}\n"
            + (
                "".join(self.read("/etc/grub.d/40_custom").splitlines(keepends=True)[2:])  # past `exec tail`
                if self.path("/etc/grub.d/40_custom").is_file()
                else ""
            ),
        )
        self.path("/boot/grub/grub.cfg.new").rename(self.path("/boot/grub/grub.cfg"))
        return 0, "Generating grub configuration file ...\ndone\n"

    def grubby(self, args: list[str]) -> None:
        add = next((a.split("=", 1)[1].split() for a in args if a.startswith("--args=")), [])
        remove = next((a.split("=", 1)[1].split() for a in args if a.startswith("--remove-args=")), [])
        for entry in self.root.glob("boot/loader/entries/*.conf"):
            lines = entry.read_text().splitlines()
            for i, line in enumerate(lines):
                if line.startswith("options "):
                    tokens = [t for t in line.split()[1:] if t not in remove]
                    lines[i] = "options " + " ".join(tokens + [t for t in add if t not in tokens])
            entry.write_text("\n".join(lines) + "\n")
            self.inside("grubby")

    def kernelstub(self, args: list[str]) -> None:
        config = json.loads(self.read("/etc/kernelstub/configuration"))
        options = config["user"]["kernel_options"]
        pairs = dict(zip(args[::2], args[1::2], strict=False))
        options = [t for t in options if t not in pairs.get("-d", "").split()]
        options += [t for t in pairs.get("-a", "").split() if t not in options]
        config["user"]["kernel_options"] = options
        self.write("/etc/kernelstub/configuration", json.dumps(config, indent=2) + "\n")
        self.inside("kernelstub")
        self.kernelstub_entry()

    def kernelstub_entry(self) -> None:
        options = json.loads(self.read("/etc/kernelstub/configuration"))["user"]["kernel_options"]
        self.write(
            "/boot/efi/loader/entries/Pop_OS-current.conf",
            f"title Pop!_OS\nlinux /EFI/Pop_OS/vmlinuz.efi\noptions root=UUID=abc ro {' '.join(options)}\n",
        )

    def kernel_install(self, version: str) -> None:
        self.inside("kernel-install")
        # like 90-loaderentry.install: the file's words, whitespace runs made one space
        options = b" ".join(self.path("/etc/kernel/cmdline").read_bytes().split())
        self.path("/boot/efi/loader/entries").mkdir(parents=True, exist_ok=True)
        self.path(f"/boot/efi/loader/entries/{MACHINE}-{version}.conf").write_bytes(
            f"title Arch\nlinux /{MACHINE}/{version}/linux\noptions ".encode() + options + b"\n"
        )

    # --- reboot: what is configured becomes live --------------------------------------------------
    def configured_cmdline(self) -> str:
        if self.stack == "grub":
            line = next(
                row
                for row in self.read("/boot/grub/grub.cfg").splitlines()
                if row.strip().startswith("linux")
            )
            return " ".join(line.split()[2:])
        entry = next(self.root.glob("boot/loader/entries/*.conf"), None) or next(
            self.root.glob("boot/efi/loader/entries/*.conf")
        )
        return next(row for row in entry.read_text().splitlines() if row.startswith("options ")).split(
            None, 1
        )[1]

    def reboot(self) -> None:
        tokens = shlex.split(self.configured_cmdline())
        self.write("/proc/cmdline", f"BOOT_IMAGE=/vmlinuz-{KVER} {' '.join(tokens)}\n")
        self.write("/proc/sys/kernel/random/boot_id", f"{uuid.uuid4()}\n")
        system = System(root=self.root)
        nvidia, _ = modprobe.options(system, "nvidia", tokens)  # as kmod: the command line last
        uvm, _ = modprobe.options(system, "nvidia_uvm", tokens)
        dwords = nvidia.get("NVreg_RegistryDwords", "").strip('"')
        self.write(
            "/proc/driver/nvidia/params",
            f'EnableResizableBar: {int("EnableResizableBar=1" in dwords)}\nRegistryDwords: "{dwords}"\n',
        )
        self.write(
            "/sys/module/nvidia_uvm/parameters/uvm_disable_hmm",
            "Y\n" if uvm.get("uvm_disable_hmm") == "1" else "N\n",
        )
        units = self.path("/sys/class/iommu/ivhd0")
        if "iommu=off" in tokens and units.exists():
            units.rmdir()
        elif "iommu=off" not in tokens:
            units.mkdir(parents=True, exist_ok=True)


ACK = host_plan.Choices(acknowledge_iommu_off=True)


def make_plan(host, profile="paper", choices=ACK):
    return host_plan.build(host_profiles.load(profile), host.system, choices)


def apply(host, profile="paper", choices=ACK):
    return change.apply(make_plan(host, profile, choices), host.system)


def edited_tokens(tokens: list[str], edit: cmdline.Edit) -> list[str]:
    """The token list an edit describes: the replaced ones gone, the added ones last."""
    dropped = {i for i, _ in edit.replaced}
    return [t for i, t in enumerate(tokens) if i not in dropped] + list(edit.added)


def unedited_tokens(tokens: list[str], edit: cmdline.Edit) -> list[str]:
    """The list edited_tokens started from: ours (appended last) out, the replaced ones back."""
    out = list(tokens)
    for token in edit.added:
        del out[len(out) - 1 - out[::-1].index(token)]
    for index, token in sorted(edit.replaced):
        out.insert(index, token)
    return out
