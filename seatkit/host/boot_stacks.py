"""The boot stacks' edits of the kernel command line: each stack (grub, bls, kernelstub,
systemd-boot) returns (edit, ops, regen) for the tokens wanted, or raises why it cannot; NixOS gets a
snippet instead. Nothing here writes or runs anything that changes the host.
"""

from __future__ import annotations

import json
import re

from seatkit.errors import SeatError
from seatkit.host import cmdline, detect, grub_defaults, state
from seatkit.host.ops import GRUB_DROPIN, KERNEL_CMDLINE, KERNELSTUB_CONFIG, CommandOp, FileOp
from seatkit.host.system import System


def lost_tokens(tokens: list[str], edit: cmdline.Edit) -> list[str]:
    """What of the edit is not in a generated command line: tokens missing, replaced ones still there."""
    return [f"{t} is missing" for t in edit.added if t not in tokens] + [
        f"{t} is still there" for _, t in edit.replaced if t in tokens
    ]


def _grub_length(system: System, tokens: list[str]) -> bytes:
    """The line the kernel would get: BOOT_IMAGE and root= as in grub.cfg's default entry, then ours."""
    found = state.grub_default_args(system)
    words = found[0].split() if found else []
    prefix = [f"BOOT_IMAGE={found[2]}"] if found else []
    prefix += [w for w in words if w.startswith("root=")][:1] + ["ro"]
    return cmdline.to_bytes(" ".join(prefix + tokens))


def grub_dropin(edit: cmdline.Edit) -> str:
    """A drop-in that grub-mkconfig sources after every other one: it appends, and it removes
    only the tokens it replaces, so rollback (deleting it) puts the user's lines back as they were.
    It edits GRUB_CMDLINE_LINUX_DEFAULT alone: GRUB_CMDLINE_LINUX reaches the recovery entries."""
    replaced = [t for _, t in edit.replaced]
    lines = [
        "# Written by seatkit (seat host apply); seat host rollback removes it. Do not edit.",
        f"# seatkit-adds: {' '.join(edit.added)}",
        f"# seatkit-replaces: {' '.join(replaced)}",
    ]
    if replaced:
        cases = "|".join(f"'{t}'" for t in replaced)  # no globbing in the word loop (a subshell)
        lines += [
            f'seatkit_without() {{ set -f; out=; for t in $1; do case "$t" in {cases}) ;; '
            '*) out="$out $t" ;; esac; done; printf %s "${out# }"; }',
            'GRUB_CMDLINE_LINUX_DEFAULT="$(seatkit_without "$GRUB_CMDLINE_LINUX_DEFAULT")"',
        ]
    # GRUB_CMDLINE_LINUX_DEFAULT does not reach recovery entries: they stay a clean way back.
    lines.append(f'GRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT {" ".join(edit.added)}"')
    return "\n".join(lines) + "\n"


def grub(system: System, wanted: list[str], replace: bool):
    """Judged on the defaults files the next update-grub sources (pending edits count), not on
    the last grub.cfg; the drop-in's effect is predicted the same way before it is written."""
    files = grub_defaults.sources(system)
    broken = grub_defaults.syntax_errors(system, files)
    if broken:
        raise SeatError("; ".join(broken) + ": update-grub would fail")
    theirs = [f for f in files if f != GRUB_DROPIN]
    linux, default = grub_defaults.variables(system, theirs)
    edit = cmdline.plan(cmdline.split(f"{linux} {default}"), wanted, replace)
    shared = [t for _, t in edit.replaced if t in cmdline.split(linux)]
    if shared:  # taking them out there would change every recovery entry too
        raise SeatError(
            f"{' '.join(shared)} {'is' if len(shared) == 1 else 'are'} in GRUB_CMDLINE_LINUX, which the "
            "recovery entries get too: --replace takes tokens out of GRUB_CMDLINE_LINUX_DEFAULT only, "
            "so the recovery entries stay a clean way back",
            "move them to GRUB_CMDLINE_LINUX_DEFAULT in /etc/default/grub, run update-grub, plan again",
        )
    text = grub_dropin(edit) if not edit.empty else None
    if text:
        predicted = cmdline.split(grub_defaults.command_line(system, theirs, {GRUB_DROPIN: text}))
        lost = lost_tokens(predicted, edit)
        if lost:
            raise SeatError(
                f"after {GRUB_DROPIN} the next update-grub would give a line where "
                f"{', '.join(lost)}: "
                + ("; ".join(grub_defaults.overriders(system, GRUB_DROPIN)) or "a later file wins"),
                "make the later drop-in append to the variable instead of setting it",
            )
        cmdline.check_length(_grub_length(system, predicted), "grub.cfg default entry")
    if text == system.read(GRUB_DROPIN):
        return edit, [], []
    op = FileOp(
        GRUB_DROPIN,
        text.encode() if text else None,
        "GRUB drop-in appending the IOMMU tokens to the default entries",
    )
    return edit, [op], [["update-grub"]]


def grubby_argv(add: list[str], remove: list[str]) -> list[str]:
    return (
        ["grubby", "--update-kernel=ALL"]
        + ([f"--args={' '.join(add)}"] if add else [])
        + ([f"--remove-args={' '.join(remove)}"] if remove else [])
    )


