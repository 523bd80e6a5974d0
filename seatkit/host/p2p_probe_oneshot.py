"""The step probe's one-shot form: a Triton kernel per rank that copies its input into its own
peer-visible buffer, raises a flag in every peer, waits (bounded) for every peer's flag, then reads
all peers' buffers through peer mappings and sums (p2p_probe_step.py says why).

A sibling of p2p_probe.py: torch and the Triton it ships, run by path under the seat's Python.
"""

from __future__ import annotations

from p2p_probe_forms import STEP_WARMUP, summary, timed

STEP_BLOCKS = 8  # blocks per one-shot kernel: each does its own handshake on its slice
SPIN_LIMIT = 1 << 20  # polls (about 0.5 s on an H200) before a flag wait gives up: no hang


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
    table = [x for b, f in zip(buffers, flags, strict=True) for x in (b.data_ptr(), f.data_ptr())]
    ranks = {
        "tables": [torch.tensor(table, dtype=torch.int64, device=d) for d in devices],
        "rounds": [torch.zeros(1, dtype=torch.int32, device=d) for d in devices],
        "status": [torch.zeros(1, dtype=torch.int32, device=d) for d in devices],
        "streams": [torch.cuda.Stream(device=d) for d in devices],
    }
    results, wrong = {}, []
    for t in tokens:
        figures, wrong_here = _at_tokens(torch, kernel, devices, ranks, nc, t * hidden, replays)
        results[str(t)] = figures
        wrong += [{"tokens": t, **w} for w in wrong_here]
        if (
            "train_us" not in figures
        ):  # a rank that never arrives: stop here, each further wait costs SPIN_LIMIT
            break
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


def _at_tokens(torch, kernel, devices: list[int], ranks: dict, nc: int, n: int, replays: int):
    """One size's train: captured per rank, timed, its sums checked; (figures, wrong sums).

    The figures hold only waits_given_up where the warm-up's waits gave up."""
    world, streams, rounds, status = len(devices), ranks["streams"], ranks["rounds"], ranks["status"]
    xs = [(torch.arange(n, device=d) % 7 + r).to(torch.bfloat16) for r, d in enumerate(devices)]
    outs = [torch.empty(nc, n, dtype=torch.bfloat16, device=d) for d in devices]

    def launch(r: int, c: int) -> None:
        kernel[(STEP_BLOCKS,)](
            xs[r],
            outs[r][c],
            ranks["tables"][r],
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

    graphs = _capture(torch, devices, streams, rounds, nc, launch)
    gave_up = {"eager": sum(int(x.item()) for x in status)}
    timed(torch, graphs, streams, STEP_WARMUP)
    gave_up["warmup"] = sum(int(x.item()) for x in status) - gave_up["eager"]
    if gave_up["warmup"]:
        return {"waits_given_up": gave_up}, []
    times = timed(torch, graphs, streams, replays)
    gave_up["timed"] = sum(int(x.item()) for x in status) - gave_up["eager"] - gave_up["warmup"]
    for x in status:
        x.zero_()
    done = int(rounds[0].item())  # rounds completed; the outputs hold the last one's sums
    wrong = []
    for r, d in enumerate(devices):
        base = sum(((torch.arange(n, device=d) % 7) + q).float() for q in range(world))
        shift = (((done - 1) * nc + torch.arange(nc, device=d) + 1) % 5).float() * world
        want = (base[None, :] + shift[:, None]).to(torch.bfloat16)
        wrong += [
            {"collective": int(c), "rank": r}
            for c in (outs[r] != want).any(dim=1).nonzero().flatten().tolist()
        ]
    return {**summary(times, nc), "waits_given_up": gave_up}, wrong


def _capture(torch, devices: list[int], streams: list, rounds: list, nc: int, launch) -> list:
    """One eager round, then each rank's train of nc launches captured in a CUDA graph."""
    world = len(devices)
    for r in range(world):  # load the counter's kernel now: CUDA loads a kernel lazily at its first
        rounds[r].add_(0)  # launch, with a context sync that would wait on a spinning rank
    torch.cuda.synchronize()  # inputs written on the default stream before the ranks' streams read them
    for c in range(nc):  # one eager round, rank by rank per collective: compiled and loaded before capture
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
    return graphs
