"""`seat host gpus`: the NVML inventory — links, BAR1, P2P status for every pair, power, topology —
and the PCIe facts from sysfs (ACS, IOMMU groups, ATS)."""

from __future__ import annotations

from seatkit import nvml
from seatkit.host import pcie
from seatkit.host.system import System

P2P_STATUS = {
    0: "OK",
    1: "chipset not supported",
    2: "GPU not supported",
    3: "IOH topology not supported",
    4: "disabled by registry key",
    5: "not supported",
    6: "unknown",
}
ANCESTOR = {
    0: "same board",
    10: "single PCIe switch (PIX)",
    20: "multiple PCIe switches (PXB)",
    30: "host bridge (PHB)",
    40: "same NUMA node (NODE)",
    50: "across NUMA nodes (SYS)",
}

# NVML's nvmlGpuP2PCapsIndex_t values, spelled here: some nvidia-ml-py releases define the
# constants as one-element tuples (`NVML_P2P_CAPS_INDEX_READ = 0,`), which ctypes cannot pass.
P2P_READ, P2P_WRITE, P2P_NVLINK = 0, 1, 2


def topology(system: System, bus_id: str) -> dict:
    """The bridges between the root complex and the GPU (seatkit.host.pcie reads them from sysfs)."""
    found = pcie.chain(system, pcie.sysfs_address(bus_id))
    if found["root_bus"] is None:
        return {"class": "unknown", "why": found["why"]}
    bridges = len(found["bridges"])
    kind = (
        "on the root bus, no bridge (typical of a VM)"
        if bridges == 0
        else "direct attach (root port)"
        if bridges == 1
        else "behind a PCIe switch"
    )
    return {"bridges": found["bridges"], "bridges_above": bridges, "class": kind}


def inventory(system: System | None = None) -> dict | None:
    """Everything NVML says about the GPUs; None without an NVIDIA driver."""
    system = system or System()
    try:
        nvml.start()
    except nvml.NoDriver:
        return None
    pynvml, handles = nvml.api(), nvml.handles()
    cuda = nvml.safe(pynvml.nvmlSystemGetCudaDriverVersion)
    gpus = [_gpu(i, h, system) for i, h in enumerate(handles)]
    pairs = _pairs(handles)
    return {
        "driver": nvml.text(pynvml.nvmlSystemGetDriverVersion()),
        "cuda": f"{cuda // 1000}.{cuda % 1000 // 10}" if isinstance(cuda, int) else cuda,
        "gpus": gpus,
        "p2p": pairs,
        "pcie": pcie.facts([g["bus_id"] for g in gpus], system),
        "p2p_note": None if pairs else "one GPU: no peers to check",
    }


def _gpu(index: int, h, system: System) -> dict:
    pynvml = nvml.api()
    memory = nvml.safe(pynvml.nvmlDeviceGetMemoryInfo, h)
    bar1 = nvml.safe(pynvml.nvmlDeviceGetBAR1MemoryInfo, h)
    bus_id = nvml.text(pynvml.nvmlDeviceGetPciInfo(h).busId)
    return {
        "index": index,
        "name": nvml.text(pynvml.nvmlDeviceGetName(h)),
        "uuid": nvml.text(nvml.safe(pynvml.nvmlDeviceGetUUID, h)),
        "bus_id": bus_id,
        "memory_mib": memory.total // 2**20 if not isinstance(memory, str) else memory,
        "bar1_total_mib": bar1.bar1Total // 2**20 if not isinstance(bar1, str) else bar1,
        "pcie_gen": nvml.safe(pynvml.nvmlDeviceGetCurrPcieLinkGeneration, h),
        "pcie_width": nvml.safe(pynvml.nvmlDeviceGetCurrPcieLinkWidth, h),
        "pcie_max_gen": nvml.safe(pynvml.nvmlDeviceGetMaxPcieLinkGeneration, h),
        "pcie_max_width": nvml.safe(pynvml.nvmlDeviceGetMaxPcieLinkWidth, h),
        "power_limit_w": nvml.watts(nvml.safe(pynvml.nvmlDeviceGetPowerManagementLimit, h)),
        "power_default_limit_w": nvml.watts(nvml.safe(pynvml.nvmlDeviceGetPowerManagementDefaultLimit, h)),
        "max_sm_clock_mhz": nvml.safe(pynvml.nvmlDeviceGetMaxClockInfo, h, pynvml.NVML_CLOCK_SM),
        "topology": topology(system, bus_id),
    }


def _pairs(handles: list) -> list[dict]:
    """P2P status and common ancestor of every ordered pair of GPUs."""
    ancestor = nvml.api().nvmlDeviceGetTopologyCommonAncestor
    return [
        {
            "from": i,
            "to": j,
            "read": _p2p(a, b, P2P_READ),
            "write": _p2p(a, b, P2P_WRITE),
            "nvlink": _p2p(a, b, P2P_NVLINK),  # OK: peers talk over NVLink, not PCIe
            "common_ancestor": ANCESTOR.get(nvml.safe(ancestor, a, b), "unknown"),
        }
        for i, a in enumerate(handles)
        for j, b in enumerate(handles)
        if i != j
    ]


def _p2p(a, b, index) -> str:
    status = nvml.safe(nvml.api().nvmlDeviceGetP2PStatus, a, b, index)
    return P2P_STATUS.get(status, str(status)) if isinstance(status, int) else status
