"""Check the GPU peer-to-peer data path; prints one JSON document on stdout.

Standalone on purpose (torch and the standard library only, plus the Triton that torch ships for
--step): `seat host verify-p2p` runs it with the local Python, or inside the seat's image with the
repository mounted.

For every ordered pair (i, j): a DMA peer copy and a kernel-side peer access (a casting copy,
which a CUDA kernel performs through the peer mapping), each compared byte for byte with the
expected pattern from 4 B to 64 MiB; the bandwidth of large peer copies; then the latency of a
small all-reduce over all GPUs through NCCL (NVLink multicast off), launched from a Python loop,
so the figure includes the host's launch overhead.

With --step it replays instead the communication of one decode step (see step_probe below).
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
    mismatches = {"copy": [], "kernel": []}
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
        return step_main(argv)
    try:
        import torch
    except ImportError:
        print(json.dumps({"error": "torch is not importable here"}))
        return 3
    if not torch.cuda.is_available():
        print(
            json.dumps(
                {"error": "no CUDA device: torch.cuda.is_available() is False", "torch": torch.__version__}
            )
        )
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


# --- The step probe ------------------------------------------------------------------------------
# One decode step of a TP seat makes 2 x L all-reduces (after attention and after the MLP of each
# layer), each of (1 + k) tokens x hidden x bf16. The probe captures that train in a CUDA graph and
# replays it, in three forms:
#   baseline  a self-copy of the same bytes per collective on each GPU: what launch, graph replay
#             and timing cost with no peer at all, subtracted from the others;
#   oneshot   every rank's kernel copies its input into its own peer-visible buffer, raises a flag
#             in every peer, waits (bounded) for every peer's flag, then reads all peers' buffers
#             through peer mappings and sums: SM-issued peer reads, the shape of b12x's all-reduce;
#   nccl      NCCL's all-reduce (NVLink multicast off), one process per GPU.
# Inputs change with every collective of every round, so a read that overtakes a peer's write, or
# lags behind its next one, gives a wrong sum: the check is exact.

STEP_TOKENS = range(1, 9)  # 1 + k for k = 0 .. 7
MAX_STEP_RANKS = 8  # ranks on one GPU: each spins on its own stream, all must be resident at once
MAX_PEERS = 8  # CUDA maps at most 8 peers into one GPU: the one-shot form needs every peer mapped
STEP_BLOCKS = 8  # blocks per one-shot kernel: each does its own handshake on its slice
STEP_WARMUP = 5
SPIN_LIMIT = 1 << 20  # polls (about 0.5 s on an H200) before a flag wait gives up: no hang


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


def percentiles(values: list[float]) -> dict:
    ordered = sorted(values)
    pick = lambda q: ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]  # noqa: E731
    return {"p50": pick(0.50), "p99": pick(0.99), "min": ordered[0], "max": ordered[-1]}


def _timed(torch, graphs: list, streams: list, replays: int) -> list[float]:
    """Replay every rank's graph back to back; per replay the slowest rank's time, in us."""
    events = [
        [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(replays)]
        for _ in graphs
    ]
    for n in range(replays):
        for rank, (graph, stream) in enumerate(zip(graphs, streams)):
            with torch.cuda.stream(stream):
                events[rank][n][0].record(stream)
                graph.replay()
                events[rank][n][1].record(stream)
    for stream in streams:
        stream.synchronize()
    return [
        max(events[r][n][0].elapsed_time(events[r][n][1]) for r in range(len(graphs))) * 1e3
        for n in range(replays)
    ]


def _summary(times: list[float], collectives: int) -> dict:
    return {
        "train_us": percentiles(times),
        "per_collective_us": percentiles([t / collectives for t in times]),
    }


def _oneshot_kernel():
    import triton
    import triton.language as tl

    @triton.jit(do_not_specialize=["c", "n_elements", "rank"])  # one compile for every rank and size
    def oneshot(
        x_ptr,
        out_ptr,
        table_ptr,
        round_ptr,
        status_ptr,
        c,
        n_elements,
        rank,
        NC: tl.constexpr,
        WORLD: tl.constexpr,
        BLOCKS: tl.constexpr,
        TILE: tl.constexpr,
        SPIN: tl.constexpr,
    ):
        # table: per peer p, [buffer address, flags address]; buffers are 2 x n_elements (parity).
        pid = tl.program_id(0)
        epoch = tl.load(round_ptr) * NC + c + 1
        parity = c % 2
        chunk = tl.cdiv(tl.cdiv(n_elements, BLOCKS), TILE) * TILE
        lo = pid * chunk
        hi = tl.minimum(lo + chunk, n_elements)
        own = tl.load(table_ptr + 2 * rank).to(tl.pointer_type(tl.bfloat16))
        for start in range(lo, hi, TILE):
            offs = start + tl.arange(0, TILE)
            mask = offs < hi
            value = tl.load(x_ptr + offs, mask=mask).to(tl.float32) + (epoch % 5).to(tl.float32)
            tl.store(own + parity * n_elements + offs, value.to(tl.bfloat16), mask=mask)
        tl.debug_barrier()
        for p in tl.static_range(WORLD):
            flags = tl.load(table_ptr + 2 * p + 1).to(tl.pointer_type(tl.int32))
            tl.atomic_xchg(flags + rank * BLOCKS + pid, epoch, sem="release", scope="sys")
        mine = tl.load(table_ptr + 2 * rank + 1).to(tl.pointer_type(tl.int32))
        for p in tl.static_range(WORLD):
            seen = tl.atomic_add(mine + p * BLOCKS + pid, 0, sem="acquire", scope="sys")
            spins = 0
            while (seen < epoch) & (spins < SPIN):
                seen = tl.atomic_add(mine + p * BLOCKS + pid, 0, sem="acquire", scope="sys")
                spins += 1
            if seen < epoch:
                tl.atomic_add(status_ptr, 1)  # a wait gave up: counted, and the sums will say so
        tl.debug_barrier()
        for start in range(lo, hi, TILE):
            offs = start + tl.arange(0, TILE)
            mask = offs < hi
            acc = tl.zeros([TILE], dtype=tl.float32)
            for p in tl.static_range(WORLD):
                peer = tl.load(table_ptr + 2 * p).to(tl.pointer_type(tl.bfloat16))
                acc += tl.load(peer + parity * n_elements + offs, mask=mask, volatile=True).to(tl.float32)
            tl.store(out_ptr + offs, acc.to(tl.bfloat16), mask=mask)

    return oneshot


def step_oneshot(
    torch, devices: list[int], layers: int, hidden: int, tokens: list[int], replays: int
) -> dict:
    """The one-shot form: one process, one rank per entry of devices (repeated: ranks on one GPU)."""
    kernel = _oneshot_kernel()
    world, nc = len(devices), 2 * layers
    for a in set(devices):  # torch enables peer access on a cross-device kernel copy
        for b in set(devices):
            if a != b:
                torch.empty(1, dtype=torch.int16, device=b).copy_(torch.zeros(1, dtype=torch.uint8, device=a))
    most = max(tokens) * hidden
    buffers = [torch.zeros(2 * most, dtype=torch.bfloat16, device=d) for d in devices]
    flags = [torch.zeros(world * STEP_BLOCKS, dtype=torch.int32, device=d) for d in devices]
    table = [x for b, f in zip(buffers, flags) for x in (b.data_ptr(), f.data_ptr())]
    tables = [torch.tensor(table, dtype=torch.int64, device=d) for d in devices]
    rounds = [torch.zeros(1, dtype=torch.int32, device=d) for d in devices]
    status = [torch.zeros(1, dtype=torch.int32, device=d) for d in devices]
    streams = [torch.cuda.Stream(device=d) for d in devices]
    results, wrong = {}, []
    for t in tokens:
        n = t * hidden
        xs = [(torch.arange(n, device=d) % 7 + r).to(torch.bfloat16) for r, d in enumerate(devices)]
        outs = [torch.empty(nc, n, dtype=torch.bfloat16, device=d) for d in devices]
        launch = lambda r, c: kernel[(STEP_BLOCKS,)](  # noqa: E731
            xs[r],
            outs[r][c],
            tables[r],
            rounds[r],
            status[r],
            c,
            n,
            r,
            NC=nc,
            WORLD=world,
            BLOCKS=STEP_BLOCKS,
            TILE=1024,
            SPIN=SPIN_LIMIT,
        )
        for r in range(world):  # load the counter's kernel now: CUDA loads a kernel lazily at its first
            rounds[r].add_(0)  # launch, with a context sync that would wait on a spinning rank
        torch.cuda.synchronize()  # inputs written on the default stream before the ranks' streams read them
        for c in range(
            nc
        ):  # one eager round, rank by rank per collective: compiled and loaded before capture
            for r in range(world):
                with torch.cuda.stream(streams[r]):
                    launch(r, c)
        for r in range(world):
            with torch.cuda.stream(streams[r]):
                rounds[r].add_(1)
        graphs = []
        for r, d in enumerate(devices):
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.device(d), torch.cuda.graph(graph, stream=streams[r]):
                for c in range(nc):
                    launch(r, c)
                rounds[r].add_(1)
            graphs.append(graph)
        for stream in streams:
            stream.synchronize()
        gave_up = {"eager": sum(int(x.item()) for x in status)}
        _timed(torch, graphs, streams, STEP_WARMUP)
        gave_up["warmup"] = sum(int(x.item()) for x in status) - gave_up["eager"]
        if gave_up["warmup"]:  # a rank that never arrives: stop here, each further wait costs SPIN_LIMIT
            results[str(t)] = {"waits_given_up": gave_up}
            break
        times = _timed(torch, graphs, streams, replays)
        gave_up["timed"] = sum(int(x.item()) for x in status) - gave_up["eager"] - gave_up["warmup"]
        for x in status:
            x.zero_()
        done = int(rounds[0].item())  # rounds completed; the outputs hold the last one's sums
        for r, d in enumerate(devices):
            base = sum(((torch.arange(n, device=d) % 7) + q).float() for q in range(world))
            shift = (((done - 1) * nc + torch.arange(nc, device=d) + 1) % 5).float() * world
            want = (base[None, :] + shift[:, None]).to(torch.bfloat16)
            wrong += [
                {"tokens": t, "collective": int(c), "rank": r}
                for c in (outs[r] != want).any(dim=1).nonzero().flatten().tolist()
            ]
        results[str(t)] = {**_summary(times, nc), "waits_given_up": gave_up}
    # The eager round's waits may outlast a slow first kernel load on a peer: shown, not failed on.
    given_up = sum(
        r["waits_given_up"]["warmup"] + r["waits_given_up"].get("timed", 0) for r in results.values()
    )
    return {
        "ranks": world,
        "devices": devices,
        "blocks": STEP_BLOCKS,
        "by_tokens": results,
        "correct": not wrong and not given_up,
        "wrong": wrong[:10],
        "wrong_count": len(wrong),
        "waits_given_up": given_up,
    }


def step_baseline(torch, device: int, layers: int, hidden: int, tokens: list[int], replays: int) -> dict:
    """The same train with each collective a self-copy of its bytes: the probe's own overhead."""
    results, nc = {}, 2 * layers
    stream = torch.cuda.Stream(device=device)
    for t in tokens:
        src = torch.ones(t * hidden, dtype=torch.bfloat16, device=device)
        dst = torch.empty(nc, t * hidden, dtype=torch.bfloat16, device=device)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.device(device), torch.cuda.graph(graph, stream=stream):
            for c in range(nc):
                dst[c].copy_(src)
        _timed(torch, [graph], [stream], STEP_WARMUP)
        results[str(t)] = _summary(_timed(torch, [graph], [stream], replays), nc)
    return {"device": device, "by_tokens": results}


