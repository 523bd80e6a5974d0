"""`seat host plan`: what apply would change on this host, and every reason to refuse.

A plan is a list of operations: owned files to write (or remove) and boot-tool commands with their
exact undo, then the regeneration commands (initramfs, boot configuration) that rollback reruns.
Nothing here writes or runs anything that changes the host.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass, field

from seatkit.errors import SeatError
from seatkit.host import cmdline, detect, grub_defaults, state
from seatkit.host.journal import Journal, sha256
from seatkit.host.system import System
from seatkit.seat import host_profiles
from seatkit.seat.host_profiles import HostProfile

MODPROBE_FILE = "/etc/modprobe.d/seatkit-nvidia.conf"
GRUB_DROPIN = "/etc/default/grub.d/99-seatkit.cfg"
KERNEL_CMDLINE = "/etc/kernel/cmdline"
KERNELSTUB_CONFIG = "/etc/kernelstub/configuration"
X2APIC_CPUS = 256


@dataclass
class FileOp:
    path: str
    new: bytes | None  # None removes the file
    why: str


@dataclass
class CommandOp:
    argv: list[str]
    undo: list[str]
    touches: list[str]
    why: str


@dataclass
class Plan:
    profile: str
    facts: detect.Facts
    tokens: list[str] = field(default_factory=list)
    edit: cmdline.Edit | None = None
    ops: list = field(default_factory=list)
    regen: list[list[str]] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    snippet: str | None = None
    keep: list[str] = field(default_factory=list)  # files regeneration rewrites: kept byte for byte
    source: HostProfile | None = None  # what apply re-plans from under the lock
    choices: Choices | None = None


@dataclass
class Choices:
    replace: bool = False  # replace conflicting IOMMU tokens (recorded, put back by rollback)
    acknowledge_iommu_off: bool = False


# --- the owned module file ----------------------------------------------------------------------


def modprobe_text(profile: HostProfile, dwords: str) -> str:
    lines = [
        f"# Written by seatkit (seat host apply {profile.name}); seat host rollback removes it.",
        "# Change the host profile rather than this file: an edited file stops rollback.",
        f"# GPU peer-to-peer path, registry form {profile.registry}:",
        f'options nvidia NVreg_RegistryDwords="{dwords}"',
    ]
    if profile.hmm_disabled:
        lines += ["# HMM off in the unified-memory driver:", "options nvidia_uvm uvm_disable_hmm=1"]
    return "\n".join(lines) + "\n"


def foreign_module_options(system: System) -> list[str]:
    """Other modprobe.d files, and module options on the running or the next boot's command line
    (kmod applies those after every file), that set what the owned file sets."""
    found = []
    lines = {
        "/proc/cmdline": cmdline.split(system.read_bytes("/proc/cmdline") or b""),
        state.configured_args(system).source: state.next_boot_tokens(system),
    }
    for module, option in (("nvidia", "NVreg_RegistryDwords"), ("nvidia_uvm", "uvm_disable_hmm")):
        _, files = state.modprobe_options(system, module)
        for path in files:
            if path != MODPROBE_FILE and re.search(rf"\b{option}=", system.read(path) or ""):
                found.append(f"{path} sets {module} {option}")
        for path, words in state.module_lines(system, "install", module):  # run instead of loading it
            if re.search(rf"(^|\s){option}=", words[2]):
                found.append(
                    f"{path} has an install command for {module} that passes {option} itself: "
                    "kmod runs it instead of loading the module, and its value comes after every file's"
                )
        for where, tokens in lines.items():
            found += [
                f"the kernel command line ({where}) has {module}.{t}, which kmod applies after "
                "every modprobe.d file, so it wins"
                for t in state.kernel_line_options(tokens, module)
                if cmdline.key(t).replace("-", "_") == option.replace("-", "_")
            ]
    return list(dict.fromkeys(found))


# --- boot stacks: each returns (edit, ops, regen) or a snippet --------------------------------


def _dropin_header(text: str, name: str) -> list[str]:
    match = re.search(rf"^# seatkit-{name}:(.*)$", text, re.M)
    return match.group(1).split() if match else []


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
    only the tokens it replaces, so rollback (deleting it) puts the user's lines back as they were."""
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
            'GRUB_CMDLINE_LINUX="$(seatkit_without "$GRUB_CMDLINE_LINUX")"',
            'GRUB_CMDLINE_LINUX_DEFAULT="$(seatkit_without "$GRUB_CMDLINE_LINUX_DEFAULT")"',
        ]
    # GRUB_CMDLINE_LINUX_DEFAULT does not reach recovery entries: they stay a clean way back.
    lines.append(f'GRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT {" ".join(edit.added)}"')
    return "\n".join(lines) + "\n"


