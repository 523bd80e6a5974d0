"""Benchmark: the containerised cpu-smoke seat (cpu-smoke-docker), measured in one run.

Not a test (it asserts nothing about speed). It prints:
- the base image's build: from nothing but pip's own cache (wheelhouse and image removed; --cold),
  with the wheelhouse kept (image removed; --rebuild), and cached (tag present); own tags, removed after;
- `seat build` (the overlay onto the pinned base, --no-cache) and its cached rebuild;
- container start to ready, and `seat up` against a bare `docker run` of the same image with the
  same arguments (the rendered script's own command), alternating, as a ratio;
- the bench's figures (tokens/step, ms/step, tok/s; code suite) of the container seat against the
  native cpu-smoke seat, same model and k, alternating rounds.
Needs root, a docker engine, mmdebstrap and docker-registry, and cpu-smoke's venv. Usage:
    .venv/bin/python tests/benchmarks/container_seat.py [ROUNDS] [--rebuild | --cold]
"""

import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import docker

from seatkit import paths
from seatkit.bench import run as bench_run
from seatkit.bench import workload
from seatkit.bench.target import Options
from seatkit.doctor import targets
from seatkit.image import build as image_build
from seatkit.image import cpu_base, overlay, registry
from seatkit.orchestrate import docker_chain
from seatkit.ports import free_loopback_port
from seatkit.seat import profiles
from seatkit.serve import keys, launch, runtime
from seatkit.serve import spec as specs

ROUNDS = int(next((a for a in sys.argv[1:] if a.isdigit()), 2))
COLD = "--cold" in sys.argv  # also build the base from nothing but pip's cache (many minutes)
REBUILD = COLD or "--rebuild" in sys.argv  # also rebuild it from the kept wheelhouse
SEAT = os.path.join(os.path.dirname(sys.executable), "seat")
REPEATS = Options(warmups=1, repeats=3)


def timed(action) -> tuple[float, object]:
    start = time.monotonic()
    result = action()
    return time.monotonic() - start, result


def base_builds(plan) -> dict[str, float]:
    """Base build times under throwaway tags (the kept wheelhouse is restored after a cold round)."""
    out = {}
    tag = f"seatkit-bench/vllm-cpu:{uuid.uuid4().hex[:8]}"
    if COLD:
        home = Path(tempfile.mkdtemp(prefix="seatkit-bench-home-"))
        os.environ["SEAT_HOME"], previous = str(home), os.environ.get("SEAT_HOME")
        try:
            out["base, cold (no wheelhouse, no image; pip cache kept)"] = timed(
                lambda: cpu_base.build(tag, plan, say=lambda m: None)
            )[0]
        finally:
            os.environ.pop("SEAT_HOME") if previous is None else os.environ.update(SEAT_HOME=previous)
            shutil.rmtree(home, ignore_errors=True)
        subprocess.run(["docker", "rmi", tag], capture_output=True)
    if REBUILD:
        out["base, wheelhouse kept, image removed"] = timed(
            lambda: cpu_base.build(tag, plan, say=lambda m: None)
        )[0]
    else:
        subprocess.run(
            ["docker", "tag", docker_chain.base_tag(profiles.load(docker_chain.PROFILE)), tag], check=True
        )
    out["base, cached (tag present)"] = timed(lambda: cpu_base.build(tag, plan, say=lambda m: None))[0]
    subprocess.run(["docker", "rmi", tag], capture_output=True)
    return out


def bare_argv(env: dict, name: str) -> list[str]:
    """The rendered script's own `docker run`, detached: the same image and arguments, no kit."""
    dry = subprocess.run(
        ["bash", str(paths.REPO / "serve" / "cpu-smoke-docker.sh")],
        capture_output=True,
        text=True,
        check=True,
        env={**env, "SEAT_DRY_RUN": "1", "SEAT_SKIP_PREFLIGHT": "1", "SEAT_CONTAINER": name},
    )
    argv = shlex.split(
        dry.stdout.replace("\\\n", " ")
    )  # the dry run continues its lines; shlex keeps "\n" words
    return [argv[0], argv[1], "-d", *argv[2:]]


def ready(env: dict, ident: str) -> None:
    run = launch.Running(
        docker_chain.PROFILE,
        "docker",
        ident,
        f"http://127.0.0.1:{env['SEAT_PORT']}",
        "tiny",
        "/dev/null",
        0,
        api_key_file=env["SEAT_API_KEY_FILE"],
    )
    # A bare `docker run` is not `seat up`'s seat (no record, no home label): the engine says if it runs.
    launch.wait_ready(
        run,
        900,
        lambda stage, t: None,
        running=lambda r: docker.from_env().containers.get(r.ident).status == "running",
    )


