"""What kind of host this is: boot stack, initramfs generator, driver, platform.

Each boot stack is recognised by its own signals, independently; more than one match, or none, is
a refusal, because editing the wrong boot configuration is worse than editing none. Where the
firmware says which loader booted (efivars), its word decides, and evidence that disagrees with it
is a refusal too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from seatkit.host import state
from seatkit.host.system import System

ESPS = ("/boot/efi", "/efi", "/boot")
GLOBAL_GUID = "8be4df61-93ca-11d2-aa0d-00e098032b8c"  # BootCurrent, Boot####
# What /proc/1/cgroup names when PID 1 runs in a container (cgroup v1 paths; v2 shows "0::/"):
# a path part, never a bare word, since a VM that runs docker has a docker.service.
CONTAINER_CGROUP = re.compile(
    r"/(docker|kubepods|lxc|containerd|libpod|podman|buildkit)[/-]|machine\.slice/.*nspawn"
)
INITRAMFS = {  # generator -> the command that rebuilds every installed kernel's image
    "update-initramfs": ["update-initramfs", "-u", "-k", "all"],
    "dracut": ["dracut", "--force", "--regenerate-all"],
    "mkinitcpio": ["mkinitcpio", "-P"],
}


@dataclass
class Facts:
    os_id: str | None
    stack: str | None
    stack_why: str
    initramfs: list[str] | None
    initramfs_why: str
    vendor: state.Vendor | None
    driver: str | None
    virt: str | None
    cpus: int | None
    kernel: str | None
    boot_id: str | None
    euid: int
    ukis: list[str] = field(default_factory=list)
    container: str | None = None
    next_kernel: str | None = None
    next_driver: str | None = None  # the nvidia module that kernel loads (modinfo -k)

    def to_json(self) -> dict:
        return dict(self.__dict__)


def os_release(system: System) -> dict[str, str]:
    out = {}
    for line in (system.read("/etc/os-release") or system.read("/usr/lib/os-release") or "").splitlines():
        name, _, value = line.partition("=")
        if value:
            out[name.strip()] = value.strip().strip('"')
    return out


def grub_uses_bls(system: System) -> bool:
    return bool(re.search(r"^\s*GRUB_ENABLE_BLSCFG=\"?true", system.read("/etc/default/grub") or "", re.M))


def loader_entries(system: System) -> list[str]:
    return [
        f"/{p.relative_to(system.root)}" for esp in ESPS for p in system.glob(f"{esp}/loader/entries/*.conf")
    ]


def stack_signals(system: System) -> dict[str, str]:
    """Every boot stack whose signals hold, with the evidence."""
    found = {}
    if system.exists("/etc/NIXOS") or os_release(system).get("ID") == "nixos":
        found["nixos"] = "/etc/NIXOS or ID=nixos"
    if system.exists("/run/ostree-booted"):
        found["ostree"] = "/run/ostree-booted"
    if system.exists("/etc/kernelstub/configuration") and system.which("kernelstub"):
        found["kernelstub"] = "/etc/kernelstub/configuration and kernelstub"
    # RHEL 8 on UEFI keeps grub.cfg on the ESP (/boot/efi/EFI/redhat/grub.cfg)
    grub_cfg = (
        system.exists("/boot/grub/grub.cfg")
        or system.exists("/boot/grub2/grub.cfg")
        or bool(system.glob("/boot/efi/EFI/*/grub.cfg"))
    )
    firmware = firmware_loader(system)[0]
    if (
        grub_cfg
        and grub_uses_bls(system)
        and system.exists("/boot/loader/entries")
        and system.which("grubby")
    ):
        found["bls"] = "GRUB_ENABLE_BLSCFG=true, /boot/loader/entries and grubby"
    if system.exists("/boot/grub/grub.cfg") and system.which("update-grub") and not grub_uses_bls(system):
        found["grub"] = "/boot/grub/grub.cfg and update-grub"
    if (
        loader_entries(system)
        and system.which("kernel-install")
        and not system.exists("/etc/kernelstub/configuration")
        and (not grub_cfg or firmware == "systemd-boot")
    ):
        found["systemd-boot"] = "loader entries, kernel-install and " + (
            "the firmware's word" if grub_cfg else "no grub.cfg"
        )
    return found


def firmware_loader(system: System) -> tuple[str | None, str]:
    """The loader the firmware says booted this system: systemd-boot sets LoaderInfo and
    LoaderEntrySelected; else BootCurrent names the Boot#### entry, whose path names the loader."""
    for name in ("LoaderInfo", "LoaderEntrySelected"):
        text = state.efivar_text(system, name)
        if text is not None:
            if name == "LoaderEntrySelected" or "systemd-boot" in text:
                return "systemd-boot", f"efivar {name}={text}"
    current = state.efivar(system, "BootCurrent", GLOBAL_GUID)
    if current and len(current) >= 2:
        entry = f"Boot{int.from_bytes(current[:2], 'little'):04X}"
        text = (state.efivar(system, entry, GLOBAL_GUID) or b"").decode("utf-16-le", "replace").lower()
        for loader, marks in (("systemd-boot", ("systemd-boot", "\\systemd\\")), ("grub", ("grub", "shim"))):
            if any(m in text for m in marks):
                return loader, f"efivar BootCurrent={entry}, whose path names {loader}"
    return None, "the firmware does not say (no efivars: BIOS boot, or efivarfs not mounted)"


