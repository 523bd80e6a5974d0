"""Driver and GPU rows, from NVML readings (gpu_readings.read()), so fixtures from real GPUs test them."""

from __future__ import annotations

from seatkit.doctor.rows import Row, cannot, fail, ok, warn
from seatkit.seat import host_profiles
from seatkit.seat.profiles import Profile

LAYER = "gpu"
SLOWDOWNS = {"hw_slowdown", "hw_thermal", "hw_power_brake", "sw_thermal"}


def _no_driver_fix(inside: str | None, then: str = "") -> str:
    """In a container the driver is the host's: installing one inside is the wrong advice."""
    if inside:
        return (
            f"this runs in a container, {inside}: give it the GPUs (docker run --gpus all, with the "
            f"NVIDIA container toolkit), or run seat doctor on the host"
        )
    return "install the NVIDIA driver" + then


def driver(nv: dict, profile: Profile, host: host_profiles.HostProfile, inside: str | None = None) -> Row:
    if "error" in nv:
        return cannot(LAYER, "driver", nv["error"], _no_driver_fix(inside))
    version = nv["driver"]
    rule = host_profiles.rule_for(version, host_profiles.registry_keys())
    if rule and host.registry in rule.refuse:
        return fail(
            LAYER,
            "driver",
            f"{version}: refuses the {host.registry} registry keys of host "
            f"profile {host.name}: {' '.join(rule.why.split())}",
            "another driver branch, or the other host profile",
        )
    reference = profile.rig.driver
    if reference and host_profiles.version_tuple(version)[:1] != host_profiles.version_tuple(reference)[:1]:
        return warn(
            LAYER,
            "driver",
            f"{version}; the reference rig ran {reference} (another branch)",
            f"driver {reference} to reproduce the card",
        )
    return ok(
        LAYER,
        "driver",
        f"{version} suits host profile {host.name}" + (f"; reference {reference}" if reference else ""),
    )


def gpu_count(nv: dict, profile: Profile, inside: str | None = None) -> Row:
    need = profile.gpus.tensor_parallel_size
    if "error" in nv:
        return fail(
            LAYER,
            "GPU count",
            f"0 visible ({nv['error']}), TP needs {need}",
            _no_driver_fix(inside, "; check CUDA_VISIBLE_DEVICES"),
        )
    seen = len(nv["gpus"])
    names = ", ".join(sorted({g["name"] for g in nv["gpus"]})) or "none"
    if seen < need:
        return fail(
            LAYER,
            "GPU count",
            f"{seen} visible ({names}), TP needs {need}",
            "a host with enough GPUs, or a profile with a smaller TP",
        )
    return ok(LAYER, "GPU count", f"{seen} visible ({names}), TP {need}")


def pcie(nv: dict) -> list[Row]:
    if "error" in nv:
        return [cannot(LAYER, "PCIe links", nv["error"])]
    out = []
    for g in nv["gpus"]:
        now, top = (g["pcie_gen"], g["pcie_width"]), (g["pcie_max_gen"], g["pcie_max_width"])
        check = f"GPU{g['index']} PCIe"
        if not all(isinstance(v, int) for v in (*now, *top)):
            out.append(cannot(LAYER, check, f"NVML: gen {now[0]}, width {now[1]}"))
        elif now[1] < top[1]:
            out.append(
                fail(
                    LAYER,
                    check,
                    f"x{now[1]} of x{top[1]}: halves peer bandwidth",
                    "reseat the card, check the slot and riser, BIOS link width",
                )
            )
        elif now[0] < top[0]:
            out.append(
                warn(
                    LAYER,
                    check,
                    f"Gen{now[0]} of Gen{top[0]} x{now[1]} (an idle GPU "
                    "lowers its generation; read it again under load)",
                    "if it stays low under load: BIOS PCIe speed, riser, slot",
                )
            )
        else:
            out.append(ok(LAYER, check, f"Gen{now[0]} x{now[1]}, its maximum"))
    return out


def power(nv: dict, profile: Profile) -> Row:
    if "error" in nv:
        return cannot(LAYER, "power limit", nv["error"])
    limits = [g["power_limit_w"] for g in nv["gpus"]]
    reference = profile.rig.power_limit_w
    text = ", ".join(f"{w:.0f} W" if isinstance(w, float) else str(w) for w in limits)
    if reference is None:
        return cannot(LAYER, "power limit", f"{text}; the profile names no rig.power_limit_w")
    off = [w for w in limits if not isinstance(w, float) or abs(w - reference) > 1]
    if off:
        return warn(
            LAYER,
            "power limit",
            f"{text}; the reference rig ran {reference:.0f} W per GPU "
            "(a lower limit slows steps, a higher one beats the card)",
            f"nvidia-smi -pl {reference:.0f} to match the reference",
        )
    return ok(LAYER, "power limit", f"{text}, as the reference rig")


def clocks(nv: dict) -> Row:
    if "error" in nv:
        return cannot(LAYER, "clocks", nv["error"])
    parts, worst = [], "OK"
    for g in nv["gpus"]:
        why = g["clock_event_reasons"]
        active = set(why) if isinstance(why, list) else set()
        parts.append(
            f"GPU{g['index']} SM {g['sm_clock_mhz']}/{g['max_sm_clock_mhz']} MHz "
            f"({', '.join(why) if isinstance(why, list) and why else why or 'no reason'})"
        )
        if active & SLOWDOWNS:
            worst = "FAIL"
        elif "sw_power_cap" in active and worst == "OK":
            worst = "WARN"
    evidence = "; ".join(parts) or "no GPUs"
    if worst == "FAIL":
        return fail(
            LAYER,
            "clocks",
            evidence,
            "cooling and power delivery: a thermal or hardware slowdown lengthens every step",
        )
    if worst == "WARN":
        return warn(LAYER, "clocks", evidence, "the power limit caps clocks; see the power row")
    return ok(LAYER, "clocks", evidence)


def persistence(nv: dict) -> Row:
    if "error" in nv:
        return cannot(LAYER, "persistence", nv["error"])
    off = [g["index"] for g in nv["gpus"] if g["persistence_mode"] != 1]
    if off:
        return warn(
            LAYER,
            "persistence",
            f"off on GPU {', '.join(map(str, off))}: the driver re-initialises between processes",
            "nvidia-smi -pm 1, or run nvidia-persistenced",
        )
    return ok(LAYER, "persistence", f"on for {len(nv['gpus'])} GPU(s)")


def rows(nv: dict, profile: Profile, host: host_profiles.HostProfile, inside: str | None = None) -> list[Row]:
    """`inside`: the container sign of this machine, if any (it changes what fixes a missing driver)."""
    if not profile.gpus.count:
        return [ok(LAYER, "GPUs", f"{profile.name} runs on the CPU (gpus.count 0): no GPU to check")]
    return [
        driver(nv, profile, host, inside),
        gpu_count(nv, profile, inside),
        *pcie(nv),
        power(nv, profile),
        clocks(nv),
        persistence(nv),
    ]
