"""`p2p_probe.py --step`: replay one decode step's communication; prints one JSON document.

A sibling of p2p_probe.py, which imports it for --step: torch and the standard library only (and
the Triton torch ships, for the one-shot form), run by path under the seat's Python.

One decode step of a TP seat makes 2 x L all-reduces (after attention and after the MLP of each
layer), each of (1 + k) tokens x hidden x bf16. The probe captures that train in a CUDA graph and
replays it, in three forms:
  baseline  a self-copy of the same bytes per collective on each GPU: what launch, graph replay
            and timing cost with no peer at all, subtracted from the others;
  oneshot   every rank's kernel copies its input into its own peer-visible buffer, raises a flag
            in every peer, waits (bounded) for every peer's flag, then reads all peers' buffers
            through peer mappings and sums: SM-issued peer reads, the shape of b12x's all-reduce;
  nccl      NCCL's all-reduce (NVLink multicast off), one process per GPU.
Inputs change with every collective of every round, so a read that overtakes a peer's write, or
lags behind its next one, gives a wrong sum: the check is exact.
"""

from __future__ import annotations

import json
import os
import time

from p2p_probe_forms import cuda_torch, step_baseline, step_nccl
from p2p_probe_oneshot import step_oneshot

STEP_TOKENS = range(1, 9)  # 1 + k for k = 0 .. 7
MAX_STEP_RANKS = 8  # ranks on one GPU: each spins on its own stream, all must be resident at once
MAX_PEERS = 8  # CUDA maps at most 8 peers into one GPU: the one-shot form needs every peer mapped


def step_args(argv: list[str]):
    import argparse

    parser = argparse.ArgumentParser(
        prog="p2p_probe.py", description="Replay one decode step's communication."
    )
    parser.add_argument("--step", action="store_true", required=True)
    parser.add_argument("--layers", type=int, required=True)
    parser.add_argument("--hidden", type=int, required=True)
    parser.add_argument("--replays", type=int, default=200)
    parser.add_argument("--tokens", default="1-8", help="1 + k values: a range 1-8 or a list 1,2,4")
    parser.add_argument(
        "--ranks-on-one-gpu",
        type=int,
        default=0,
        help="run this many one-shot ranks on GPU 0 (exercises the handshake on one GPU)",
    )
    parser.add_argument("--forms", default="baseline,oneshot,nccl")
    args = parser.parse_args(argv)
    problems = []
    if not 1 <= args.layers <= 512:
        problems.append(f"--layers {args.layers}: give the model's layer count (1 to 512)")
    if not 64 <= args.hidden <= 65536 or args.hidden % 8:
        problems.append(
            f"--hidden {args.hidden}: give the model's hidden size (64 to 65536, a multiple of 8)"
        )
    if not 10 <= args.replays <= 10000:
        problems.append(f"--replays {args.replays}: 10 to 10000 (p99 needs at least 10)")
    try:
        low, _, high = args.tokens.partition("-")
        ends = (int(low), int(high)) if high else None
        if ends and not all(e in STEP_TOKENS for e in ends):  # bounded before a range is built
            raise ValueError(args.tokens)
        tokens = (
            list(range(ends[0], ends[1] + 1)) if ends else sorted({int(t) for t in args.tokens.split(",")})
        )
    except ValueError:
        tokens = []
    if not tokens or any(t not in STEP_TOKENS for t in tokens):
        problems.append(f"--tokens {args.tokens}: 1 + k from 1 to 8, as 1-8 or 1,2,4")
    if not 0 <= args.ranks_on_one_gpu <= MAX_STEP_RANKS:
        problems.append(f"--ranks-on-one-gpu {args.ranks_on_one_gpu}: 0 (off) or 1 to {MAX_STEP_RANKS}")
    forms = args.forms.split(",")
    if not forms or set(forms) - {"baseline", "oneshot", "nccl"}:
        problems.append(f"--forms {args.forms}: a list of baseline, oneshot, nccl")
    connections = os.environ.get("CUDA_DEVICE_MAX_CONNECTIONS", "")
    if connections.isdigit() and int(connections) < args.ranks_on_one_gpu:
        problems.append(
            f"CUDA_DEVICE_MAX_CONNECTIONS={connections}: fewer hardware queues than ranks on the "
            "GPU, so a rank would wait behind another's spinning kernel; unset it"
        )
    if os.environ.get("CUDA_LAUNCH_BLOCKING", "0") not in ("", "0"):
        problems.append(
            "CUDA_LAUNCH_BLOCKING is set: every launch would wait for the one before, the "
            "ranks' kernels could never meet at the handshake, and times would be serial; unset it"
        )
    return args, tokens, forms, problems


