"""`seat host status`: per setting, desired | configured | live, and a verdict.

OK               live matches the profile, and so does what the next boot configures
REVERTS          live matches the profile, but the next boot (or module load) drops it
PENDING-REBOOT   configured as desired, the running kernel still has the old command line
PENDING-RELOAD   configured as desired, the loaded modules still have the old options
DRIFT            the files on disk say something other than the profile
UNKNOWN          a column could not be read; the row says why
REFUSED          the profile asks for something known to be wrong on the running driver
"""

from __future__ import annotations

from seatkit.host import cmdline, p2p, state, step
from seatkit.host import gpus as gpu_inventory
from seatkit.host.journal import Journal
from seatkit.host.system import System
from seatkit.seat import host_profiles
from seatkit.seat.host_profiles import HostProfile
from seatkit.text import plain

REVERTS = {
    "PENDING-REBOOT": "reverts at the next boot",
    "PENDING-RELOAD": "reverts at the next boot (or module reload)",
}


def _verdict(desired, configured: state.Reading, live: state.Reading, pending: str) -> str:
    if live.known and live.value == desired:
        return "REVERTS" if configured.known and configured.value != desired else "OK"
    if configured.known and configured.value != desired:
        return "DRIFT"
    if configured.known and live.known:
        return pending
    return "UNKNOWN"


def _row(
    setting: str, desired, configured: state.Reading, live: state.Reading, pending: str, **details
) -> dict:
    verdict = _verdict(desired, configured, live, pending)
    why = (
        # The source is a path or a sentence ("no modprobe.d file sets ..."): the value goes first.
        {"why": f"{REVERTS[pending]}: configured {plain(_jsonable(configured.value))} ({configured.source})"}
        if verdict == "REVERTS"
        else {}
    )
    return {
        "setting": setting,
        "desired": desired,
        "configured": configured.value,
        "configured_from": configured.source,
        "live": live.value,
        "live_from": live.source,
        "verdict": verdict,
        **why,
        **details,
    }


def _jsonable(value):
    if isinstance(value, set):
        return sorted(value)
    return value


def iommu_row(profile: HostProfile, system: System) -> dict:
    vendor = state.cpu_vendor(system)
    if vendor is None:
        return {
            "setting": "iommu",
            "verdict": "UNKNOWN",
            "desired": None,
            "configured": None,
            "live": None,
            "why": "CPU vendor not recognised in /proc/cpuinfo: the token set "
            "depends on it (amd_iommu or intel_iommu)",
        }
    desired = set(profile.iommu.tokens[vendor])
    keys = {cmdline.key(t) for t in desired}

    def deciding(reading: state.Reading[set[str]]) -> state.Reading[set[str]]:
        """Only the profile's keys, as plan judges."""
        if reading.value is None:
            return reading
        return state.Reading({t for t in reading.value if cmdline.key(t) in keys}, reading.source)

    row = _row(
        "iommu",
        desired,
        deciding(state.configured_cmdline(system)),
        deciding(state.live_cmdline(system)),
        "PENDING-REBOOT",
        cpu_vendor=vendor,
        **state.live_iommu_facts(system),
    )
    if profile.iommu.mode == "off" and row["verdict"] == "OK" and row["iommu_units"]:
        row["verdict"] = "DRIFT"
        row["why"] = "the tokens are live, yet /sys/class/iommu still lists IOMMU units"
    return row


def registry_row(profile: HostProfile, system: System, driver: str | None) -> dict:
    keys = host_profiles.registry_keys()
    desired = host_profiles.parse_dwords(keys.forms[profile.registry].dwords)
    row = _row(
        "registry_keys",
        desired,
        state.configured_dwords(system),
        state.live_dwords(system),
        "PENDING-RELOAD",
        form=profile.registry,
        driver=driver,
    )
    rule = host_profiles.rule_for(driver, keys) if driver else None
    if rule and profile.registry in rule.refuse:
        row.update(verdict="REFUSED", why=" ".join(rule.why.split()))
    elif rule:
        row["note"] = " ".join(rule.why.split())
    return row


def rebar_row(profile: HostProfile, system: System, inventory: dict | None) -> dict:
    dwords = state.configured_dwords(system)
    configured = state.Reading(
        dwords.value.get("EnableResizableBar") == "1" if dwords.value is not None else None, dwords.source
    )
    live: state.Reading[bool]
    if inventory is None:
        live = state.Reading(None, "NVML unavailable: no NVIDIA driver answers")
    else:
        need = profile.rebar.min_bar1_fraction_of_vram
        sizes = [(g["bar1_total_mib"], g["memory_mib"]) for g in inventory["gpus"]]
        readable = all(isinstance(b, int) and isinstance(m, int) for b, m in sizes)
        live = state.Reading(
            all(b >= need * m for b, m in sizes) if readable and sizes else None,
            "NVML BAR1 / memory, MiB: " + ", ".join(f"GPU{i} {b} / {m}" for i, (b, m) in enumerate(sizes))
            if sizes
            else "no GPUs",
        )
    # Firmware ReBAR is not readable from the OS; the live BAR1 size is what counts.
    return _row(
        "rebar", True, configured, live, "PENDING-RELOAD", firmware="unknown (not readable from the OS)"
    )


def hmm_row(profile: HostProfile, system: System) -> dict:
    return _row(
        "hmm_disabled",
        profile.hmm_disabled,
        state.configured_hmm_disabled(system),
        state.live_hmm_disabled(system),
        "PENDING-RELOAD",
    )


def status(profile: HostProfile, system: System | None = None) -> dict:
    system = system or System()
    inventory = gpu_inventory.inventory(system)
    driver = state.driver_version(system) or (inventory or {}).get("driver")
    rows = [
        iommu_row(profile, system),
        registry_row(profile, system, driver),
        rebar_row(profile, system, inventory),
        hmm_row(profile, system),
    ]
    rows = [{k: _jsonable(v) for k, v in row.items()} for row in rows]
    journal = Journal(system)
    return {
        "profile": profile.name,
        "boot_id": state.boot_id(system),
        "driver": driver,
        "rows": rows,
        "transactions": {
            "in_force": [
                {
                    "tx": t.txid,
                    "profile": t.begin["profile"],
                    "applied_in_this_boot": t.begin["facts"]["boot_id"] == state.boot_id(system),
                }
                for t in journal.active()
            ],
            "interrupted": [t.txid for t in journal.open()],
        },
        "data_path": p2p.data_path(system),
        "step": step.step_path(system),
        "pcie": (inventory or {}).get("pcie"),
    }
