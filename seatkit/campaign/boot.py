"""One-shot boots for host arms: a kit-owned GRUB menu entry per arm, booted once with grub-reboot.

Each entry is the default entry's own body (same kernel, initrd, root) with the arm's tokens on its
`linux` line: the IOMMU tokens, and the module options as `module.param=value`, which modprobe
honours at load time. A marker token `seatkit.arm=NAME` names the arm to the boot that follows.
grub-reboot sets next_entry in grubenv; GRUB clears it as it boots, so a hung arm falls back to the
normal default at the next power cycle. The normal entries and the default are never edited. An arm
changes only the settings it names: every other token, and the operator's own registry keys, stay.

The way back never depends on the step succeeding: the step reboots into the normal entry on any
failure in an arm's boot (forced when a plain reboot is refused), the unit's OnFailure= unit does
the same when the step itself dies or hangs past its timeout (seatkit.campaign.unit writes both),
and every arm's line carries panic=N, so a kernel that panics in an arm reboots by itself.

The entries script and the systemd unit are installed as one host transaction (journaled, with
grub.cfg and grubenv kept byte for byte), so the end of the campaign, an abort, or `seat host
recover` after a kill puts every file back as it was.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from seatkit.campaign.spec import Arm, Campaign
from seatkit.errors import SeatError
from seatkit.host import change, cmdline, lock, modprobe, state, transaction, undo
from seatkit.host.journal import STATE, Journal, sha256
from seatkit.host.ops import FileOp
from seatkit.host.system import System
from seatkit.seat import host_profiles

SCRIPT = "/etc/grub.d/42_seatkit-campaign"
GRUB_CFG = "/boot/grub/grub.cfg"
GRUBENV = "/boot/grub/grubenv"
UNIT_NAME = "seatkit-campaign.service"
UNIT = f"/etc/systemd/system/{UNIT_NAME}"
FALLBACK_NAME = "seatkit-campaign-fallback.service"
FALLBACK = f"/etc/systemd/system/{FALLBACK_NAME}"
EDITED = "/var/lib/seatkit/campaign/edited"  # the operator's edits of the kit's files, kept at the end
# A drop-in that makes multi-user.target want the unit: regular files only, no enable symlink.
WANTS = "/etc/systemd/system/multi-user.target.d/seatkit-campaign.conf"
MARKER = "seatkit.arm"  # a dotted name: the kernel reads it as an unknown module's option and ignores it
IOMMU_KEYS = ("iommu", "amd_iommu", "intel_iommu")
REGISTRY = "nvidia.NVreg_RegistryDwords"
REBAR_KEYS = ("EnableResizableBar",)
PANIC_S = 30  # an arm whose kernel panics (a device that needs the IOMMU) reboots, into the normal entry  # a BAR setting, not a P2P key: the p2p arm leaves it as it is


def one_shot_refusal(system: System) -> str | None:
    """Why GRUB could not clear its one-shot entry as it boots, so that a hung arm would boot again
    at every power cycle (None: it can). GRUB writes its environment block only on a plain disk (no
    LVM or RAID) with a non-checksumming file system (GRUB manual, "Environment block")."""
    mounts = [line.split() for line in (system.read("/proc/self/mounts") or "").splitlines()]
    where = GRUBENV.rsplit("/", 1)[0]
    holding = [m for m in mounts if len(m) >= 3 and (where + "/").startswith(m[1].rstrip("/") + "/")]
    if not holding:
        return f"no mount in /proc/self/mounts holds {where}: whether GRUB can clear its one-shot entry is unknown"
    device, mount, fstype = max(holding, key=lambda m: len(m[1]))[:3]
    if fstype in ("btrfs", "zfs") or device.startswith(("/dev/md", "/dev/mapper/", "/dev/dm-")):
        return (
            f"{GRUBENV} is on {device} ({fstype}, mounted at {mount}), where GRUB does not write its "
            "environment block: the one-shot entry would not be cleared as it boots, and a hung arm "
            "would boot again at every power cycle"
        )
    return None


def entry_id(arm: Arm) -> str:
    return f"seatkit-campaign-{arm.name}"


def p2p_keys(profile: host_profiles.HostProfile) -> dict[str, str]:
    """The keys the p2p arm sets: the profile's registry form less its BAR keys."""
    form = host_profiles.registry_keys().forms[profile.registry].dwords
    return {k: v for k, v in host_profiles.parse_dwords(form).items() if k not in REBAR_KEYS}