def by_kit(path: Path, env: dict) -> float:
    took, _ = timed(lambda: subprocess.run([SEAT, "up", str(path)], env=env, check=True, capture_output=True))
    subprocess.run([SEAT, "down", str(path)], env=env, check=True, capture_output=True)
    return took


def bare(env: dict) -> float:
    name = f"seatkit-bench-bare-{uuid.uuid4().hex[:8]}"
    start = time.monotonic()
    ident = subprocess.run(
        bare_argv(env, name), env=env, check=True, capture_output=True, text=True
    ).stdout.strip()
    try:
        ready(env, ident)
        return time.monotonic() - start
    finally:
        subprocess.run(["docker", "stop", "-t", "30", ident], capture_output=True)


def bench(profile: str, spec, environ: dict, out: Path) -> dict:
    seat, waited = launch.up(spec, environ=environ)
    try:
        run_dir = bench_run.RunDir(out, f"bench-{spec.profile.name}")
        summary = bench_run.bench(
            targets.of_profile(profile),
            workload.suites(["code"], 256),
            REPEATS,
            run_dir,
            progress=lambda m: None,
        )
    finally:
        launch.stop(seat, grace=30)
    code = summary["suites"]["code"]
    return {
        "ready_s": waited,
        **{k: code[k]["median"] for k in ("tokens_per_step", "ms_per_step", "decode_tok_s")},
    }


def main() -> None:
    native_profile = profiles.load("cpu-smoke")
    made = runtime.setup(native_profile, say=lambda m: None)
    figures = base_builds(native_profile.native)
    for name, seconds in figures.items():
        print(f"{name}: {seconds:.1f} s", flush=True)
    base = docker_chain.build_base(profiles.load(docker_chain.PROFILE), say=lambda m: None)["tag"]
    work = Path(tempfile.mkdtemp(prefix="seatkit-bench-container-"))
    with registry.loopback(paths.seat_home() / "docker-demo" / "registry") as address:  # the demo's, kept
        path = docker_chain.pinned_profile(work, address, base)
    pinned = profiles.load(str(path))
    tree, source = docker_chain.overlay_repo(base, pinned.image.vllm_dir, work / "overlay")
    lock = overlay.lock_from(tree, source, "vllm")
    first, built = timed(lambda: image_build.build(pinned, lock, tree, nocache=True))
    again, _ = timed(lambda: image_build.build(pinned, lock, tree))
    print(
        f"seat build (--no-cache): {first:.1f} s; cached rebuild: {again:.1f} s; "
        f"{built['copied']} files copied, layer {built['overlay_layer_bytes']} bytes",
        flush=True,
    )

    (work / "cache").mkdir()
    env = {
        **os.environ,
        "SEAT_HOME": str(work / "home"),
        "SEAT_IMAGE": built["tag"],
        "SEAT_MODEL_BASE_DIR": str(made["base"]),
        "SEAT_CACHE_DIR": str(work / "cache"),
        "SEAT_CONTAINER": f"seatkit-bench-{uuid.uuid4().hex[:8]}",
        "SEAT_PORT": str(free_loopback_port()),
        "SEAT_API_KEY_FILE": str(keys.ensure(work / "key")),
    }  # the script and `seat up` both read it
    kit, hand = [], []
    for i in range(ROUNDS):
        kit.append(by_kit(path, env))
        hand.append(bare(env))
        print(
            f"round {i + 1}: seat up {kit[-1]:.1f} s, bare docker run {hand[-1]:.1f} s (to ready)", flush=True
        )
    k, h = statistics.median(kit), statistics.median(hand)
    print(
        f"container start to ready: median {h:.1f} s bare, {k:.1f} s through `seat up` (CLI start, preflight "
        f"and state file included); overhead {k - h:+.1f} s, ratio {k / h:.3f}",
        flush=True,
    )

    sides = {
        "container": (str(path), specs.build(pinned), env),
        "native": (
            "cpu-smoke",
            specs.build(native_profile),
            {**os.environ, "SEAT_PORT": str(free_loopback_port())},
        ),
    }
    results = {side: [] for side in sides}
    for i in range(ROUNDS):
        for side, (name, spec, environ) in sides.items():
            results[side].append(bench(name, spec, environ, work / "runs"))
            print(
                f"round {i + 1} {side}: {json.dumps({k: round(v, 3) for k, v in results[side][-1].items()})}",
                flush=True,
            )
    medians = {
        side: {k: statistics.median(r[k] for r in rows) for k in rows[0]} for side, rows in results.items()
    }
    for key in ("tokens_per_step", "ms_per_step", "decode_tok_s", "ready_s"):
        c, n = medians["container"][key], medians["native"][key]
        print(f"{key:>16}: container {c:.3f}, native {n:.3f}, container/native {c / n:.3f}")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
