"""What the host says about the four settings: configured on disk, and live in the running system.

Each reader returns a value, or None with the reason it could not be read, so a status row is
always filled or explained.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

from seatkit.host import cmdline, modprobe
from seatkit.host.system import System
from seatkit.seat.host_profiles import parse_dwords

IOMMU_KEYS = ("iommu", "amd_iommu", "intel_iommu")
LOADER_ESPS = ("/boot", "/boot/efi", "/efi")
T = TypeVar("T")
Vendor = Literal["amd", "intel"]


@dataclass
class Reading(Generic[T]):
    value: T | None
    source: str  # where it was read, or why it could not be

    @property
    def known(self) -> bool:
        return self.value is not None


def iommu_tokens(text: str) -> set[str]:
    return {t for t in cmdline.split(text) if t.split("=", 1)[0] in IOMMU_KEYS}


def cpu_vendor(system: System) -> Vendor | None:
    text = system.read("/proc/cpuinfo") or ""
    if "AuthenticAMD" in text:
        return "amd"
    if "GenuineIntel" in text:
        return "intel"
    return None


def boot_id(system: System) -> str | None:
    text = system.read("/proc/sys/kernel/random/boot_id")
    return text.strip() if text else None


def driver_version(system: System) -> str | None:
    match = re.search(
        r"Kernel Module\s+(?:for \S+\s+)?([0-9]+\.[0-9.]+)", system.read("/proc/driver/nvidia/version") or ""
    )
    return match.group(1) if match else None


# --- live -------------------------------------------------------------------------------------


def live_cmdline(system: System) -> Reading[set[str]]:
    text = system.read("/proc/cmdline")
    if text is None:
        return Reading(None, "/proc/cmdline unreadable")
    return Reading(iommu_tokens(text), "/proc/cmdline")


def live_iommu_facts(system: System) -> dict:
    units = system.entries("/sys/class/iommu")
    groups = system.entries("/sys/kernel/iommu_groups")
    types = sorted({(system.read(f"/sys/kernel/iommu_groups/{g}/type") or "?").strip() for g in groups or []})
    return {
        "iommu_units": units,
        "iommu_groups": len(groups) if groups is not None else None,
        "iommu_group_types": types,
    }


def nvidia_params(system: System) -> dict[str, str] | None:
    text = system.read("/proc/driver/nvidia/params")
    if text is None:
        return None
    return {
        k.strip(): v.strip() for k, _, v in (line.partition(":") for line in text.splitlines() if ":" in line)
    }


def live_dwords(system: System) -> Reading[dict[str, str]]:
    params = nvidia_params(system)
    if params is None:
        return Reading(
            None,
            "/proc/driver/nvidia/params absent: the nvidia module is not loaded "
            "(or this is a container or VM that hides it)",
        )
    return Reading(parse_dwords(params.get("RegistryDwords", "")), "/proc/driver/nvidia/params")


def live_hmm_disabled(system: System) -> Reading[bool]:
    text = system.read("/sys/module/nvidia_uvm/parameters/uvm_disable_hmm")
    if text is None:
        return Reading(
            None, "/sys/module/nvidia_uvm/parameters/uvm_disable_hmm absent: nvidia_uvm is not loaded"
        )
    return Reading(text.strip() in ("Y", "1"), "/sys/module/nvidia_uvm/parameters/uvm_disable_hmm")


# --- configured -------------------------------------------------------------------------------

MENU = re.compile(  # the title, then the id update-grub writes ($menuentry_id_option) or GRUB's --id
    r"""^\s*(menuentry|submenu)\s+(?:'([^']*)'|"([^"]*)")"""
    r"""(?:.*?(?:\$menuentry_id_option|--id)[=\s]\s*'?([^'\s{]+)'?)?"""
)


