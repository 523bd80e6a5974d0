"""The step probe's timing, and its baseline and NCCL forms (p2p_probe_step.py says what they are).

A sibling of p2p_probe.py: torch and the standard library only, run by path under the seat's Python.
"""

from __future__ import annotations

import json
import socket

STEP_WARMUP = 5


def cuda_torch():
    """torch with a CUDA device; else None, its error printed as the probe's result (exit 3)."""
    try:
        import torch
    except ImportError:
        error = {"error": "torch is not importable here"}
    else:
        if torch.cuda.is_available():
            return torch
        error = {"error": "no CUDA device: torch.cuda.is_available() is False", "torch": torch.__version__}
    print(json.dumps(error))
    return None


def percentiles(values: list[float]) -> dict:
    ordered = sorted(values)
    pick = lambda q: ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]  # noqa: E731
    return {"p50": pick(0.50), "p99": pick(0.99), "min": ordered[0], "max": ordered[-1]}


def timed(torch, graphs: list, streams: list, replays: int) -> list[float]:
    """Replay every rank's graph back to back; per replay the slowest rank's time, in us."""
    events = [
        [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(replays)]
        for _ in graphs
    ]
    for n in range(replays):
        for rank, (graph, stream) in enumerate(zip(graphs, streams, strict=True)):
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


def summary(times: list[float], collectives: int) -> dict:
    return {
        "train_us": percentiles(times),
        "per_collective_us": percentiles([t / collectives for t in times]),
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
        timed(torch, [graph], [stream], STEP_WARMUP)
        results[str(t)] = summary(timed(torch, [graph], [stream], replays), nc)
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
        timed(torch, [graph], [stream], STEP_WARMUP)
        dist.barrier()
        results[str(t)] = timed(torch, [graph], [stream], replays)
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
        t: summary([max(r["times"][t][n] for r in ranks) for n in range(replays)], nc)
        for t in ranks[0]["times"]
    }
    return {"ranks": world, "by_tokens": by_tokens, "correct": all(r["correct"] for r in ranks)}