def kernelstub_argv(add: list[str], remove: list[str]) -> list[str]:
    return (
        ["kernelstub"] + (["-a", " ".join(add)] if add else []) + (["-d", " ".join(remove)] if remove else [])
    )


def _command(argv, edit: cmdline.Edit, touches: list[str], why: str) -> CommandOp:
    """The tool's own edit and its exact reverse: remove what was added, add back what was replaced."""
    added, replaced = list(edit.added), [t for _, t in edit.replaced]
    return CommandOp(argv(added, replaced), argv(replaced, added), touches, why)


def bls(system: System, wanted: list[str], replace: bool):
    entries = [f"/{p.relative_to(system.root)}" for p in system.glob("/boot/loader/entries/*.conf")]
    options = next(
        (
            line.split(None, 1)[1]
            for e in entries
            for line in (system.read(e) or "").splitlines()
            if line.startswith("options ")
        ),
        None,
    )
    if options is None:
        raise SeatError("no BLS entry in /boot/loader/entries has an options line")
    edit = cmdline.plan(cmdline.split(options), wanted, replace)
    ops: list[FileOp | CommandOp] = []
    if not edit.empty:
        ops.append(_command(grubby_argv, edit, entries, "grubby edits every BLS entry's options"))
    future = system.read_bytes(KERNEL_CMDLINE)
    if future is not None:  # new kernels take their command line from here
        new = edit_kernel_cmdline(future, wanted, replace)
        if new != future:
            ops.append(FileOp(KERNEL_CMDLINE, new, "the command line future kernels get"))
    return edit, ops, []


def edit_kernel_cmdline(data: bytes, wanted: list[str], replace: bool) -> bytes:
    """/etc/kernel/cmdline edited on its own bytes: quotes, tabs, CRLF and non-UTF-8 kept."""
    new = cmdline.edit_bytes(data, cmdline.plan(cmdline.split(data), wanted, replace))
    cmdline.check_length(new.strip(), KERNEL_CMDLINE)
    return new


def kernelstub_tokens(system: System) -> list[str]:
    """The options kernelstub keeps (a list, or one string in older releases)."""
    try:
        options = json.loads(system.read(KERNELSTUB_CONFIG) or "")["user"]["kernel_options"]
        return options if isinstance(options, list) else cmdline.split(options)
    except (ValueError, KeyError, TypeError):
        raise SeatError(f"{KERNELSTUB_CONFIG} has no user.kernel_options") from None


def kernelstub(system: System, wanted: list[str], replace: bool):
    edit = cmdline.plan(kernelstub_tokens(system), wanted, replace)
    if edit.empty:
        return edit, [], []
    touches = [KERNELSTUB_CONFIG] + detect.loader_entries(system)
    return (
        edit,
        [_command(kernelstub_argv, edit, touches, "kernelstub keeps the options and writes the ESP entry")],
        [],
    )


def systemd_boot(system: System, wanted: list[str], replace: bool):
    kernels = detect.kernels(system)
    if not kernels:
        raise SeatError(
            "no installed kernel found for kernel-install (/usr/lib/modules/*/vmlinuz, /boot/vmlinuz-*)"
        )
    by_hand = [
        e
        for e in detect.loader_entries(system)
        if not any(re.search(rf"-{re.escape(v)}(\+\d+(-\d+)?)?\.conf$", e) for v, _ in kernels)
    ]
    if by_hand:
        raise SeatError(
            f"loader entries not written by kernel-install for an installed kernel: "
            f"{', '.join(by_hand)}: they would keep booting the old command line",
            "add the tokens to them by hand, or remove them, then plan again",
        )
    current = system.read_bytes(KERNEL_CMDLINE)
    if current is None:  # kernel-install falls back to the running command line
        current = (
            " ".join(
                t
                for t in cmdline.split(system.read_bytes("/proc/cmdline") or b"")
                if cmdline.key(t) not in ("BOOT_IMAGE", "initrd")
            ).encode("utf-8", "surrogateescape")
            + b"\n"
        )
    edit = cmdline.plan(cmdline.split(current), wanted, replace)
    if edit.empty:
        return edit, [], []
    op = FileOp(
        KERNEL_CMDLINE,
        edit_kernel_cmdline(current, wanted, replace),
        "the command line kernel-install writes into each entry",
    )
    return edit, [op], [["kernel-install", "add", version, image] for version, image in kernels]


STACKS = {"grub": grub, "bls": bls, "kernelstub": kernelstub, "systemd-boot": systemd_boot}


def nixos_snippet(tokens: list[str], module_text: str) -> str:
    options = "\n".join(f"    {line}" for line in module_text.splitlines() if line.startswith("options"))
    return (
        "# NixOS is declarative: seatkit changes nothing. Add to configuration.nix, then\n"
        "# `nixos-rebuild boot` and reboot; roll back by booting the previous generation.\n"
        f"boot.kernelParams = [ {' '.join(json.dumps(t) for t in tokens)} ];\n"
        f"boot.extraModprobeConfig = ''\n{options}\n'';\n"
    )
