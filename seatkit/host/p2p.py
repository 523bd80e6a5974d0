"""`seat host verify-p2p`: run the data-path probe, judge it, and keep it with the boot id.

`seat host status` reads the kept result: the data path counts as verified only on the boot that
produced it, since a reboot can change every setting that decides it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from seatkit.errors import SeatError
from seatkit.host import state
from seatkit.host.journal import STATE
from seatkit.host.system import System

PROBE = Path(__file__).with_name("p2p_probe.py")
# The modules the probe imports from its own folder (--step): mounted beside it in an image.
PROBE_SIBLINGS = ("p2p_probe_step.py", "p2p_probe_forms.py", "p2p_probe_oneshot.py")
RESULT = f"{STATE}/verify-p2p.json"
NO_CUDA = 3
BAD_ARGS = 2  # the probe's exit status when it refuses its arguments or environment
PROBE_TIMEOUT_S = 900  # a healthy 8-GPU host needs a few minutes


def probe_argv(image: str | None, args: Sequence[str] = ()) -> list[str]:
    if image is None:
        return [sys.executable, str(PROBE), *args]
    return [
        *"docker run --rm --gpus all --network none --ipc host -e NCCL_NVLS_ENABLE=0".split(),
        "-v",
        f"{PROBE}:/seatkit-p2p-probe.py:ro",
        *(arg for name in PROBE_SIBLINGS for arg in ("-v", f"{PROBE.with_name(name)}:/{name}:ro")),
        "--entrypoint",
        "python3",
        image,
        "/seatkit-p2p-probe.py",
        *args,
    ]


def run_probe(image: str | None = None, args: Sequence[str] = ()) -> dict:
    """The probe's JSON; args select its step mode (p2p_probe.py --step ...)."""
    try:
        done = subprocess.run(
            probe_argv(image, args), capture_output=True, text=True, timeout=PROBE_TIMEOUT_S
        )
    except FileNotFoundError:
        raise SeatError(
            "docker is not installed", "run without --image where torch with CUDA is importable"
        ) from None
    except subprocess.TimeoutExpired:  # the step probe's work grows with L x hidden x replays
        more = ", or the train is more work than that (2 x L collectives x replays x 8 sizes)" if args else ""
        fewer = "run it again with fewer --replays (e.g. 200); " if args else ""
        raise SeatError(
            f"the probe did not finish in {PROBE_TIMEOUT_S} s: a peer copy or a collective hangs{more}",
            f"{fewer}a hang is itself a data-path failure: check `seat host status` and the kernel log",
        ) from None
    if image and "could not select device driver" in done.stderr:
        raise SeatError(
            "no NVIDIA container runtime: docker cannot attach the GPUs",
            "install the NVIDIA Container Toolkit, or run without --image",
            NO_CUDA,
        )
    try:
        result = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        raise SeatError(
            f"the probe printed no result (exit {done.returncode}): {done.stderr.strip()[-800:]}"
        ) from None
    if not isinstance(result, dict):
        raise SeatError(
            f"the probe's last line is not its result (exit {done.returncode}): {str(result)[:200]}",
            "run the probe by hand (python3 seatkit/host/p2p_probe.py) and read what it prints",
        )
    if "error" in result and done.returncode == BAD_ARGS:
        raise SeatError(f"the probe refused: {result['error']}", "fix what it names", BAD_ARGS)
    if "error" in result:
        raise SeatError(
            f"cannot check the data path: {result['error']}",
            "run it where torch with CUDA is importable, or with --image IMAGE",
            NO_CUDA,
        )
    return result


def judge(result: dict) -> dict:
    """The verdict and, when it failed, each reason."""
    problems = [
        f"GPU{p['from']} -> GPU{p['to']}: {kind} wrong at {', '.join(str(m['bytes']) for m in bad)} B"
        for p in result["pairs"]
        for kind, bad in p["mismatches"].items()
        if bad
    ]
    problems += [
        f"GPU{p['to']} reports no peer access to GPU{p['from']}"
        for p in result["pairs"]
        if not p["can_access_peer"]
    ]
    if result["allreduce"] and not result["allreduce"]["correct"]:
        problems.append("the all-reduce returned a wrong sum")
    if len(result["gpus"]) < 2:
        verdict = "no peers to check"
    else:
        verdict = "failed" if problems else "verified"
    return {**result, "verdict": verdict, "problems": problems}


def store(result: dict, system: System, path: str = RESULT) -> str:
    record = {**result, "boot_id": state.boot_id(system), "time": time.time()}
    system.write(path, (json.dumps(record, indent=2) + "\n").encode())
    return path


def kept_row(system: System, path: str, missing: str, command: str, summary: Callable[[dict], str]) -> dict:
    """The row `seat host status` shows for a probe's kept result: `missing` unless it is this boot's."""
    text = system.read(path)
    if text is None:
        return {"verdict": missing, "why": f"no `{command}` result on this host"}
    try:
        record = json.loads(text)
        when = time.strftime("%Y-%m-%d %H:%M", time.gmtime(record["time"]))
        if record["boot_id"] != state.boot_id(system):
            return {
                "verdict": missing,
                "why": f"the last result ({record['verdict']}, {when}) is from another boot: run it again",
            }
        if record["verdict"] == "failed":
            return {"verdict": "FAILED on this boot", "why": "; ".join(record["problems"])}
        return {"verdict": f"{record['verdict']} on this boot", "why": f"{summary(record)} ({when})"}
    except (ValueError, KeyError, TypeError):  # cut short by hand, or from another version
        return {"verdict": missing, "why": f"{path} is torn: run `{command}` again"}


def _figures(record: dict) -> str:
    pairs = record["pairs"]
    if not pairs:
        return "one GPU"
    return (
        f"{len(pairs)} pairs byte-checked, {min(p['bandwidth_gb_s'] for p in pairs):.1f}-"
        f"{max(p['bandwidth_gb_s'] for p in pairs):.1f} GB/s, all-reduce "
        f"{record['allreduce']['us']:.1f} us"
    )


def data_path(system: System) -> dict:
    """The row `seat host status` shows for the data path."""
    return kept_row(system, RESULT, "not verified", "seat host verify-p2p", _figures)