def _nccl_step_worker(
    rank: int, world: int, port: int, layers: int, hidden: int, tokens: list[int], replays: int, queue
) -> None:
    import torch
    import torch.distributed as dist

    torch.cuda.set_device(rank)
    dist.init_process_group(
        "nccl",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world,
        device_id=torch.device("cuda", rank),
    )
    nc, results = 2 * layers, {}
    check = torch.full((hidden,), float(rank + 1), dtype=torch.bfloat16, device=rank)
    dist.all_reduce(check)
    correct = bool(torch.all(check == world * (world + 1) / 2))
    stream = torch.cuda.Stream()
    for t in tokens:
        data = torch.zeros(t * hidden, dtype=torch.bfloat16, device=rank)  # zeros: sums stay finite
        with torch.cuda.stream(stream):
            dist.all_reduce(data)  # NCCL warms up outside the capture
        stream.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            for _ in range(nc):
                dist.all_reduce(data)
        dist.barrier()
        _timed(torch, [graph], [stream], STEP_WARMUP)
        dist.barrier()
        results[str(t)] = _timed(torch, [graph], [stream], replays)
    queue.put({"rank": rank, "times": results, "correct": correct})
    dist.destroy_process_group()


def step_nccl(world: int, layers: int, hidden: int, tokens: list[int], replays: int) -> dict:
    import torch.multiprocessing as mp

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    queue = mp.get_context("spawn").Queue()
    mp.spawn(
        _nccl_step_worker, args=(world, port, layers, hidden, tokens, replays, queue), nprocs=world, join=True
    )
    ranks = [queue.get() for _ in range(world)]
    nc = 2 * layers
    by_tokens = {
        t: _summary([max(r["times"][t][n] for r in ranks) for n in range(replays)], nc)
        for t in ranks[0]["times"]
    }
    return {"ranks": world, "by_tokens": by_tokens, "correct": all(r["correct"] for r in ranks)}


