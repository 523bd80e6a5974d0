"""The PCIe facts that decide where peer traffic goes: ACS on the bridges, IOMMU groups, ATS.

Read from sysfs alone: each device's `config` file (its configuration space) and the
`iommu_group` links. Extended capabilities (ACS, ATS) sit past byte 256 of config space, which
the kernel shows to root only; without root, or where config space reads as all ones (a device
that fell off the bus), a fact is `None` with the reason beside it, never a guess.

Peer traffic between two GPUs crosses the bridges on their paths up to the first bridge they
share: those are the bridges whose ACS control matters. Request or completion redirect on any of
them sends every peer transaction up to the root complex (and through the IOMMU), which is what
the paper's rig tried to clear on the live system.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from seatkit.host import detect
from seatkit.host.system import System

ADDRESS = re.compile(r"^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")  # VMD domains have 5+ digits
ROOT_BUS = re.compile(r"^pci([0-9a-f]{4,8}:[0-9a-f]{2})$")
EXT_START, EXT_END, EXT_ACS, EXT_ATS = 0x100, 0x1000, 0x000D, 0x000F
# ACS control bits (PCIe base spec 7.7.8.3), in lspci's names.
ACS_BITS = ("SrcValid", "TransBlk", "ReqRedir", "CmpltRedir", "UpstreamFwd", "EgressCtrl", "DirectTrans")
REDIRECTS = ("ReqRedir", "CmpltRedir")  # peer requests or completions go up to the root complex
EGRESS = "EgressCtrl"  # without a redirect, requests to the ports in the egress vector are blocked


def _u16(data: bytes, at: int) -> int:
    return int.from_bytes(data[at : at + 2], "little")


def _u32(data: bytes, at: int) -> int:
    return int.from_bytes(data[at : at + 4], "little")


def extended_caps(config: bytes) -> dict[int, int]:
    """Extended capability id -> offset, walking the list from 0x100 (bounded: a loop ends it)."""
    found: dict[int, int] = {}
    at, seen = EXT_START, set()
    while EXT_START <= at <= len(config) - 8 and at not in seen:
        seen.add(at)
        header = _u32(config, at)
        if header in (0, 0xFFFFFFFF):
            break
        found.setdefault(header & 0xFFFF, at)
        at = (header >> 20) & 0xFFC
    return found


def device(system: System, address: str) -> dict:
    """One function's identity and its ACS and ATS state, each None with a reason when unreadable."""
    config = system.read_bytes(f"/sys/bus/pci/devices/{address}/config")
    facts: dict[str, object] = {
        "address": address,
        "vendor": None,
        "device": None,
        "bridge": None,
        "acs": None,
        "ats": None,
    }
    if not config or len(config) < 64:
        return {**facts, "why": "config space not readable"}
    if _u16(config, 0) == 0xFFFF:
        return {**facts, "why": "config space reads as all ones: the device is gone or broken"}
    facts.update(
        vendor=f"{_u16(config, 0):04x}", device=f"{_u16(config, 2):04x}", bridge=(config[0x0E] & 0x7F) == 1
    )
    if (
        len(config) == EXT_START and system.euid == 0
    ):  # root is shown all there is: a conventional PCI function
        return {
            **facts,
            "acs": "no ACS capability",
            "ats": "no ATS capability",
            "why": "no extended config space (a conventional PCI function)",
        }
    if len(config) <= EXT_START:
        return {
            **facts,
            "why": f"only the first {len(config)} bytes are readable (extended config space needs root)",
        }
    if len(config) < EXT_END:  # a short read: the capability list may go on past its end
        return {**facts, "why": f"config space ends at byte {len(config)}, not {EXT_END}: cut short"}
    if _u32(config, EXT_START) == 0xFFFFFFFF:
        return {**facts, "why": "extended config space reads as all ones"}
    caps = extended_caps(config)
    if EXT_ACS in caps:
        control = _u16(config, caps[EXT_ACS] + 6)
        facts["acs"] = {name: bool(control >> bit & 1) for bit, name in enumerate(ACS_BITS)}
    else:
        facts["acs"] = "no ACS capability"
    if EXT_ATS in caps:
        facts["ats"] = "enabled" if _u16(config, caps[EXT_ATS] + 6) & 0x8000 else "disabled"
    else:
        facts["ats"] = "no ATS capability"
    return facts


def chain(system: System, address: str) -> dict:
    """The root bus and the bridges above a device, top first, from its resolved sysfs path."""
    link = system.path(f"/sys/bus/pci/devices/{address}")
    if not os.path.exists(link):  # False on any error, a sysfs we may not read included
        return {"root_bus": None, "bridges": [], "why": f"no readable sysfs device for {address}"}
    parts = Path(os.path.realpath(link)).parts
    roots = [n for n, p in enumerate(parts) if ROOT_BUS.match(p)]
    if not roots:  # no host bridge on the path: where it sits, and so what lies between, is unknown
        return {"root_bus": None, "bridges": [], "why": f"the sysfs path of {address} names no PCI root bus"}
    start = roots[-1]  # behind VMD, the domain the VMD controller hosts
    root = ROOT_BUS.match(parts[start])  # matched above: roots are its matches
    functions = [p for p in parts[start:] if ADDRESS.match(p)]
    return {"root_bus": root.group(1) if root else None, "bridges": functions[:-1], "vmd": len(roots) > 1}


def iommu_group(system: System, address: str) -> str | None:
    link = system.path(f"/sys/bus/pci/devices/{address}/iommu_group")
    return os.path.basename(os.path.realpath(link)) if os.path.exists(link) else None