def grub(system: System, wanted: list[str], choices: Choices):
    """Judged on the defaults files the next update-grub sources (pending edits count), not on
    the last grub.cfg; the drop-in's effect is predicted the same way before it is written."""
    files = grub_defaults.sources(system)
    broken = grub_defaults.syntax_errors(system, files)
    if broken:
        raise SeatError("; ".join(broken) + ": update-grub would fail")
    theirs = [f for f in files if f != GRUB_DROPIN]
    edit = cmdline.plan(cmdline.split(grub_defaults.command_line(system, theirs)), wanted, choices.replace)
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


def bls(system: System, wanted: list[str], choices: Choices):
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
    edit = cmdline.plan(cmdline.split(options), wanted, choices.replace)
    ops = []
    if not edit.empty:
        ops.append(_command(grubby_argv, edit, entries, "grubby edits every BLS entry's options"))
    future = system.read_bytes(KERNEL_CMDLINE)
    if future is not None:  # new kernels take their command line from here
        new = edit_kernel_cmdline(future, wanted, choices)
        if new != future:
            ops.append(FileOp(KERNEL_CMDLINE, new, "the command line future kernels get"))
    return edit, ops, []


def edit_kernel_cmdline(data: bytes, wanted: list[str], choices: Choices) -> bytes:
    """/etc/kernel/cmdline edited on its own bytes: quotes, tabs, CRLF and non-UTF-8 kept."""
    new = cmdline.edit_bytes(data, cmdline.plan(cmdline.split(data), wanted, choices.replace))
    cmdline.check_length(new.strip(), KERNEL_CMDLINE)
    return new


def kernelstub(system: System, wanted: list[str], choices: Choices):
    try:
        config = json.loads(system.read(KERNELSTUB_CONFIG) or "")
        options = config["user"]["kernel_options"]
    except (ValueError, KeyError, TypeError):
        raise SeatError(f"{KERNELSTUB_CONFIG} has no user.kernel_options") from None
    tokens = options if isinstance(options, list) else cmdline.split(options)
    edit = cmdline.plan(tokens, wanted, choices.replace)
    if edit.empty:
        return edit, [], []
    touches = [KERNELSTUB_CONFIG] + detect.loader_entries(system)
    return (
        edit,
        [_command(kernelstub_argv, edit, touches, "kernelstub keeps the options and writes the ESP entry")],
        [],
    )