def step_main(argv: list[str]) -> int:
    args, tokens, forms, problems = step_args(argv)
    if problems:
        print(json.dumps({"error": "; ".join(problems)}))
        return 2
    # Ranks on one GPU spin on each other's flags from their own streams: streams that shared a
    # hardware queue (8 by default) would wait behind a spinning kernel.
    os.environ.setdefault("CUDA_DEVICE_MAX_CONNECTIONS", "32")
    try:
        import torch
    except ImportError:
        print(json.dumps({"error": "torch is not importable here"}))
        return 3
    if not torch.cuda.is_available():
        print(
            json.dumps(
                {"error": "no CUDA device: torch.cuda.is_available() is False", "torch": torch.__version__}
            )
        )
        return 3
    count = torch.cuda.device_count()
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
        "forms": {},
    }
    if "baseline" in forms:
        step["forms"]["baseline"] = [
            step_baseline(torch, d, args.layers, args.hidden, tokens, args.replays) for d in range(count)
        ]
    if "oneshot" in skipped:
        step["forms"]["oneshot"] = {"skipped": skipped["oneshot"]}
    elif "oneshot" in forms:
        step["forms"]["oneshot"] = step_oneshot(
            torch, devices, args.layers, args.hidden, tokens, args.replays
        )
    if "nccl" in forms:
        step["forms"]["nccl"] = (
            step_nccl(count, args.layers, args.hidden, tokens, args.replays)
            if count > 1
            else {"skipped": "one GPU: NCCL refuses two ranks on one device"}
        )
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


if __name__ == "__main__":
    sys.exit(main())