def group_members(system: System, group: str) -> list[str]:
    return system.entries(f"/sys/kernel/iommu_groups/{group}/devices") or []


def sysfs_address(bus_id: str) -> str:
    """NVML pads the domain to 8 digits; sysfs uses 4, or more for a VMD domain."""
    domain, _, rest = bus_id.lower().partition(":")
    try:
        return f"{int(domain, 16):04x}:{rest}"
    except ValueError:  # not an address at all: chain() then says no such device
        return bus_id.lower()


def _between(a: dict, b: dict) -> list[str]:
    """Bridges peer traffic crosses: each path below the first bridge both share."""
    if a["root_bus"] != b["root_bus"]:
        return a["bridges"] + b["bridges"]  # across host bridges: every bridge on both paths
    shared = 0
    while shared < min(len(a["bridges"]), len(b["bridges"])) and a["bridges"][shared] == b["bridges"][shared]:
        shared += 1
    return a["bridges"][shared:] + b["bridges"][shared:]


def _pair_verdict(bridges: list[dict], a: dict, b: dict) -> tuple[str, str]:
    if a["root_bus"] != b["root_bus"]:
        route = f"across host bridges ({a['root_bus']} and {b['root_bus']})"
    elif not bridges:
        route = "no bridge between them (a virtual machine's flat bus, or one board)"
    else:
        route = f"through {len(bridges)} bridge(s)"
    redirecting = [
        f"{d['address']} ({'+'.join(n for n in REDIRECTS if d['acs'][n])})"
        for d in bridges
        if isinstance(d["acs"], dict) and any(d["acs"][n] for n in REDIRECTS)
    ]
    unknown = [d for d in bridges if d["acs"] is None]
    egress = [d["address"] for d in bridges if isinstance(d["acs"], dict) and d["acs"][EGRESS]]
    if redirecting:
        return (
            "redirected",
            f"{route}; ACS redirects peer traffic to the root complex at {', '.join(redirecting)}",
        )
    if egress:
        return "blocked", (
            f"{route}; ACS P2P egress control at {', '.join(egress)}: peer requests to the ports "
            "its egress vector names are blocked"
        )
    if unknown:
        return "unknown", (
            f"{route}; ACS not readable at {', '.join(d['address'] for d in unknown)} "
            f"({unknown[0].get('why', '')})"
        )
    return "direct", f"{route}; no bridge on the path redirects peer traffic"


def facts(bus_ids: list[str], system: System | None = None) -> dict:
    """Per GPU its chain, IOMMU group and ATS; per pair the bridges between and their ACS."""
    system = system or System()
    gpus: list[dict] = []
    devices: dict[str, dict] = {}
    for index, bus_id in enumerate(bus_ids):
        address = sysfs_address(bus_id)
        found = chain(system, address)
        for bridge in found["bridges"]:
            devices.setdefault(bridge, device(system, bridge))
        own = device(system, address)
        group = iommu_group(system, address)
        gpus.append(
            {
                "index": index,
                "address": address,
                **found,
                "iommu_group": group,
                "iommu_group_members": group_members(system, group) if group else [],
                "ats": own["ats"],
                "config_why": own.get("why"),
            }
        )
    pairs = []
    for i, a in enumerate(gpus):
        for b in gpus[i + 1 :]:
            if a.get("why") or b.get("why"):
                pairs.append(
                    {
                        "gpus": [a["index"], b["index"]],
                        "bridges": [],
                        "verdict": "unknown",
                        "why": a.get("why") or b.get("why"),
                    }
                )
                continue
            bridges = [devices[x] for x in _between(a, b)]
            verdict, why = _pair_verdict(bridges, a, b)
            pairs.append(
                {
                    "gpus": [a["index"], b["index"]],
                    "verdict": verdict,
                    "why": why,
                    "bridges": [{"address": d["address"], "acs": d["acs"]} for d in bridges],
                }
            )
    groups = [g["iommu_group"] for g in gpus]
    return {
        "virtualisation": detect.virtualisation(system),
        "gpus": gpus,
        "pairs": pairs,
        "bridges": devices,
        "vmd": any(g.get("vmd") for g in gpus),
        "iommu": _iommu_summary(system, groups),
    }


def _iommu_summary(system: System, groups: list[str | None]) -> dict:
    if not groups:
        return {"verdict": "no GPUs", "why": "no GPU to place in a group"}
    if all(g is None for g in groups):
        listed = system.entries("/sys/kernel/iommu_groups")
        return {
            "verdict": "no groups",
            "why": "the GPUs are in no IOMMU group: the IOMMU is off (or not exposed to this system)"
            if not listed
            else "IOMMU groups exist, yet the GPUs are in none",
        }
    known = [g for g in groups if g is not None]
    if len(known) < len(groups):
        return {
            "verdict": "partial",
            "why": f"GPU{groups.index(None)} is in no IOMMU group while others are "
            f"(groups {', '.join(g or '-' for g in groups)}): a half-bound GPU?",
        }
    if len(known) > 1 and len(set(known)) == 1:
        return {
            "verdict": "shared",
            "why": f"all GPUs share IOMMU group {known[0]}: the kernel cannot "
            "isolate them (no ACS between them), so peer traffic stays below the root",
        }
    return {
        "verdict": "separate",
        "why": f"the GPUs sit in IOMMU groups {', '.join(g or '-' for g in groups)}",
    }
