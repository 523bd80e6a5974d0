"""Benchmark: the overlay layer's size and `seat build`'s time.

Not a test. The real overlay (2,205 files, 25.8 MB) cannot be fetched here, so a synthetic one of
the same shape stands in: 2,205 files, 25,757,677 bytes, seeded random content. Three bases (the
busybox stand-in with a vllm package): none of the files, 1,407 of them byte-identical (what the
overlay shares with the nearest fork snapshot), and all but 15 (only the DSpark files differ).
A plain `docker build .` of the repository (the whole overlay) is timed against `seat build` (only
what differs), alternating, in one run, on the base with 1,407 identical files. Needs a docker engine and the tests' busybox image
(seatkit-test/busybox:2). Usage:
    .venv/bin/python tests/benchmarks/image_build.py [ROUNDS]
"""

import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from seatkit import paths
from seatkit.image import build, overlay

sys.path.insert(0, str(paths.REPO / "tests" / "integration"))
from plain_repo import repository_copy  # noqa: E402

from seatkit.seat import profiles

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 5
FILES, TOTAL = 2205, 25_757_677
VLLM = "/opt/venv/lib/python3.12/site-packages/vllm"
BUSYBOX = "seatkit-test/busybox:2"


def synthetic_overlay(root: Path) -> list[str]:
    rng = random.Random(20260615)
    weights = [rng.paretovariate(1.2) for _ in range(FILES)]
    sizes = [max(1, int(TOTAL * w / sum(weights))) for w in weights]
    sizes[0] += TOTAL - sum(sizes)
    names = [f"pkg{i % 40}/mod{i}.{'json' if i % 4 == 0 else 'py'}" for i in range(FILES)]
    for name, size in zip(names, sizes, strict=True):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(rng.randbytes(size))
    return names


def base_with(names: list[str], root: Path, tag: str, work: Path) -> None:
    ctx = work / tag.replace("/", "_").replace(":", "_")
    for name in names:
        (ctx / "vllm" / name).parent.mkdir(parents=True, exist_ok=True)
        (ctx / "vllm" / name).write_bytes((root / name).read_bytes())
    (ctx / "vllm").mkdir(parents=True, exist_ok=True)
    (ctx / "Dockerfile").write_text(f"FROM {BUSYBOX}\nCOPY vllm/ {VLLM}/\n")
    subprocess.run(["docker", "build", "-q", "-t", tag, str(ctx)], check=True, capture_output=True)


def plain_against_seat_build(work: Path, root: Path, lock, shared: list[str], rounds: int) -> None:
    profile = profiles.load(str(work / f"bench{len(shared)}.yaml"))
    repo = repository_copy(work / "repo", profile, lock, root)
    base = f"seatkit-bench/base:{len(shared)}"
    times: dict[str, list[float]] = {"plain docker build": [], "seat build": []}
    for _ in range(rounds):
        start = time.monotonic()
        subprocess.run(
            [
                "docker",
                "build",
                "-q",
                "--no-cache",
                "--network",
                "none",
                "--build-arg",
                f"BASE_IMAGE={base}",
                "-t",
                "seatkit-bench/plain:1",
                ".",
            ],
            cwd=repo,
            check=True,
            capture_output=True,
        )
        times["plain docker build"].append(time.monotonic() - start)
        start = time.monotonic()
        result = build.build(profile, lock, root, allow_unpinned=True, nocache=True)
        times["seat build"].append(time.monotonic() - start)
    plain_layer = build.overlay_layer("seatkit-bench/plain:1", base)["overlay_layer_bytes"]
    p, k = (statistics.median(v) for v in times.values())
    print(
        f"1,407 identical in the base, {rounds} alternating rounds: plain docker build {p:.1f} s, "
        f"overlay layer {plain_layer / 1e6:.2f} MB; seat build {k:.1f} s, {result['overlay_layer_bytes'] / 1e6:.2f} MB "
        f"(time ratio {p / k:.2f}, layer ratio {plain_layer / result['overlay_layer_bytes']:.2f})"
    )


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        root = work / "overlay"
        names = synthetic_overlay(root)
        lock = overlay.lock_from(root, "https://example.invalid/synthetic@" + "cd" * 20)
        print(
            f"synthetic overlay: {len(lock.files)} files, {sum(p.stat().st_size for p in root.rglob('*') if p.is_file()):,} bytes"
        )
        cases = {
            "no file in the base": [],
            "1,407 identical in the base": names[:1407],
            "all but 15 identical": names[:-15],
        }
        for label, shared in cases.items():
            tag = f"seatkit-bench/base:{len(shared)}"
            base_with(shared, root, tag, work)
            profile_path = work / f"bench{len(shared)}.yaml"
            profile_path.write_text(
                yaml.safe_dump(
                    {
                        "extends": profiles.DEFAULT_PROFILE,
                        "image": {"name": "seatkit-bench/base", "tag": str(len(shared)), "smoke_imports": []},
                    }
                )
            )
            start = time.monotonic()
            result = build.build(
                profiles.load(str(profile_path)), lock, root, allow_unpinned=True, nocache=True
            )
            took = time.monotonic() - start
            print(
                f"{label:30s} copied {result['copied']:5d} files, overlay layer "
                f"{result['overlay_layer_bytes'] / 1e6:6.2f} MB ({result['overlay_layer_bytes'] / TOTAL:.3f} of 25.8 MB), "
                f"seat build {took:.1f} s"
            )
        plain_against_seat_build(work, root, lock, names[:1407], ROUNDS)


if __name__ == "__main__":
    main()
