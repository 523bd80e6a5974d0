"""Check the GPU peer-to-peer data path; prints one JSON document on stdout.

Standalone on purpose (torch and the standard library only, plus the Triton that torch ships for
--step): `seat host verify-p2p` runs it with the local Python, or inside the seat's image with the
repository mounted.

For every ordered pair (i, j): a DMA peer copy and a kernel-side peer access (a casting copy,
which a CUDA kernel performs through the peer mapping), each compared byte for byte with the
expected pattern from 4 B to 64 MiB; the bandwidth of large peer copies; then the latency of a
small all-reduce over all GPUs through NCCL (NVLink multicast off), launched from a Python loop,
so the figure includes the host's launch overhead.

With --step it replays instead the communication of one decode step (p2p_probe_step.py; it and
the modules it imports sit beside this file and run the same way).
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import sys
import time

SIZES = [4**k for k in range(1, 14)]  # 4 B .. 64 MiB
BANDWIDTH_BYTES = 256 << 20
BANDWIDTH_REPEATS = 20
ALLREDUCE_BYTES = 80 * 1024  # the size the paper timed
ALLREDUCE_ITERS, ALLREDUCE_WARMUP, ALLREDUCE_BATCHES = 200, 20, 5


def pattern(torch, size: int, device: int, salt: int):
    """Bytes no copy could get right by accident: a position- and pair-dependent sequence."""
    return ((torch.arange(size, device=device, dtype=torch.int64) * 131 + salt) % 251).to(torch.uint8)


def check_pair(torch, i: int, j: int) -> dict:
    salt = 7 * i + 3 * j + 1
    mismatches: dict[str, list] = {"copy": [], "kernel": []}
    for size in SIZES:
        src, want = pattern(torch, size, i, salt), pattern(torch, size, j, salt)
        copied = torch.empty(size, dtype=torch.uint8, device=j)
        copied.copy_(src)  # contiguous, same dtype: a DMA peer copy
        widened = torch.empty(size, dtype=torch.int16, device=j)
        widened.copy_(src)  # a cast: a kernel dereferences the peer pointer
        torch.cuda.synchronize(i)
        torch.cuda.synchronize(j)
        bad = int((copied != want).sum())
        if bad:
            mismatches["copy"].append({"bytes": size, "wrong": bad})
        bad = int((widened != want.to(torch.int16)).sum())
        if bad:
            mismatches["kernel"].append({"bytes": size, "wrong": bad})
    src = torch.empty(BANDWIDTH_BYTES, dtype=torch.uint8, device=i)
    dst = torch.empty(BANDWIDTH_BYTES, dtype=torch.uint8, device=j)
    dst.copy_(src)
    torch.cuda.synchronize(j)
    start = time.perf_counter()
    for _ in range(BANDWIDTH_REPEATS):
        dst.copy_(src, non_blocking=True)
    torch.cuda.synchronize(i)
    torch.cuda.synchronize(j)
    seconds = time.perf_counter() - start
    return {
        "from": i,
        "to": j,
        "can_access_peer": torch.cuda.can_device_access_peer(j, i),
        "sizes_checked": len(SIZES),
        "largest_bytes": SIZES[-1],
        "copy_ok": not mismatches["copy"],
        "kernel_read_ok": not mismatches["kernel"],
        "mismatches": mismatches,
        "bandwidth_gb_s": BANDWIDTH_BYTES * BANDWIDTH_REPEATS / seconds / 1e9,
    }


def _allreduce_worker(rank: int, world: int, port: int, queue) -> None:
    import torch
    import torch.distributed as dist

    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    data = torch.full((ALLREDUCE_BYTES // 4,), float(rank + 1), device=rank)
    dist.all_reduce(data)
    correct = bool(torch.all(data == world * (world + 1) / 2))
    data.zero_()  # timed sums stay finite
    for _ in range(ALLREDUCE_WARMUP):
        dist.all_reduce(data)
    batches = []
    for _ in range(ALLREDUCE_BATCHES):  # the median batch: one slow batch says little about the path
        torch.cuda.synchronize()
        dist.barrier()
        start = time.perf_counter()
        for _ in range(ALLREDUCE_ITERS):
            dist.all_reduce(data)
        torch.cuda.synchronize()
        batches.append((time.perf_counter() - start) / ALLREDUCE_ITERS * 1e6)
    queue.put({"rank": rank, "us": statistics.median(batches), "batches_us": batches, "correct": correct})
    dist.destroy_process_group()


def allreduce(world: int) -> dict:
    import torch.multiprocessing as mp

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    context = mp.get_context("spawn")
    queue = context.Queue()
    mp.spawn(_allreduce_worker, args=(world, port, queue), nprocs=world, join=True)
    ranks = sorted((queue.get() for _ in range(world)), key=lambda r: r["rank"])
    return {
        "bytes": ALLREDUCE_BYTES,
        "gpus": world,
        "iterations": ALLREDUCE_ITERS,
        "us": max(r["us"] for r in ranks),
        "batches_us": [r["batches_us"] for r in ranks],
        "correct": all(r["correct"] for r in ranks),
    }


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # no NVLink multicast on shared machines
    argv = sys.argv[1:] if argv is None else argv
    if argv:
        import p2p_probe_step

        return p2p_probe_step.main(argv)
    from p2p_probe_forms import cuda_torch

    torch = cuda_torch()
    if torch is None:
        return 3
    count = torch.cuda.device_count()
    result = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "gpus": [torch.cuda.get_device_name(k) for k in range(count)],
        "nccl": ".".join(map(str, torch.cuda.nccl.version())) if count > 1 else None,
        "pairs": [check_pair(torch, i, j) for i in range(count) for j in range(count) if i != j],
        "allreduce": allreduce(count) if count > 1 else None,
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