def arm_tokens(
    arm: Arm,
    profile: host_profiles.HostProfile,
    vendor: state.Vendor,
    operator_keys: dict[str, str] | None = None,
) -> list[str]:
    """The arm's tokens; the p2p arm's registry string is the operator's own keys (modprobe.d and the
    normal entry's line, which the command line would replace) with the P2P keys set over them."""
    assert arm.host is not None  # a host arm
    tokens = list(profile.iommu.tokens[vendor]) if "iommu" in arm.host else []
    if "p2p" in arm.host:
        keys = {**(operator_keys or {}), **p2p_keys(profile)}
        tokens.append(f"{REGISTRY}={';'.join(f'{k}={v}' for k, v in keys.items())}")
    if "hmm" in arm.host:
        tokens.append("nvidia_uvm.uvm_disable_hmm=1")
    return tokens + [f"panic={PANIC_S}", f"{MARKER}={arm.name}"]


def operator_keys(system: System, body: list[str]) -> dict[str, str]:
    """The registry keys the normal boot gives the nvidia module (modprobe.d, then its line)."""
    linux = next((line.split() for line in body if line.split()[:1] in (["linux"], ["linuxefi"])), [])
    found, _ = modprobe.options(system, "nvidia", linux[2:])
    return host_profiles.parse_dwords(found.get("NVreg_RegistryDwords", ""))


def default_entry(system: System) -> list[str]:
    """The lines of the menu entry the normal boot boots (GRUB_DEFAULT: an index, a title, an id,
    a "submenu>entry" path, or saved), so every arm runs the operator's own kernel."""
    text = system.read(GRUB_CFG) or ""
    found = state.grub_default_entry(system, text)
    if found is None:
        raise SeatError(
            f"the normal boot's entry ({state.grub_default(system, text)!r}, from GRUB_DEFAULT or "
            f"saved_entry) is not a Linux menuentry in {GRUB_CFG}: the arms would boot another kernel than the normal one",
            "point GRUB_DEFAULT (or grub-set-default) at an entry update-grub writes, then run update-grub",
        )
    lines = text.splitlines()
    start = found[1]
    indent = lines[start][: len(lines[start]) - len(lines[start].lstrip())]
    end = next((i for i in range(start + 1, len(lines)) if lines[i] == indent + "}"), None)
    if end is None:
        raise SeatError(f"{GRUB_CFG}: the default menuentry is not closed by a '}}' line")
    return [line[len(indent) :] if line.startswith(indent) else line for line in lines[start : end + 1]]


def _grub_word(token: str) -> str:
    """A token on GRUB's `linux` line: `;` ends a command there, so such a token is single-quoted."""
    return f"'{token}'" if ";" in token else token


def entry(arm: Arm, body: list[str], tokens: list[str], campaign: str) -> str:
    out = [f"menuentry 'seatkit campaign {campaign}: arm {arm.name}' --id {entry_id(arm)} {{"]
    linux = [
        i for i, line in enumerate(body) if line.split()[:1] and line.split()[0] in ("linux", "linuxefi")
    ]
    if not linux:
        raise SeatError(f"the default entry in {GRUB_CFG} has no linux line")
    for i, line in enumerate(body[1:-1], 1):
        if line.split()[:1] == ["savedefault"]:  # GRUB_SAVEDEFAULT: booting the arm would make it the default
            continue
        if i == linux[0]:
            indent = line[: len(line) - len(line.lstrip())]
            words = line.split()
            owned = {cmdline.key(t) for t in tokens}  # the arm decides these; the operator's others stay
            if any(cmdline.key(t) in IOMMU_KEYS for t in tokens):
                owned |= set(IOMMU_KEYS)  # an arm that sets the IOMMU sets all of it
            kept = [w for w in words[2:] if cmdline.key(w) not in owned]
            line = indent + " ".join([words[0], words[1]] + kept + [_grub_word(t) for t in tokens])
        out.append(line)
    return "\n".join(out + ["}"])


def script(campaign: Campaign, entries: list[str]) -> str:
    body = "\n".join(entries)
    return (
        "#!/bin/sh\n"
        f"# Written by seatkit (seat campaign run {campaign.name}); removed at the campaign's end.\n"
        "# One-shot entries for grub-reboot: the default entry is not changed.\n"
        f"cat <<'SEATKIT_EOF'\n{body}\nSEATKIT_EOF\n"
    )


def wants_text() -> str:
    return (
        "# Written by seatkit (seat campaign run); removed at the campaign's end.\n"
        f"[Unit]\nWants={UNIT_NAME}\n"
    )


def installed(system: System, campaign_id: str):
    return next(
        (t for t in Journal(system).active() if t.begin["profile"] == f"campaign:{campaign_id}"), None
    )


