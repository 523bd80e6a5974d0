"""`seat host plan`: what apply would change on this host, and every reason to refuse.

A plan is a list of operations: owned files to write (or remove) and boot-tool commands with their
exact undo, then the regeneration commands (initramfs, boot configuration) that rollback reruns.
Nothing here writes or runs anything that changes the host.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field

from seatkit.errors import SeatError
from seatkit.host import boot_stacks, cmdline, detect, modprobe, state
from seatkit.host.journal import Journal, sha256
from seatkit.host.ops import GRUB_DROPIN, MODPROBE_FILE, FileOp
from seatkit.host.system import System
from seatkit.seat import host_profiles
from seatkit.seat.host_profiles import HostProfile

X2APIC_CPUS = 256


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
        _, files = modprobe.options(system, module)
        for path in files:
            if path != MODPROBE_FILE and re.search(rf"\b{option}=", system.read(path) or ""):
                found.append(f"{path} sets {module} {option}")
        for path, words in modprobe.command_lines(system, "install", module):  # run instead of loading it
            if re.search(rf"(^|\s){option}=", words[2]):
                found.append(
                    f"{path} has an install command for {module} that passes {option} itself: "
                    "kmod runs it instead of loading the module, and its value comes after every file's"
                )
        for where, tokens in lines.items():
            found += [
                f"the kernel command line ({where}) has {module}.{t}, which kmod applies after "
                "every modprobe.d file, so it wins"
                for t in modprobe.kernel_line_options(tokens, module)
                if cmdline.key(t).replace("-", "_") == option.replace("-", "_")
            ]
    return list(dict.fromkeys(found))


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
    for t in journal.open():
        plan.refusals.append(
            f"transaction {t.txid} ({t.action}) was interrupted: run `seat host recover` first"
        )
    keys = host_profiles.registry_keys()
    judge_driver(plan, profile, keys)
    for found in foreign_module_options(system):
        plan.refusals.append(f"{found}: two settings would fight over one option; remove or merge it first")
    judge_iommu(plan, profile, choices)
    if facts.container:
        plan.refusals.append(
            f"this runs in a container ({facts.container}): the boot files here are not the ones "
            "the host's kernel boots from; run seatkit on the host itself"
        )
    text = modprobe_text(profile, keys.forms[profile.registry].dwords)
    if facts.stack == "nixos":
        plan.snippet = boot_stacks.nixos_snippet(plan.tokens, text)
        return plan
    for problem in owned_file_refusals(system, journal, [MODPROBE_FILE, GRUB_DROPIN]):
        plan.refusals.append(problem)
    _module_file(plan, system, text)
    _boot_edit(plan, system, choices)
    for path in plan.keep + [
        p for op in plan.ops for p in ([op.path] if isinstance(op, FileOp) else op.touches)
    ]:
        try:  # every refusal a write would meet, found before anything changes
            system.check_writable(path)
        except SeatError as exc:
            plan.refusals.append(exc.message)
    active = journal.active()
    last = active[-1] if active else None
    if plan.ops and last and last.begin["facts"]["boot_id"] == facts.boot_id:
        plan.refusals.append(
            f"transaction {last.txid} ({last.begin['profile']}) was applied in this boot and is not "
            "yet verified: reboot and check `seat host status`, or roll it back, before another change"
        )
    return plan


def judge_driver(plan: Plan, profile: HostProfile, keys: host_profiles.RegistryKeys) -> None:
    """The registry form against the driver the next boot loads."""
    facts, refuse, warn = plan.facts, plan.refusals.append, plan.warnings.append
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
        which = (
            f" (installed for the next boot's kernel {facts.next_kernel})" if driver != facts.driver else ""
        )
        refuse(
            f"the {profile.registry} registry form is wrong on driver {driver}{which}: "
            f"{' '.join(rule.why.split())} Use the conservative profile (three-key)."
        )


def judge_iommu(plan: Plan, profile: HostProfile, choices: Choices) -> None:
    """The IOMMU tokens for this CPU, and the refusals and warnings of turning the IOMMU off."""
    facts, refuse, warn = plan.facts, plan.refusals.append, plan.warnings.append
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


def _module_file(plan: Plan, system: System, text: str) -> None:
    """The owned modprobe.d file, and the initramfs that keeps a copy of it."""
    facts, refuse, warn = plan.facts, plan.refusals.append, plan.warnings.append
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


def _boot_edit(plan: Plan, system: System, choices: Choices) -> None:
    """The boot stack's edit of the kernel command line, or why this host's stack is refused."""
    facts, refuse = plan.facts, plan.refusals.append
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
            plan.edit, ops, regen = boot_stacks.STACKS[facts.stack](system, plan.tokens, choices.replace)
        except SeatError as exc:
            refuse(str(exc))
        else:
            plan.ops += ops
            plan.regen += regen
            if facts.stack == "systemd-boot":  # kernel-install rewrites its entries, hand edits too
                plan.keep = detect.loader_entries(system)


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
