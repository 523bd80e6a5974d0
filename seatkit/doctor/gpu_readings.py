"""What `seat doctor` reads from NVML: driver, and per GPU its link, power, clocks and persistence."""

from __future__ import annotations

from seatkit import nvml

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


def _event_reasons(handle) -> list[str] | str:
    mask = nvml.clock_events(handle)
    return reasons(mask) if isinstance(mask, int) else mask


def _gpu(index: int, h) -> dict:
    pynvml = nvml.api()
    return {
        "index": index,
        "name": nvml.text(pynvml.nvmlDeviceGetName(h)),
        "pcie_gen": nvml.safe(pynvml.nvmlDeviceGetCurrPcieLinkGeneration, h),
        "pcie_width": nvml.safe(pynvml.nvmlDeviceGetCurrPcieLinkWidth, h),
        "pcie_max_gen": nvml.safe(pynvml.nvmlDeviceGetMaxPcieLinkGeneration, h),
        "pcie_max_width": nvml.safe(pynvml.nvmlDeviceGetMaxPcieLinkWidth, h),
        "power_limit_w": nvml.watts(nvml.safe(pynvml.nvmlDeviceGetPowerManagementLimit, h)),
        "sm_clock_mhz": nvml.safe(pynvml.nvmlDeviceGetClockInfo, h, pynvml.NVML_CLOCK_SM),
        "max_sm_clock_mhz": nvml.safe(pynvml.nvmlDeviceGetMaxClockInfo, h, pynvml.NVML_CLOCK_SM),
        "clock_event_reasons": _event_reasons(h),
        "persistence_mode": nvml.safe(pynvml.nvmlDeviceGetPersistenceMode, h),
    }


def read() -> dict:
    """{"driver", "gpus": [...]}, or {"error": why} when no NVIDIA driver answers."""
    try:
        nvml.start()
    except nvml.NoDriver as exc:
        return {"error": f"no NVIDIA driver answers (NVML: {exc})"}
    pynvml = nvml.api()
    try:
        gpus = [_gpu(i, h) for i, h in enumerate(nvml.handles())]
        return {"driver": nvml.text(pynvml.nvmlSystemGetDriverVersion()), "gpus": gpus}
    except pynvml.NVMLError as exc:  # a GPU fallen off the bus, say: the reason to run doctor
        return {"error": f"NVML failed reading the GPUs ({exc})"}
    finally:
        pynvml.nvmlShutdown()