def grub_entries(text: str) -> list[tuple[list[tuple[str, str | None]], list[str], int]]:
    """grub.cfg's menu entries in order, each as GRUB counts them: the (title, id) path through
    submenus, the entry's `linux` line words (none for a chainloader's), the number of its line."""
    out: list[tuple[list[tuple[str, str | None]], list[str], int]] = []
    stack: list[tuple[str, tuple[str, str | None], int]] = []
    depth = 0
    for number, line in enumerate(text.splitlines()):
        found = MENU.match(line)
        if found:
            stack.append((found.group(1), (found.group(2) or found.group(3) or "", found.group(4)), depth))
            if found.group(1) == "menuentry":
                out.append(([node for _, node, _ in stack], [], number))
        words = line.split()
        in_entry = stack and stack[-1][0] == "menuentry" and not out[-1][1]
        if len(words) > 1 and words[0].startswith("linux") and in_entry:
            out[-1][1].extend(words)
        depth += line.count("{") - line.count("}")
        while stack and depth <= stack[-1][2]:
            stack.pop()
    return out


def grub_default(system: System, text: str) -> str:
    """GRUB's default: the saved entry when grub.cfg defaults to it, else `set default`'s value."""
    found = [v for v in re.findall(r'^\s*set default="?([^"\n]*)"?', text, re.M) if "next_entry" not in v]
    default = found[0] if found else "0"  # next_entry is grub-reboot's one-off
    if "saved_entry" in default:
        env = next(filter(None, (system.read(p) for p in ("/boot/grub/grubenv", "/boot/grub2/grubenv"))), "")
        saved = re.search(r"^saved_entry=(.*)$", env, re.M)
        default = (saved.group(1).strip() if saved else "") or "0"
    return default


def grub_default_entry(system: System, text: str) -> tuple[list[str], int] | None:
    """The `linux` words and `menuentry` line number of the entry GRUB boots by default (its saved
    entry, a title, an id, an index, a `>` path through submenus); None when the default names none."""
    entries = grub_entries(text)
    parts = grub_default(system, text).split(">")
    for nodes, words, start in entries:  # a title or id path, matched part by part
        if len(nodes) == len(parts) and all(p in node for p, node in zip(parts, nodes, strict=True)):
            return (words, start) if words else None
    if not all(p.isdigit() for p in parts):
        return None
    level = entries  # an index path: count entries at each level
    for depth, part in enumerate(parts):
        firsts = list(dict.fromkeys(n[depth] for n, _, _ in level if len(n) > depth))
        if int(part) >= len(firsts):
            return None
        level = [e for e in level if len(e[0]) > depth and e[0][depth] == firsts[int(part)]]
    if len(level[0][0]) != len(parts) or not level[0][1]:  # a submenu, or an entry that boots no Linux
        return None
    return level[0][1], level[0][2]


def grub_default_args(system: System) -> tuple[str, str, str] | None:
    """The kernel arguments of the grub.cfg entry that boots by default (the first where its
    default names none), the file, the image."""
    for path in ("/boot/grub/grub.cfg", "/boot/grub2/grub.cfg"):
        text = system.read(path) or ""
        linux = [words for _, words, _ in grub_entries(text) if words]
        if linux:
            words = (grub_default_entry(system, text) or (linux[0],))[0]
            return " ".join(words[2:]), path, words[1]
    return None


