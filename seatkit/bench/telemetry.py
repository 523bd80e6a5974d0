"""NVML telemetry sampled during each measured request (None where no NVIDIA driver answers).

The GPU inventory a run records comes from seatkit.host.gpus.
"""

from __future__ import annotations

import statistics
import threading

import pynvml

HZ = 10.0
# Readings per GPU: name -> function of a device handle (units in the names).
READINGS = {
    "power_w": lambda h: pynvml.nvmlDeviceGetPowerUsage(h) / 1000,
    "sm_clock_mhz": lambda h: pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
    "mem_clock_mhz": lambda h: pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM),
    "temperature_c": lambda h: pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU),
    "gpu_util_pct": lambda h: pynvml.nvmlDeviceGetUtilizationRates(h).gpu,
    "mem_util_pct": lambda h: pynvml.nvmlDeviceGetUtilizationRates(h).memory,
    "pcie_tx_mb_s": lambda h: pynvml.nvmlDeviceGetPcieThroughput(h, pynvml.NVML_PCIE_UTIL_TX_BYTES) / 1024,
    "pcie_rx_mb_s": lambda h: pynvml.nvmlDeviceGetPcieThroughput(h, pynvml.NVML_PCIE_UTIL_RX_BYTES) / 1024,
}
# Throttle (clock event) reasons by bit; where two names share a bit, the later one names it.
THROTTLE = {
    getattr(pynvml, name): name[len("nvmlClocksThrottleReason") :]
    for name in sorted(dir(pynvml))
    if name.startswith("nvmlClocksThrottleReason")
    and name
    not in ("nvmlClocksThrottleReasonAll", "nvmlClocksThrottleReasonNone", "nvmlClocksThrottleReasonUnknown")
}


def _safe(read, handle):
    try:
        return read(handle)
    except pynvml.NVMLError:
        return None


def _handles() -> list | None:
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return None
    return [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]


class Sampler(threading.Thread):
    """Samples every GPU at HZ until finish(); finish() returns per-GPU mean and max."""

    def __init__(self):
        super().__init__(daemon=True)
        self.handles = _handles() or []
        self.stop_event = threading.Event()
        self.samples: list[list[dict]] = [[] for _ in self.handles]
        self.throttle: list[int] = [0 for _ in self.handles]

    def run(self):
        while True:
            for i, handle in enumerate(self.handles):
                self.samples[i].append({k: _safe(read, handle) for k, read in READINGS.items()})
                self.throttle[i] |= _safe(pynvml.nvmlDeviceGetCurrentClocksThrottleReasons, handle) or 0
            if self.stop_event.wait(1 / HZ):
                return

    def finish(self) -> list[dict] | None:
        self.stop_event.set()
        if self.is_alive():
            self.join()
        if not self.handles:
            return None
        out = []
        for samples, mask in zip(self.samples, self.throttle):
            gpu = {
                "samples": len(samples),
                "throttle_reasons": sorted(n for bit, n in THROTTLE.items() if mask & bit),
            }
            for key in READINGS:
                values = [s[key] for s in samples if s[key] is not None]
                gpu[key] = {"mean": statistics.fmean(values), "max": max(values)} if values else None
            out.append(gpu)
        return out
