"""NVML telemetry sampled during each measured request (None where no NVIDIA driver answers).

The GPU inventory a run records comes from seatkit.host.gpus.
"""

from __future__ import annotations

import functools
import statistics
import threading

from seatkit import nvml

HZ = 10.0
# Readings per GPU: name -> function of pynvml and a device handle (units in the names).
READINGS = {
    "power_w": lambda nv, h: nv.nvmlDeviceGetPowerUsage(h) / 1000,
    "sm_clock_mhz": lambda nv, h: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM),
    "mem_clock_mhz": lambda nv, h: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM),
    "temperature_c": lambda nv, h: nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU),
    "gpu_util_pct": lambda nv, h: nv.nvmlDeviceGetUtilizationRates(h).gpu,
    "mem_util_pct": lambda nv, h: nv.nvmlDeviceGetUtilizationRates(h).memory,
    "pcie_tx_mb_s": lambda nv, h: nv.nvmlDeviceGetPcieThroughput(h, nv.NVML_PCIE_UTIL_TX_BYTES) / 1024,
    "pcie_rx_mb_s": lambda nv, h: nv.nvmlDeviceGetPcieThroughput(h, nv.NVML_PCIE_UTIL_RX_BYTES) / 1024,
}


@functools.cache
def throttle_names() -> dict[int, str]:
    """Throttle (clock event) reasons by bit, as pynvml names them; where two share a bit, the later names it."""
    pynvml = nvml.api()
    return {
        getattr(pynvml, name): name[len("nvmlClocksThrottleReason") :]
        for name in sorted(dir(pynvml))
        if name.startswith("nvmlClocksThrottleReason")
        and name.removeprefix("nvmlClocksThrottleReason") not in ("All", "None", "Unknown")
    }


def _handles() -> list:
    try:
        nvml.start()
    except nvml.NoDriver:
        return []
    return nvml.handles()


class Sampler(threading.Thread):
    """Samples every GPU at HZ until finish(); finish() returns per-GPU mean and max."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.handles = _handles()
        self.stop_event = threading.Event()
        self.samples: list[list[dict]] = [[] for _ in self.handles]
        self.throttle: list[int] = [0 for _ in self.handles]

    def run(self) -> None:
        pynvml = nvml.api()
        while True:
            for i, handle in enumerate(self.handles):
                self.samples[i].append({k: nvml.safe(read, pynvml, handle) for k, read in READINGS.items()})
                mask = nvml.clock_events(handle)
                self.throttle[i] |= mask if isinstance(mask, int) else 0
            if self.stop_event.wait(1 / HZ):
                return

    def finish(self) -> list[dict] | None:
        self.stop_event.set()
        if self.is_alive():
            self.join()
        if not self.handles:
            return None
        names = throttle_names()
        out = []
        for samples, mask in zip(self.samples, self.throttle, strict=True):
            gpu: dict = {
                "samples": len(samples),
                "throttle_reasons": sorted(n for bit, n in names.items() if mask & bit),
            }
            for key in READINGS:
                values = [s[key] for s in samples if nvml.measured(s[key])]
                gpu[key] = {"mean": statistics.fmean(values), "max": max(values)} if values else None
            out.append(gpu)
        return out