def _version_key(name: str) -> list:
    """Versions compared as systemd-boot and rpm do: digit runs as numbers, the rest as text."""
    return [
        (0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.findall(r"\d+|[^\d]+", name)
    ]


EFIVARS = "/sys/firmware/efi/efivars"
LOADER_GUID = "4a67b082-0a4c-41cf-b6c7-440b29bb8c4f"  # systemd-boot's own variables


def efivar(system: System, name: str, guid: str = LOADER_GUID) -> bytes | None:
    data = system.read_bytes(f"{EFIVARS}/{name}-{guid}")
    return data[4:] if data and len(data) > 4 else None  # the first four bytes are its attributes


def efivar_text(system: System, name: str, guid: str = LOADER_GUID) -> str | None:
    value = efivar(system, name, guid)
    return value.decode("utf-16-le", "replace").rstrip("\0") if value is not None else None


def _loader_patterns(system: System) -> list[str]:
    """systemd-boot's choice in its order: the one-shot entry (`bootctl set-oneshot`), the default
    variable (`bootctl set-default`), then loader.conf's `default` (`@saved`: the entry booted last)."""
    out = [
        v for v in (efivar_text(system, "LoaderEntryOneShot"), efivar_text(system, "LoaderEntryDefault")) if v
    ]
    for esp in LOADER_ESPS:
        for line in (system.read(f"{esp}/loader/loader.conf") or "").splitlines():
            words = line.split()
            if len(words) == 2 and words[0] == "default":
                saved = efivar_text(system, "LoaderEntryLastBooted") if words[1] == "@saved" else words[1]
                out += [saved] if saved and not saved.startswith("@") else []
    return out


def default_entry(system: System):
    """The loader entry that boots by default: systemd-boot's variables and loader.conf's `default`
    pattern, GRUB's saved_entry (BLS), else the newest version (systemd-boot sorts entries by
    version, newest first)."""
    entries = [p for esp in LOADER_ESPS for p in system.glob(f"{esp}/loader/entries/*.conf")]
    if not entries:
        return None
    for pattern in _loader_patterns(system):  # one that names no entry falls through, as in systemd-boot
        found = [e for e in entries if fnmatch.fnmatch(e.name, pattern) or fnmatch.fnmatch(e.stem, pattern)]
        if found:
            return max(found, key=lambda e: _version_key(e.stem))
    for env in ("/boot/grub2/grubenv", "/boot/grub/grubenv", "/boot/efi/EFI/redhat/grubenv"):
        saved = re.search(r"^saved_entry=(.+)$", system.read(env) or "", re.M)
        found = [e for e in entries if saved and e.stem == saved.group(1).strip()]
        if found:
            return found[0]
    return max(entries, key=lambda e: _version_key(e.stem))


def configured_args(system: System) -> Reading[str]:
    """The command line of the boot configuration the next boot will use (generated files first)."""
    grub = grub_default_args(system)
    if grub:
        return Reading(grub[0], grub[1])
    entry = default_entry(system)
    if entry:
        options = [
            line for line in entry.read_text(errors="replace").splitlines() if line.startswith("options")
        ]
        if options:
            return Reading(options[0][len("options") :], f"/{entry.relative_to(system.root)}")
    text = system.read("/etc/kernel/cmdline")
    if text is not None:
        return Reading(text, "/etc/kernel/cmdline")
    return Reading(
        None, "no generated boot configuration found (grub.cfg, loader entries, /etc/kernel/cmdline)"
    )


def configured_cmdline(system: System) -> Reading[set[str]]:
    """IOMMU tokens of the boot configuration the next boot will use."""
    found = configured_args(system)
    return Reading(iommu_tokens(found.value) if found.value is not None else None, found.source)


def next_boot_tokens(system: System) -> list[str]:
    found = configured_args(system)
    return cmdline.split(found.value) if found.value is not None else []


def configured_dwords(system: System) -> Reading[dict[str, str]]:
    options, files = modprobe.options(system, "nvidia", next_boot_tokens(system))
    return Reading(
        parse_dwords(options.get("NVreg_RegistryDwords", "")),
        ", ".join(files) or "no modprobe.d file sets nvidia options",
    )


def configured_hmm_disabled(system: System) -> Reading[bool]:
    options, files = modprobe.options(system, "nvidia_uvm", next_boot_tokens(system))
    return Reading(
        options.get("uvm_disable_hmm") in ("1", "Y", "y"),
        ", ".join(files) or "no modprobe.d file sets nvidia_uvm options",
    )
