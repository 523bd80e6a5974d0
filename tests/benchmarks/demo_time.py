"""Benchmark: `seat demo` cold and warm on the real model, and the seat's peak memory against the
tiny model's.

Not a test (it asserts nothing about speed); it prints what one run measured. Cold: an empty
SEAT_HOME and vLLM compile cache (only the runtime venv is shared), so it includes the wheel's
download and the conversion (the gguf tool stays in the shared venv). Warm: the same demo again.
The wheel comes through pip, so a warm pip cache (~/.cache/pip) makes "cold" warmer than a new
user's first run: it then measures the conversion and first start more than the download.
Peak RSS is the sum over every process in the server's session (API server, engine core, workers),
sampled twice a second. The load average (1 min) before and after each run is printed beside its
time: on a shared machine other work slows the demo, and the figure says how much there was.
Usage:
    .venv/bin/python tests/benchmarks/demo_time.py [--skip-cold]
"""

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from seatkit import paths
from seatkit.ports import free_loopback_port

SEAT = os.path.join(os.path.dirname(sys.executable), "seat")


def _stat(pid: str) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def session_rss(port: int) -> int:
    """Resident bytes of every process in the session of the vLLM server listening on port."""
    sessions, rss = set(), {}
    for proc in Path("/proc").glob("[0-9]*"):
        fields = _stat(proc.name)
        if fields is None:
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(b"vllm" in a for a in argv) and str(port).encode() in argv:
            sessions.add(fields[3])
        rss[proc.name] = (fields[3], int(fields[21]) * os.sysconf("SC_PAGE_SIZE"))
    return sum(size for session, size in rss.values() if session in sessions)


def demo(profile: str, home: Path, out: Path, env: dict) -> dict:
    port = free_loopback_port()
    peak = [0]
    stop = threading.Event()

    def sample():
        while not stop.wait(0.5):
            peak[0] = max(peak[0], session_rss(port))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    load_before = os.getloadavg()[0]
    start = time.monotonic()
    done = subprocess.run(
        [SEAT, "demo", profile, "--out", str(out)],
        capture_output=True,
        text=True,
        env={**os.environ, **env, "SEAT_HOME": str(home), "SEAT_PORT": str(port), "COLUMNS": "120"},
        timeout=1800,
    )
    took = time.monotonic() - start
    stop.set()
    sampler.join()
    if done.returncode:
        sys.exit(f"seat demo {profile} failed:\n{done.stderr[-2000:]}")
    run = sorted(out.iterdir())[-1]
    return {
        "seconds": took,
        "load": (load_before, os.getloadavg()[0]),
        "peak_rss": peak[0],
        "summary": json.loads((run / "summary.json").read_text()),
        "stdout": done.stdout,
    }


def timed(figure: dict) -> str:
    return f"{figure['seconds']:.0f} s (load average {figure['load'][0]:.2f} before, {figure['load'][1]:.2f} after)"


def spread(stats: dict, scale: float = 1.0, digits: int = 2) -> str:
    return (
        f"{stats['median'] * scale:.{digits}f} ({stats['min'] * scale:.{digits}f}-"
        f"{stats['max'] * scale:.{digits}f}, CV {stats['cv'] or 0:.1%})"
    )


if __name__ == "__main__":
    shared = paths.seat_home()
    work = Path(tempfile.mkdtemp(prefix="seatkit-demo-bench-"))
    home = work / "home"
    home.mkdir()
    (home / "venvs").symlink_to(shared / "venvs")  # the vLLM venv takes far longer than the demo
    figures = {}
    if "--skip-cold" not in sys.argv:
        figures["cold"] = demo("cpu-smollm2", home, work / "runs", {"VLLM_CACHE_ROOT": str(work / "vllm")})
        print(
            f"cold demo (wheel download, conversion, first start): {timed(figures['cold'])}",
            flush=True,
        )
    env = {"VLLM_CACHE_ROOT": str(work / "vllm")} if "cold" in figures else {}
    if "cold" not in figures:
        for shared_folder in ("models", "downloads"):
            (home / shared_folder).symlink_to(shared / shared_folder)
    figures["warm"] = demo("cpu-smollm2", home, work / "runs", env)
    print(f"warm demo: {timed(figures['warm'])}", flush=True)
    (home / "models").exists() or (home / "models").symlink_to(shared / "models")
    figures["tiny"] = demo("cpu-smoke", home, work / "runs-tiny", env)
    print(f"tiny-model demo: {timed(figures['tiny'])}", flush=True)
    print(
        f"peak RSS of the seat: SmolLM2-135M {figures['warm']['peak_rss'] / 2**30:.2f} GiB, "
        f"tiny Llama {figures['tiny']['peak_rss'] / 2**30:.2f} GiB"
    )
    for name, s in figures["warm"]["summary"]["suites"].items():
        print(
            f"{name}: decode tok/s {spread(s['decode_tok_s'], digits=1)}, tokens/step "
            f"{spread(s['tokens_per_step'])}, ms/step {spread(s['ms_per_step'])}, "
            f"{s['requests']} requests"
        )
    print(figures["warm"]["stdout"][-1500:])
