"""Live arms: knobs set without a reboot (CPU boost, GPU power limit), and put back at the end.

Each live visit sets every knob the campaign's arms name, to the arm's value or to the value the
campaign started with, so an arm that leaves a knob out measures the start value.
"""

from __future__ import annotations

from seatkit.errors import SeatError
from seatkit.host.system import System

BOOST = "/sys/devices/system/cpu/cpufreq/boost"


def read(system: System, knobs: set[str]) -> dict:
    out: dict[str, bool | int] = {}
    if "cpu_boost" in knobs:
        text = system.read(BOOST)
        if text is None:
            raise SeatError(
                f"{BOOST} is absent: this CPU driver has no boost switch",
                "drop the cpu_boost arms from the campaign",
            )
        out["cpu_boost"] = text.strip() == "1"
    if "gpu_power_limit_w" in knobs:
        rc, output = system.run(["nvidia-smi", "--query-gpu=power.limit", "--format=csv,noheader,nounits"])
        if rc:
            raise SeatError(f"nvidia-smi cannot read the power limit (exit {rc}): {output.strip()[-200:]}")
        limits = {round(float(line)) for line in output.split()}
        if len(limits) != 1:
            raise SeatError(
                f"the GPUs have different power limits ({sorted(limits)}): one start value "
                "cannot be put back",
                "set them alike first (nvidia-smi -pl W)",
            )
        out["gpu_power_limit_w"] = limits.pop()
    return out


def apply(system: System, values: dict) -> None:
    for knob, value in sorted(values.items()):
        if knob == "cpu_boost":
            try:  # sysfs takes a plain write; the kit's atomic rename cannot replace it
                with open(system.path(BOOST), "w") as handle:
                    handle.write("1\n" if value else "0\n")
            except OSError as exc:
                raise SeatError(f"cannot write {BOOST}: {exc.strerror}", "run it as root") from None
        else:
            rc, output = system.run(["nvidia-smi", "-pl", str(int(value))])
            if rc:
                raise SeatError(f"nvidia-smi -pl {value} failed (exit {rc}): {output.strip()[-200:]}")
        system.fault(f"campaign: set {knob}")


def restore(system: System, values: dict) -> list[str]:
    """Put every knob back that will go; what would not, with the way to do it by hand."""
    left = []
    for knob, value in sorted(values.items()):
        try:
            apply(system, {knob: value})
        except SeatError as exc:
            by_hand = f"echo {int(value)} > {BOOST}" if knob == "cpu_boost" else f"nvidia-smi -pl {value}"
            left.append(f"{knob}={value} ({exc.message}): run `{by_hand}`")
    return left


def knobs(arms) -> set[str]:
    return {k for a in arms if a.live is not None for k in a.live}