def install(system: System, campaign_id: str, script_text: str, unit: str, fallback: str, progress) -> str:
    """Entries script, unit, the drop-in that wants it, update-grub: one journaled host transaction."""
    with lock.held(system, f"campaign {campaign_id}: install"):
        begin = {
            "action": "apply",
            "profile": f"campaign:{campaign_id}",
            "facts": {"boot_id": state.boot_id(system)},
            "regen": [["update-grub"]],
            "edit": None,
            "intent": [SCRIPT, UNIT, FALLBACK, WANTS],
        }
        tx = transaction.Change(system, progress, begin)
        tx.write(FileOp(SCRIPT, script_text.encode(), "one-shot menu entries, one per host arm"))
        os.chmod(system.path(SCRIPT), 0o755)  # grub-mkconfig runs only executable scripts
        tx.write(FileOp(UNIT, unit.encode(), "resumes the campaign after each boot"))
        tx.write(FileOp(FALLBACK, fallback.encode(), "back to the normal entry if the step fails"))
        tx.write(FileOp(WANTS, wants_text().encode(), "start the unit at each boot"))
        tx.keep([GRUB_CFG, GRUBENV])
        tx.run(["update-grub"], touches=[GRUB_CFG])  # its result's hash tells a later update-grub apart
        tx.commit()
        return tx.txid


def uninstall(system: System, campaign_id: str, progress) -> str | None:
    """Undo the install (and anything a kill left half done); the host's files as they were. The
    kit's own files edited since (the unit, the entries script) are kept aside, never a reason to
    stay installed: an edit there would otherwise hold the host in the campaign at every boot."""
    change.recover(system, progress)
    tx = installed(system, campaign_id)
    if tx is None:
        return None
    with lock.held(system, f"campaign {campaign_id}: remove"):
        for f in tx.of_type("file"):
            now = system.read_bytes(f["path"])
            ours = system.read_bytes(f"{STATE}/backups/{tx.txid}/ours{f['path']}")
            if sha256(now) not in (f["sha_before"], f["sha_after"]) and sha256(ours) == f["sha_after"]:
                aside = f"{EDITED}/{campaign_id}{f['path']}"
                system.write(aside, now or b"", mode=0o600)
                system.write(f["path"], ours or b"")
                progress(f"{f['path']} was edited during the campaign: the edit is kept in {aside}")
        return undo.revert(tx, system, progress)


def arm(system: System, arm: Arm) -> None:
    """Boot this arm's entry once, at the next boot."""
    rc, output = system.run(["grub-reboot", entry_id(arm)])
    if rc:
        raise SeatError(f"grub-reboot {entry_id(arm)} failed (exit {rc}): {output.strip()[-300:]}")


def booted_arm(system: System) -> str | None:
    """The arm the running kernel was booted for, by the marker on /proc/cmdline."""
    for token in cmdline.split(system.read("/proc/cmdline") or ""):
        if cmdline.key(token) == MARKER:
            return cmdline.value(token)
    return None


def disarm(system: System) -> None:
    """Clear the one-shot: the next boot, whoever makes it, boots the normal entry."""
    system.run(["grub-editenv", GRUBENV, "unset", "next_entry"])  # a failure is no reason to stay


@contextmanager
def leaving_arm(system: System, progress: Callable[[str], None]) -> Iterator[None]:
    """Run an end in an arm's boot: the reboot into the normal entry comes after it, whatever
    happens in it (a failure still raises, from the normal boot's side of the reboot request)."""
    in_arm = booted_arm(system)
    try:
        yield
    except Exception:
        if in_arm:
            leave_arm(system)
        raise
    if in_arm:
        progress("reboot into the normal entry")
        leave_arm(system)


def leave_arm(system: System) -> None:
    """Reboot into the normal entry: the one-shot cleared first (an arm armed for the next visit
    would otherwise boot), whatever state grubenv's file system is in; a plain reboot refused (a
    conflicting job, logind, D-Bus) is forced, since the arm's kernel must not keep running."""
    disarm(system)
    rc, output = system.run(["systemctl", "reboot"])
    if rc:  # the manager, not logind: no inhibitor or conflicting job holds it
        rc, output = system.run(["systemctl", "reboot", "--force"])
    if rc:  # reboot(2) itself, which nothing refuses to root: what was written is synced first
        os.sync()
        rc, output = system.run(["systemctl", "reboot", "--force", "--force"])
    if rc:
        raise SeatError(
            f"systemctl reboot failed, forced too (exit {rc}): {output.strip()[-300:]}",
            "reboot by hand now: this kernel was booted for a campaign arm, and the next boot is the normal entry",
        )


def reboot(system: System) -> None:
    rc, output = system.run(["systemctl", "reboot"])
    if rc:
        raise SeatError(
            f"systemctl reboot failed (exit {rc}): {output.strip()[-300:]}",
            "reboot by hand: the unit resumes the campaign after the boot",
        )
    time.sleep(0)  # the host goes down from here; the caller returns
