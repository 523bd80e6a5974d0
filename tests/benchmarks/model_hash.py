"""Model hashing throughput against sha256sum, on generated files, measured in one run.

Alternates, each round: sha256sum over every file (one process, one core); the kit's hasher with
one thread; sha256sum with one process per core (xargs -P); the kit's hasher with one thread per
core; and the same with processes. Files are read once first, so every contender hashes from the
page cache. Prints the medians and the ratios as JSON.
Usage: python tests/benchmarks/model_hash.py [--gb 3] [--files 12] [--rounds 3]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from seatkit.models import hashing  # noqa: E402


def generate(folder: Path, total: int, count: int) -> list[Path]:
    files, size = [], total // count
    for i in range(count):
        path = folder / f"shard-{i:05d}.safetensors"
        with path.open("wb") as fh:
            left = size
            while left:
                block = os.urandom(min(left, 64 << 20))
                fh.write(block)
                left -= len(block)
        files.append(path)
    return files


def timed(call) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def processes(files: list[Path], workers: int) -> None:
    with ProcessPoolExecutor(workers) as pool:
        list(pool.map(hashing.sha256_file, files))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gb", type=float, default=3.0)
    parser.add_argument("--files", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    cores = hashing.workers_default()
    with tempfile.TemporaryDirectory(prefix="model-hash-") as tmp:
        files = generate(Path(tmp), int(args.gb * 1e9), args.files)
        total = sum(f.stat().st_size for f in files)
        names = [str(f) for f in files]
        subprocess.run(["cat", *names], stdout=subprocess.DEVNULL, check=True)  # into the page cache
        contenders = {
            "sha256sum_1": lambda: subprocess.run(
                ["sha256sum", *names], stdout=subprocess.DEVNULL, check=True
            ),
            "kit_threads_1": lambda: hashing.hash_files(files, 1),
            "sha256sum_n": lambda: subprocess.run(
                ["xargs", "-P", str(cores), "-n", "1", "sha256sum"],
                input="\n".join(names).encode(),
                stdout=subprocess.DEVNULL,
                check=True,
            ),
            "kit_threads_n": lambda: hashing.hash_files(files, cores),
            "kit_processes_n": lambda: processes(files, cores),
        }
        times = {name: [] for name in contenders}
        for _ in range(args.rounds):
            for name, call in contenders.items():
                times[name].append(timed(call))
    median = {k: statistics.median(v) for k, v in times.items()}
    gbps = {k: total / v / 1e9 for k, v in median.items()}
    result = {
        "bytes": total,
        "files": len(files),
        "cores": cores,
        "rounds": args.rounds,
        "gb_per_s": {k: round(v, 3) for k, v in gbps.items()},
        "per_core_ratio_vs_sha256sum": round(gbps["kit_threads_1"] / gbps["sha256sum_1"], 3),
        "all_cores_ratio_vs_parallel_sha256sum": round(gbps["kit_threads_n"] / gbps["sha256sum_n"], 3),
        "scaling_threads_n_over_1": round(gbps["kit_threads_n"] / gbps["kit_threads_1"], 3),
        "threads_over_processes": round(gbps["kit_threads_n"] / gbps["kit_processes_n"], 3),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