def main(argv: list[str]) -> int:
    args, tokens, forms, problems = step_args(argv)
    if problems:
        print(json.dumps({"error": "; ".join(problems)}))
        return 2
    # Ranks on one GPU spin on each other's flags from their own streams: streams that shared a
    # hardware queue (8 by default) would wait behind a spinning kernel.
    os.environ.setdefault("CUDA_DEVICE_MAX_CONNECTIONS", "32")
    torch = cuda_torch()
    if torch is None:
        return 3
    count = torch.cuda.device_count()
    skipped = _oneshot_skipped(torch, args, forms, count)
    one_gpu = args.ranks_on_one_gpu or (count == 1 and 1)
    devices = [0] * one_gpu if one_gpu else list(range(count))
    started = time.perf_counter()
    step = {
        "layers": args.layers,
        "hidden": args.hidden,
        "collectives": 2 * args.layers,
        "replays": args.replays,
        "tokens": tokens,
        "bytes_by_tokens": {str(t): t * args.hidden * 2 for t in tokens},
        "gpus": count,
        "placement": f"{len(devices)} rank{'s' * (len(devices) > 1)} on GPU 0"
        if one_gpu
        else f"one rank per GPU ({count})",
        "forms": _forms(torch, args, tokens, forms, count, devices, skipped),
    }
    step["seconds"] = time.perf_counter() - started
    print(
        json.dumps(
            {
                "torch": torch.__version__,
                "cuda": torch.version.cuda,
                "gpus": [torch.cuda.get_device_name(k) for k in range(count)],
                "step": step,
            }
        )
    )
    return 0


def _oneshot_skipped(torch, args, forms: list[str], count: int) -> dict:
    """{"oneshot": why} where the one-shot form cannot run here, else {}."""
    skipped = {}
    if "oneshot" in forms:
        try:
            import triton  # noqa: F401 - torch ships it; the one-shot kernel is written in it
        except ImportError:
            skipped["oneshot"] = "triton is not importable here: the one-shot kernel is written in it"
        unmapped = [
            (a, b)
            for a in range(count)
            for b in range(count)
            if a != b and not torch.cuda.can_device_access_peer(b, a)
        ]
        if unmapped and not args.ranks_on_one_gpu:
            skipped["oneshot"] = (
                f"GPU{unmapped[0][1]} cannot map GPU{unmapped[0][0]}'s memory (no peer access)"
            )
        if count > MAX_PEERS and not args.ranks_on_one_gpu:
            skipped["oneshot"] = f"{count} GPUs: CUDA maps at most {MAX_PEERS} peers into one GPU"
    return skipped


def _forms(
    torch, args, tokens: list[int], forms: list[str], count: int, devices: list[int], skipped: dict
) -> dict:
    """Each form asked for, measured (or why it was skipped), in the order baseline, oneshot, nccl."""
    out: dict = {}
    if "baseline" in forms:
        out["baseline"] = [
            step_baseline(torch, d, args.layers, args.hidden, tokens, args.replays) for d in range(count)
        ]
    if "oneshot" in skipped:
        out["oneshot"] = {"skipped": skipped["oneshot"]}
    elif "oneshot" in forms:
        out["oneshot"] = step_oneshot(torch, devices, args.layers, args.hidden, tokens, args.replays)
    if "nccl" in forms:
        out["nccl"] = (
            step_nccl(count, args.layers, args.hidden, tokens, args.replays)
            if count > 1
            else {"skipped": "one GPU: NCCL refuses two ranks on one device"}
        )
    return out
