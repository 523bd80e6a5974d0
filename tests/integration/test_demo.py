"""The README's main job: `seat demo` sets up, starts, benches briefly and stops cpu-smoke."""

import json
import os
import subprocess
from pathlib import Path

from conftest import BIN, free_port
from seatkit.serve import launch


def servers_on(port: int) -> list[str]:
    """PIDs of vLLM servers started for this port."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if any(b"vllm" in a for a in argv) and str(port).encode() in argv:
            found.append(cmdline.parent.name)
    return found


def test_demo_runs_a_short_bench_and_leaves_no_process(vllm_runtime, tmp_path):
    port = free_port()
    done = subprocess.run([str(BIN / "seat"), "demo", "--out", str(tmp_path)], capture_output=True,
                          text=True, timeout=900,
                          env={**os.environ, "SEAT_PORT": str(port), "COLUMNS": "200"})
    assert done.returncode == 0, done.stderr
    (run_dir,) = tmp_path.iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert set(summary["suites"]) == {"code", "prose"}
    assert summary["suites"]["code"]["requests"] == 9
    assert "tokens/step" in done.stdout
    assert launch.recorded("cpu-smoke") is None and servers_on(port) == []