# Which stacks each loader boots: BLS and kernelstub entries are read by GRUB and systemd-boot.
BOOTS = {"grub": {"grub", "bls"}, "systemd-boot": {"systemd-boot", "kernelstub"}}


def boot_stack(system: System) -> tuple[str | None, str]:
    found = stack_signals(system)
    for image_based in ("nixos", "ostree"):  # their own tools own the boot entries, whatever else is there
        if image_based in found:
            return image_based, found[image_based]
    firmware, said = firmware_loader(system)
    if firmware:
        theirs = {k: v for k, v in found.items() if k in BOOTS[firmware]}
        if not theirs:
            return None, (
                f"the firmware booted {firmware} ({said}), but its signals are not here"
                + (f"; found instead: {'; '.join(f'{k} ({v})' for k, v in found.items())}" if found else "")
                + ": editing another loader's files would change nothing"
            )
        found = theirs
    if len(found) == 1:
        ((name, why),) = found.items()
        return name, why + (f"; {said}" if firmware else "")
    if not found:
        return None, (
            "no boot stack recognised (GRUB with update-grub, GRUB with BLS and grubby, "
            "kernelstub, systemd-boot with kernel-install, NixOS)"
        )
    return None, "more than one boot stack matches: " + "; ".join(f"{k} ({v})" for k, v in found.items())


def initramfs(system: System) -> tuple[list[str] | None, str]:
    found = [name for name in INITRAMFS if system.which(name)]
    if len(found) == 1:
        return INITRAMFS[found[0]], found[0]
    if not found:
        return None, "no initramfs generator found (update-initramfs, dracut, mkinitcpio)"
    return None, f"more than one initramfs generator is installed ({', '.join(found)})"


def dracut_hostonly(system: System) -> bool:
    """Whether dracut's configuration asks for hostonly images (the ones that copy /etc/modprobe.d)."""
    by_name = {  # one list sorted by file name; /etc's file replaces /usr/lib's of the same name
        p.name: f"/{p.relative_to(system.root)}"
        for d in ("/usr/lib/dracut/dracut.conf.d", "/etc/dracut.conf.d")
        for p in system.glob(f"{d}/*.conf")
    }
    files = ["/etc/dracut.conf"] + [by_name[name] for name in sorted(by_name)]
    found = None
    for path in files:  # later files win, as dracut reads them
        for match in re.finditer(r"^\s*hostonly=[\"']?(yes|no)", system.read(path) or "", re.M):
            found = match.group(1) == "yes"
    return bool(found)


def virtualisation(system: System) -> str | None:
    """The hypervisor or container kind, or None on bare metal."""
    rc, output = system.run(["systemd-detect-virt"])
    kind = output.strip()
    if rc == 0 and kind and kind != "none":
        return kind
    if rc not in (0, 1) and re.search(
        r"^flags\s*:.*\bhypervisor\b", system.read("/proc/cpuinfo") or "", re.M
    ):
        return "a hypervisor (cpuinfo flag)"
    return None


