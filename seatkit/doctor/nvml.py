"""What `seat doctor` reads from NVML: driver, and per GPU its link, power, clocks and persistence."""

from __future__ import annotations

import pynvml

from seatkit.host.gpus import _safe, _text, _watts

# nvmlClocksEventReasons bits (nvml.h); idle and application clocks are not slowdowns.
REASONS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal",
    0x40: "hw_thermal",
    0x80: "hw_power_brake",
    0x100: "display_clock",
}


def reasons(mask: int) -> list[str]:
    return [name for bit, name in REASONS.items() if mask & bit]


def _event_reasons(handle):
    call = (
        getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
        or pynvml.nvmlDeviceGetCurrentClocksThrottleReasons
    )
    mask = _safe(call, handle)
    return reasons(mask) if isinstance(mask, int) else mask


def read() -> dict:
    """{"driver", "gpus": [...]}, or {"error": why} when no NVIDIA driver answers."""
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        return {"error": f"no NVIDIA driver answers (NVML: {exc})"}
    try:
        gpus = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            gpus.append(
                {
                    "index": i,
                    "name": _text(pynvml.nvmlDeviceGetName(h)),
                    "pcie_gen": _safe(pynvml.nvmlDeviceGetCurrPcieLinkGeneration, h),
                    "pcie_width": _safe(pynvml.nvmlDeviceGetCurrPcieLinkWidth, h),
                    "pcie_max_gen": _safe(pynvml.nvmlDeviceGetMaxPcieLinkGeneration, h),
                    "pcie_max_width": _safe(pynvml.nvmlDeviceGetMaxPcieLinkWidth, h),
                    "power_limit_w": _watts(_safe(pynvml.nvmlDeviceGetPowerManagementLimit, h)),
                    "sm_clock_mhz": _safe(pynvml.nvmlDeviceGetClockInfo, h, pynvml.NVML_CLOCK_SM),
                    "max_sm_clock_mhz": _safe(pynvml.nvmlDeviceGetMaxClockInfo, h, pynvml.NVML_CLOCK_SM),
                    "clock_event_reasons": _event_reasons(h),
                    "persistence_mode": _safe(pynvml.nvmlDeviceGetPersistenceMode, h),
                }
            )
        return {"driver": _text(pynvml.nvmlSystemGetDriverVersion()), "gpus": gpus}
    except pynvml.NVMLError as exc:  # a GPU fallen off the bus, say: the reason to run doctor
        return {"error": f"NVML failed reading the GPUs ({exc})"}
    finally:
        pynvml.nvmlShutdown()
