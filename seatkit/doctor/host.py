"""Host-setting rows: `seat host status` verdicts and whether `verify-p2p` passed on this boot."""

from __future__ import annotations

from seatkit.doctor.rows import Row, cannot, fail, ok, warn
from seatkit.host import detect
from seatkit.host.system import System
from seatkit.seat import host_profiles
from seatkit.seat.profiles import Profile
from seatkit.text import plain

LAYER = "host"
STATUS = {
    "OK": "OK",
    "PENDING-REBOOT": "WARN",
    "PENDING-RELOAD": "WARN",
    "UNKNOWN": "WARN",
    "REVERTS": "WARN",
    "DRIFT": "FAIL",
    "REFUSED": "FAIL",
}
FIX = {
    "PENDING-REBOOT": "reboot",
    "PENDING-RELOAD": "reload nvidia modules (or reboot)",
    "DRIFT": "seat host plan {p}; {apply}",
    "REVERTS": "to keep it past the next boot: seat host plan {p}; {apply}",
    "REFUSED": "the other host profile",
}


def container() -> str | None:
    """The container sign of this machine (detect.container), for the layers that need it."""
    return detect.container(System())


def _unknown_fix(profile: str, system: System) -> str:
    """What would make an unreadable setting readable, from what this machine is."""
    inside = detect.container(system)
    if inside:
        return f"read it on the host: this runs in a container, {inside}, which hides the host's boot files and driver"
    if system.euid != 0:
        return "run it as root: some of the boot files and driver parameters are root's to read"
    return f"seat host plan {profile} says whether seatkit can set it on this boot stack"


def _evidence(r: dict) -> str:
    """Configured and live, each with where it was read when it is not known."""
    parts = []
    for side in ("configured", "live"):
        value, source = r.get(side), r.get(f"{side}_from")
        parts.append(f"{side}: {plain(value)}" + (f" ({source})" if value is None and source else ""))
    return "; ".join(parts) + (f"; {r['why']}" if r.get("why") else "")


def rows(status: dict, profile: Profile, system: System | None = None) -> list[Row]:
    """From host.status.status(): one row per setting, and the data path."""
    if not profile.gpus.count:
        return [ok(LAYER, "settings", f"{profile.name} runs on the CPU: GPU peer settings do not apply")]
    out = []
    name = status["profile"]
    # The command as it must be typed: a profile that turns the IOMMU off needs the acknowledgement.
    ack = " --acknowledge-iommu-off" if host_profiles.load(name).iommu.mode == "off" else ""
    words = {"p": name, "apply": f"sudo seat host apply {name}{ack} --yes"}
    for r in status["rows"]:
        verdict = r["verdict"]
        if verdict == "DRIFT" and r.get("live") is None:
            # The files say otherwise, but whether the running driver does is unknown: not yet set
            # here, a warning, not a drift of something that was running.
            evidence = f"not set: the profile wants {plain(r.get('desired'))}; {_evidence(r)}"
            level, fix = "WARN", FIX["DRIFT"].format(**words)
        else:
            evidence = f"{verdict}: {_evidence(r)}"
            level = STATUS[verdict]
            fix = (
                _unknown_fix(status["profile"], system or System())
                if verdict == "UNKNOWN"
                else FIX.get(verdict, "").format(**words)
            )
        out.append(
            ok(LAYER, r["setting"], evidence)
            if level == "OK"
            else (warn if level == "WARN" else fail)(LAYER, r["setting"], evidence, fix)
        )
    out += pcie_rows(status.get("pcie"))  # the bus facts, then what was measured over them
    out += step_rows(status.get("step"))
    path = status["data_path"]
    evidence = f"{path['verdict']}: {path['why']}"
    if path["verdict"] == "verified on this boot":
        out.append(ok(LAYER, "verify-p2p", evidence))
    elif path["verdict"].startswith("FAILED"):
        out.append(fail(LAYER, "verify-p2p", evidence, "seat host status; fix the settings, reboot"))
    else:
        out.append(warn(LAYER, "verify-p2p", evidence, "seat host verify-p2p"))
    return out


ACS_FIX = (
    "clear ReqRedir/CmpltRedir/EgressCtrl on the bridges named (setpci ECAP_ACS+6.w, or the "
    "kernel's pci=disable_acs_redir=), then seat host verify-p2p --step"
)


def pcie_rows(facts: dict | None) -> list[Row]:
    """ACS on the bridges between each GPU pair, and the GPUs' IOMMU groups (host.pcie.facts)."""
    if facts is None:
        return [cannot(LAYER, "PCIe ACS", "no GPUs to place on the bus: no NVIDIA driver answers here")]
    pairs = facts["pairs"]
    redirected = [p for p in pairs if p["verdict"] in ("redirected", "blocked")]
    unknown = [p for p in pairs if p["verdict"] == "unknown"]
    name = lambda p: f"GPU{p['gpus'][0]}-GPU{p['gpus'][1]}"  # noqa: E731
    if not pairs:
        acs = ok(LAYER, "PCIe ACS", "one GPU: no peer path to check")
    elif redirected:
        acs = warn(
            LAYER,
            "PCIe ACS",
            f"{len(redirected)} of {len(pairs)} pairs redirected to the root "
            f"complex or blocked; {name(redirected[0])}: {redirected[0]['why']}",
            ACS_FIX,
        )
    elif unknown:
        acs = cannot(
            LAYER,
            "PCIe ACS",
            f"{name(unknown[0])}: {unknown[0]['why']}",
            "run seat doctor as root (extended config space is root's)"
            if "needs root" in unknown[0]["why"]
            else "root would not see more: the reason names what is missing",
        )
    else:
        acs = ok(LAYER, "PCIe ACS", f"{len(pairs)} pairs: {pairs[0]['why']}")
    iommu = facts["iommu"]
    where = (
        f"; {facts['virtualisation']} VM: the hypervisor's bus, not the host's"
        if facts["virtualisation"]
        else ""
    )
    evidence = f"{iommu['verdict']}: {iommu['why']}{where}"
    if iommu["verdict"] == "partial":  # one GPU outside the IOMMU the others sit behind: not one seat's bus
        return [
            acs,
            warn(
                LAYER,
                "IOMMU groups",
                evidence,
                "ls -l /sys/bus/pci/devices/*/iommu_group for the GPU "
                "named; check its driver binding and the kernel log",
            ),
        ]
    return [acs, ok(LAYER, "IOMMU groups", evidence)]


def step_rows(step: dict | None) -> list[Row]:
    """Whether `verify-p2p --step` measured one decode step's communication on this boot."""
    if step is None:
        return []
    evidence = f"{step['verdict']}: {step['why']}"
    if step["verdict"].startswith("FAILED"):
        return [fail(LAYER, "step probe", evidence, "seat host verify-p2p --step; seat host status")]
    if step["verdict"] == "not measured":
        return [warn(LAYER, "step probe", evidence, "seat host verify-p2p --step")]
    return [ok(LAYER, "step probe", evidence)]