def systemd_boot(system: System, wanted: list[str], choices: Choices):
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
    edit = cmdline.plan(cmdline.split(current), wanted, choices.replace)
    if edit.empty:
        return edit, [], []
    op = FileOp(
        KERNEL_CMDLINE,
        edit_kernel_cmdline(current, wanted, choices),
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


# --- the plan -----------------------------------------------------------------------------------


def owned_file_refusals(system: System, journal: Journal, paths: list[str]) -> list[str]:
    """An owned file that exists must be exactly what the journal says seatkit wrote last."""
    written = {r["path"]: r["sha_after"] for t in journal.active() for r in t.of_type("file")}
    out = []
    for path in paths:
        now = sha256(system.read_bytes(path))
        if now is not None and written.get(path) != now:
            out.append(
                f"{path} was changed since seatkit wrote it (or seatkit's journal does not "
                "know it): move it aside or restore it, then plan again"
            )
    return out


def build(profile: HostProfile, system: System | None = None, choices: Choices | None = None) -> Plan:
    system, choices = system or System(), choices or Choices()
    facts = detect.facts(system)
    plan = Plan(profile.name, facts, source=profile, choices=choices)
    journal = Journal(system)
    refuse, warn = plan.refusals.append, plan.warnings.append
    for t in journal.open():
        refuse(f"transaction {t.txid} ({t.action}) was interrupted: run `seat host recover` first")

    keys = host_profiles.registry_keys()
    dwords = keys.forms[profile.registry].dwords
    driver = facts.next_driver or facts.driver  # the options are read when the next boot loads it
    unbuilt = facts.next_driver is None and facts.next_kernel != facts.kernel
    if facts.next_driver and facts.driver and facts.next_driver != facts.driver:
        warn(
            f"driver {facts.driver} runs, but the next boot ({facts.next_kernel}) loads the installed "
            f"{facts.next_driver} (modinfo -k): the registry form is judged for {facts.next_driver}"
        )
    elif unbuilt and facts.driver:  # built at that boot (DKMS), from a source that may be newer
        driver = None
        warn(
            f"no nvidia module is installed for the next boot's kernel {facts.next_kernel} (modinfo -k "
            f"finds none; DKMS may not have built it yet): driver {facts.driver} runs, but which one that "
            "boot loads is unknown; build it (`dkms autoinstall -k KERNEL`) and plan again"
        )
    rule = host_profiles.rule_for(driver, keys) if driver else None
    if driver is None and profile.registry == "five-key":
        refuse(
            "the NVIDIA driver version is unknown for the next boot (no module for its kernel, no "
            "/proc/driver/nvidia/version, no modinfo): the five-key form is wrong below 575.51.02, so "
            "it is refused until the driver is installed"
        )
    elif rule and profile.registry in rule.refuse:
        refuse(
            f"the {profile.registry} registry form is wrong on driver {driver}"
            + (
                f" (installed for the next boot's kernel {facts.next_kernel})"
                if driver != facts.driver
                else ""
            )
            + f": {' '.join(rule.why.split())} Use the conservative profile (three-key)."
        )
    for found in foreign_module_options(system):
        refuse(f"{found}: two settings would fight over one option; remove or merge it first")

    if facts.vendor is None:
        refuse("CPU vendor not recognised in /proc/cpuinfo: the IOMMU tokens depend on it")
    else:
        plan.tokens = list(profile.iommu.tokens[facts.vendor])
    if profile.iommu.mode == "off":
        if facts.virt:
            refuse(
                f"this is a virtual machine or container ({facts.virt}): turning the IOMMU off in a "
                "guest is meaningless or harmful, and its isolation is needed there"
            )
        if not choices.acknowledge_iommu_off:
            refuse(
                f"turning the IOMMU off needs --acknowledge-iommu-off. "
                f"{' '.join(profile.iommu.acknowledge.split())} (seat host plan conservative)"
            )
        if facts.cpus and facts.cpus >= X2APIC_CPUS:
            warn(
                f"{facts.cpus} CPUs: without the IOMMU there is no interrupt remapping, x2APIC can be "
                "switched off and CPUs above APIC ID 255 lost at boot; after the reboot compare "
                "`nproc --all` with the online CPUs"
            )

    if facts.container:
        refuse(
            f"this runs in a container ({facts.container}): the boot files here are not the ones "
            "the host's kernel boots from; run seatkit on the host itself"
        )
    text = modprobe_text(profile, dwords)
    if facts.stack == "nixos":
        plan.snippet = nixos_snippet(plan.tokens, text)
        return plan
    for problem in owned_file_refusals(system, journal, [MODPROBE_FILE, GRUB_DROPIN]):
        refuse(problem)
    if system.read(MODPROBE_FILE) != text:
        plan.ops.append(FileOp(MODPROBE_FILE, text.encode(), "registry keys and HMM module options"))
        if facts.initramfs:
            plan.regen.append(facts.initramfs)
            if facts.initramfs[0] == "dracut" and not detect.dracut_hostonly(system):
                warn(
                    "dracut builds generic (non-hostonly) images here, and those leave /etc/modprobe.d "
                    "out: the options apply when nvidia loads from the root filesystem, not from the "
                    'initramfs (set hostonly="yes" in /etc/dracut.conf.d to carry them)'
                )
        else:
            refuse(f"{facts.initramfs_why}: the initramfs keeps a copy of modprobe.d")
    if facts.stack == "ostree":
        refuse(
            "rpm-ostree / bootc hosts are image based: use `rpm-ostree kargs --append` with the "
            f"tokens {' '.join(plan.tokens)} (not automated in this version)"
        )
    elif facts.stack is None:
        refuse(f"{facts.stack_why}: seatkit edits a boot configuration only when it is sure which one boots")
    elif facts.stack == "systemd-boot" and facts.ukis:
        refuse(
            f"unified kernel images found ({', '.join(facts.ukis)}): their command line is built in, "
            "and rebuilding them is not automated"
        )
    elif plan.tokens:
        try:
            plan.edit, ops, regen = STACKS[facts.stack](system, plan.tokens, choices)
        except SeatError as exc:
            refuse(str(exc))
        else:
            plan.ops += ops
            plan.regen += regen
            if facts.stack == "systemd-boot":  # kernel-install rewrites its entries, hand edits too
                plan.keep = detect.loader_entries(system)

    for path in plan.keep + [
        p for op in plan.ops for p in ([op.path] if isinstance(op, FileOp) else op.touches)
    ]:
        try:  # every refusal a write would meet, found before anything changes
            system.check_writable(path)
        except SeatError as exc:
            refuse(exc.message)

    active = journal.active()
    last = active[-1] if active else None
    if plan.ops and last and last.begin["facts"]["boot_id"] == facts.boot_id:
        refuse(
            f"transaction {last.txid} ({last.begin['profile']}) was applied in this boot and is not "
            "yet verified: reboot and check `seat host status`, or roll it back, before another change"
        )
    return plan


def diff(system: System, op: FileOp) -> str:
    old = (system.read(op.path) or "").splitlines(keepends=True)
    new = (op.new or b"").decode(errors="replace").splitlines(keepends=True)  # for display only
    return "".join(difflib.unified_diff(old, new, f"a{op.path}", f"b{op.path}"))


def to_json(plan: Plan, system: System) -> dict:
    ops = [
        {"file": op.path, "why": op.why, "diff": diff(system, op)}
        if isinstance(op, FileOp)
        else {"run": op.argv, "undo": op.undo, "touches": op.touches, "why": op.why}
        for op in plan.ops
    ]
    return {
        "profile": plan.profile,
        "facts": plan.facts.to_json(),
        "tokens": plan.tokens,
        "edit": plan.edit.to_json() if plan.edit else None,
        "ops": ops,
        "regen": plan.regen,
        "refusals": plan.refusals,
        "warnings": plan.warnings,
        "snippet": plan.snippet,
    }
