"""Written is not applied: after regeneration, read the command line back from what the boot
tool produced (grub.cfg's default entry, the BLS or loader entries) and say what is lost."""

from __future__ import annotations

from seatkit.host import cmdline, detect, grub_defaults, state
from seatkit.host.plan import GRUB_DROPIN, Plan
from seatkit.host.system import System


def generated(system: System, stack: str) -> list[tuple[str, list[str]]]:
    """(file, tokens) of every generated entry the next boot may use."""
    if stack == "grub":
        found = state.grub_default_args(system)
        return [(found[1], cmdline.split(found[0]))] if found else [("/boot/grub/grub.cfg", [])]
    entries = detect.loader_entries(system)
    out = []
    for entry in entries:
        for line in (system.read_bytes(entry) or b"").splitlines():
            if line.startswith(b"options"):
                out.append((entry, cmdline.split(line[len(b"options"):])))
                break
    return out


def lost(system: System, plan: Plan) -> str:
    """Empty when every generated entry carries the edit; else what is lost where, and why."""
    if plan.edit is None or plan.edit.empty or plan.facts.stack not in ("grub", "bls", "systemd-boot",
                                                                        "kernelstub"):
        return ""
    entries = generated(system, plan.facts.stack)
    problems = []
    for path, tokens in entries or [("the loader entries", [])]:
        missing = ([t for t in plan.edit.added if t not in tokens]
                   + [t for _, t in plan.edit.replaced if t in tokens])
        if missing:
            problems.append(f"{path} lacks {' '.join(missing)}" if tokens else f"{path} has no command line")
    if problems and plan.facts.stack == "grub":
        problems += [f"{o} after {GRUB_DROPIN} (it overrides seatkit's drop-in)"
                     for o in grub_defaults.overriders(system, GRUB_DROPIN)]
    return "; ".join(problems)
