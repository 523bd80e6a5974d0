"""Written is not applied: after regeneration, read the command line back from what the boot
tool produced (grub.cfg's default entry, the BLS or loader entries) and say what is lost; after a
rollback, read every generated entry and initramfs back and say what of seatkit's change remains."""

from __future__ import annotations

from collections.abc import Sequence

from seatkit.errors import SeatError
from seatkit.host import boot_stacks, cmdline, detect, grub_defaults, state
from seatkit.host.ops import GRUB_DROPIN, KERNEL_CMDLINE, MODPROBE_FILE
from seatkit.host.plan import Plan
from seatkit.host.system import System


def generated(system: System, stack: str) -> list[tuple[str, list[str]]]:
    """(file, tokens) of every generated entry the next boot may use."""
    if stack == "grub":
        found = state.grub_default_args(system)
        return [(found[1], cmdline.split(found[0]))] if found else [("/boot/grub/grub.cfg", [])]
    return [(e, lines[0]) for e in detect.loader_entries(system) if (lines := _options(system, e))]


def _options(system: System, entry: str) -> list[list[str]]:
    """The tokens of each options line of a loader entry."""
    lines = (system.read_bytes(entry) or b"").splitlines()
    return [cmdline.split(line[len(b"options") :]) for line in lines if line.startswith(b"options")]


def lost(system: System, plan: Plan) -> str:
    """Empty when every generated entry carries the edit; else what is lost where, and why."""
    if (
        plan.edit is None
        or plan.edit.empty
        or plan.facts.stack not in ("grub", "bls", "systemd-boot", "kernelstub")
    ):
        return ""
    entries = generated(system, plan.facts.stack)
    problems = []
    for path, tokens in entries or [("the loader entries", [])]:
        missing = [t for t in plan.edit.added if t not in tokens] + [
            t for _, t in plan.edit.replaced if t in tokens
        ]
        if missing:
            problems.append(f"{path} lacks {' '.join(missing)}" if tokens else f"{path} has no command line")
    if problems and plan.facts.stack == "grub":
        problems += [
            f"{o} after {GRUB_DROPIN} (it overrides seatkit's drop-in)"
            for o in grub_defaults.overriders(system, GRUB_DROPIN)
        ]
    return "; ".join(problems)


GRUB_CFGS = ("/boot/grub/grub.cfg", "/boot/grub2/grub.cfg")
LISTERS = {"update-initramfs": "lsinitramfs", "dracut": "lsinitrd", "mkinitcpio": "lsinitcpio"}


def boot_lines(system: System) -> list[tuple[str, list[str]]]:
    """(file, tokens) of every kernel line any boot entry has: every `linux` line of every grub.cfg
    (recovery and older kernels too), every options line of every loader entry."""
    out = []
    cfgs = list(GRUB_CFGS) + [
        f"/{p.relative_to(system.root)}" for p in system.glob("/boot/efi/EFI/*/grub.cfg")
    ]
    for path in cfgs:
        for line in (system.read_bytes(path) or b"").splitlines():
            words = line.split()
            if len(words) > 1 and words[0].startswith(b"linux"):
                out.append((path, cmdline.split(b" ".join(words[2:]))))
    return out + [(e, tokens) for e in detect.loader_entries(system) for tokens in _options(system, e)]


def images(system: System) -> list[str]:
    """Every initramfs a boot may load: the generators' images in /boot, and the copies loader
    entries name on the ESP (kernel-install copies the image there)."""
    found = {
        f"/{p.relative_to(system.root)}"
        for pattern in ("/boot/initrd.img-*", "/boot/initramfs-*.img")
        for p in system.glob(pattern)
        if not detect.LEFTOVER.search(p.name)
    }
    for entry in detect.loader_entries(system):
        esp = entry[: entry.index("/loader/entries/")]
        for line in (system.read(entry) or "").splitlines():
            words = line.split()
            if (
                len(words) == 2 and words[0] == "initrd"
            ):  # relative to the ESP (or, as some write it, absolute)
                found.update(p for p in (esp + words[1], words[1]) if system.exists(p))
    return sorted(found)


def operators_tokens(system: System, stack: str | None) -> set[str]:
    """The tokens the host's own sources give now, seatkit's undone: a kit token found there was put
    back by the operator (after apply, on purpose), so a boot line that carries it is theirs."""
    try:
        if stack == "grub":
            return set(cmdline.split(grub_defaults.command_line(system, grub_defaults.sources(system))))
        if stack == "kernelstub":
            return set(boot_stacks.kernelstub_tokens(system))
    except SeatError:  # what cannot be read gives the operator nothing
        return set()
    return set(cmdline.split(system.read_bytes(KERNEL_CMDLINE) or b""))


def remains(
    system: System,
    tokens: list[str],
    generator: str | None,
    module_file_gone: bool,
    lines_before: Sequence = (),
) -> list[str]:
    """What of seatkit's change a boot could still get: its tokens in any boot line but one that
    was there, word for word, before apply (a rescue or custom entry of the operator's), its module
    file in any initramfs (checked only once the file is gone from /etc). Empty is the proof."""
    theirs = [(path, list(found)) for path, found in lines_before]
    out = [
        f"{path} still carries {' '.join(t for t in tokens if t in found)}"
        for path, found in boot_lines(system)
        if (path, found) not in theirs and any(t in found for t in tokens)
    ]
    if module_file_gone and generator in LISTERS:
        for image in images(system):
            rc, output = system.run([LISTERS[generator], image])
            if rc != 0:
                out.append(f"{image} could not be listed by {LISTERS[generator]}: {output.strip()[-300:]}")
            elif MODPROBE_FILE.lstrip("/") in output:
                out.append(f"{image} still holds {MODPROBE_FILE}")
    return out
