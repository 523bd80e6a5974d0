"""Run on a GPU machine: the bench's NVML inventory and per-request telemetry, under a real load.

Samples for two seconds while torch multiplies matrices on every GPU, and prints one JSON object
(inventory + telemetry summary) for tests/fixtures/. Usage: python tests/benchmarks/telemetry_on_gpu.py
"""

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from seatkit.bench import telemetry  # noqa: E402
from seatkit.host import gpus  # noqa: E402

inventory = gpus.inventory()
sampler = telemetry.Sampler()
sampler.start()
matrices = [
    torch.randn(8192, 8192, device=f"cuda:{i}", dtype=torch.bfloat16)
    for i in range(torch.cuda.device_count())
]
deadline = time.monotonic() + 2.0
while time.monotonic() < deadline:
    for m in matrices:
        m @ m
    torch.cuda.synchronize()
print(json.dumps({"inventory": inventory, "telemetry": sampler.finish()}, indent=2))