def container(system: System) -> str | None:
    """The sign that this runs in a container (which hides the host's boot files and driver), or
    None. A VM is no container: its boot files and modules are its own."""
    for marker, kind in (("/.dockerenv", "docker"), ("/run/.containerenv", "podman")):
        if system.path(marker).exists():
            return f"{kind} ({marker} exists)"
    rc, output = system.run(["systemd-detect-virt", "--container"])
    if rc == 0 and output.strip() not in ("", "none"):
        return f"{output.strip()} (systemd-detect-virt --container)"
    found = CONTAINER_CGROUP.search(system.read("/proc/1/cgroup") or "")
    return f"{found.group(1) or found.group(0)} (/proc/1/cgroup)" if found else None


def possible_cpus(system: System) -> int | None:
    text = (system.read("/sys/devices/system/cpu/possible") or "").strip()
    if not text:
        return None
    count = 0
    for part in text.split(","):
        low, _, high = part.partition("-")
        count += int(high or low) - int(low) + 1
    return count


def driver(system: System) -> str | None:
    found = state.driver_version(system)
    if found:
        return found
    rc, output = system.run(["modinfo", "-F", "version", "nvidia"])
    return output.strip() if rc == 0 and output.strip() else None


def next_kernel(system: System, running: str | None) -> str | None:
    """The kernel the next boot loads: the default entry's (GRUB's default, the loader entry that
    boots), else the running one."""
    found = state.grub_default_args(system)
    if found and "vmlinuz-" in found[2]:
        return found[2].rsplit("vmlinuz-", 1)[1]
    entry = state.default_entry(system)
    for line in entry.read_text(errors="replace").splitlines() if entry else []:
        words = line.split()
        if len(words) == 2 and words[0] == "version":
            return words[1]
        if len(words) == 2 and words[0] == "linux":
            named = re.search(r"vmlinuz-(\S+)$", words[1]) or re.search(r"/([^/]+)/linux$", words[1])
            if named:
                return named.group(1)
    return running


def next_driver(system: System, kernel: str | None) -> str | None:
    """The version of the nvidia module installed for that kernel: the one its boot loads."""
    if kernel is None:
        return None
    rc, output = system.run(["modinfo", "-k", kernel, "-F", "version", "nvidia"])
    return output.strip() if rc == 0 and output.strip() else None


# What dpkg, editors and old signing schemes leave beside a kernel or an image: no kernel boots it.
LEFTOVER = re.compile(r"\.(new|bak|old|dpkg-\w+|efi\.signed)$|~")


def kernels(system: System) -> list[tuple[str, str]]:
    """Installed kernels as (version, image path) for kernel-install."""
    found = {
        p.parent.name: f"/{p.relative_to(system.root)}" for p in system.glob("/usr/lib/modules/*/vmlinuz")
    }
    for p in system.glob("/boot/vmlinuz-*"):
        if not LEFTOVER.search(p.name):
            found.setdefault(p.name[len("vmlinuz-") :], f"/{p.relative_to(system.root)}")
    return sorted(found.items())


def facts(system: System) -> Facts:
    stack, stack_why = boot_stack(system)
    regen, regen_why = initramfs(system)
    rc, uname = system.run(["uname", "-r"])
    running = uname.strip() if rc == 0 else None
    upcoming = next_kernel(system, running)
    return Facts(
        os_id=os_release(system).get("ID"),
        stack=stack,
        stack_why=stack_why,
        initramfs=regen,
        initramfs_why=regen_why,
        vendor=state.cpu_vendor(system),
        driver=driver(system),
        virt=virtualisation(system),
        cpus=possible_cpus(system),
        kernel=uname.strip() if rc == 0 else None,
        boot_id=state.boot_id(system),
        euid=system.euid,
        container=container(system),
        next_kernel=upcoming,
        next_driver=next_driver(system, upcoming),
        ukis=[
            f"/{p.relative_to(system.root)}" for esp in ESPS for p in system.glob(f"{esp}/EFI/Linux/*.efi")
        ],
    )
