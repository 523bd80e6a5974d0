"""NVML, read one way by every reader (host gpus, doctor, bench telemetry, preflight).

pynvml is imported on first use, so commands that read no GPU (`seat --help`) do not pay for it.
A reading NVML cannot give (a counter this GPU lacks, a call this driver refuses) is the text
`unavailable (why)`, never an exception: one missing figure does not hide the others.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any


class NoDriver(Exception):
    """NVML did not start: no NVIDIA driver answers here."""


def api() -> ModuleType:
    """pynvml, imported on first use."""
    import pynvml

    return pynvml


def start() -> None:
    """Initialise NVML; NoDriver (with NVML's words) when no NVIDIA driver answers."""
    pynvml = api()
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        raise NoDriver(str(exc)) from None


def handles() -> list:
    """A handle for every GPU, NVML started (a GPU that stopped answering raises NVMLError)."""
    pynvml = api()
    return [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]


def safe(call: Callable[..., Any], *args: Any) -> Any:
    """call(*args), or `unavailable (why)` where NVML cannot give that reading."""
    try:
        return call(*args)
    except api().NVMLError as exc:
        return f"unavailable ({exc})"


def measured(value: Any) -> bool:
    """Whether a reading safe() returned is a figure, not the text of why it is unavailable."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def text(value: Any) -> str:
    """NVML's strings, bytes in older pynvml releases."""
    return value.decode() if isinstance(value, bytes) else str(value)


def watts(milliwatts: Any) -> float | str:
    return milliwatts / 1000 if isinstance(milliwatts, int) else milliwatts


def clock_events(handle: Any) -> int | str:
    """The clock event (throttle) reason bits; older pynvml releases name the call for throttling."""
    pynvml = api()
    call = (
        getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
        or pynvml.nvmlDeviceGetCurrentClocksThrottleReasons
    )
    return safe(call, handle)
