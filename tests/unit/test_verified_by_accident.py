"""A seat is verified only while what it runs equals its records: no accident (a stray shell
variable, a restart onto changed weights, a venv pip-installed into before the kit kept a record)
may leave a run that differs from its records marked verified, and no run that equals its records
is marked UNVERIFIED. Errors from an edited lock are said in words.

Each test reproduces one way an unlucky operator got "verified" for something else (issue 37's
closing review), with the fake engine and stand-ins the unit tier uses elsewhere."""

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import free_port, prose, run_dir, wheel

from seatkit import engine, paths
from seatkit.bench import compare, oracle, run
from seatkit.bench.target import Options, Target
from seatkit.doctor import targets
from seatkit.errors import SeatError
from seatkit.image import vouch
from seatkit.models import lock, verify
from seatkit.seat import layout, profiles, what_runs
from seatkit.seat.sections import Native
from seatkit.serve import launch, preflight, provenance, runtime
from seatkit.serve import spec as specs
from seatkit.serve.backends import docker, native

TAG = "seatkit/try:overlay-1"
BUILT = "sha256:" + "a" * 64
BASE = "registry.invalid/vllm@sha256:" + "d" * 64
WEIGHTS = ["config.json", "model.safetensors", "tokenizer.json"]


def over(tmp_path, base: str, **fields) -> profiles.Profile:
    path = tmp_path / "try.yaml"
    path.write_text(yaml.safe_dump({"extends": base, **fields}))
    return profiles.load(str(path))


def test_a_value_passed_from_the_launching_shell_is_in_the_seats_launch_record(tmp_path, monkeypatch):
    """Reproduction: a verified docker profile passes B12X_MICRO_MAX_ACTIVE_CLUSTERS from the shell
    (docker.pass_env, as dsv4-flash-dspark-tp4 does); `seat up` once with it at 1, once at 8 left
    exported from another experiment. Both seats are verified and their provenance records are
    byte-equal, though the containers ran with different values (docs/threat-model.md: an
    allowlisted name's value is in the launch hash, so two runs can be told apart)."""
    monkeypatch.setenv("SEAT_HOME", str(tmp_path / "home"))
    profile = over(tmp_path, "cpu-smoke-docker", docker={"pass_env": ["B12X_MICRO_MAX_ACTIVE_CLUSTERS"]})
    spec = specs.build(profile)
    values = spec.values({})
    monkeypatch.setenv("B12X_MICRO_MAX_ACTIVE_CLUSTERS", "1")
    one = provenance.record(spec, values)
    monkeypatch.setenv("B12X_MICRO_MAX_ACTIVE_CLUSTERS", "8")
    eight = provenance.record(spec, values)
    assert spec.passed_env() == {"B12X_MICRO_MAX_ACTIVE_CLUSTERS": "8"}  # what the container gets
    assert one["passed"] != eight["passed"]


@pytest.mark.parametrize("name", ["PYTORCH_CUDA_ALLOC_CONF", "XDG_CACHE_HOME", "TMPDIR", "PATH"])
def test_what_a_native_seat_keeps_from_the_shell_is_in_its_launch_record(name, tmp_path, monkeypatch):
    """Reproduction: `seat up cpu-smoke` from two shells that differ only in a name the native
    server keeps (what_runs.yaml shell_kept: the allocator's settings, the cache and temporary
    folders, PATH, whose compilers the JIT runs). native.spawn hands the server that value, yet
    both provenance records are equal: the launch hash holds the profile's env alone."""
    monkeypatch.setenv("SEAT_HOME", str(tmp_path / "home"))
    spec = specs.build(profiles.load("cpu-smoke"))
    values = spec.values({})
    monkeypatch.setenv(name, "/one" if name != "PATH" else f"/opt/other-gcc/bin:{os.environ['PATH']}")
    first = provenance.record(spec, values)
    monkeypatch.setenv(name, "/two")
    assert first["passed"] != provenance.record(spec, values)["passed"]


class Seat:
    """A container of the fake engine, running as `seat up` started it."""

    id = "c" * 64
    status = "running"

    def __init__(self, profile: str):
        self.labels = docker.labels(profile)
        self.image = type("Image", (), {"id": BUILT, "labels": {}})()
        self.attrs = {
            "RestartCount": 0,
            "State": {"Status": "running", "StartedAt": "2099-01-01T00:00:00.000000000Z"},
            "Mounts": [],
        }

    def start(self):
        pass


class Engine:
    def __init__(self, profile: str):
        self.seat = Seat(profile)
        self.images = self.containers = self

    def get(self, ref):
        return self.seat if ref == self.seat.id else type("Image", (), {"id": BUILT})

    def create(self, image, *argv, **kwargs):
        return self.seat


def docker_seat_up(tmp_path, monkeypatch) -> Engine:
    """`seat up` of a verified overlay seat whose restart policy is unless-stopped; the engine."""
    monkeypatch.setenv("SEAT_HOME", str(tmp_path / "home"))
    profile = over(
        tmp_path, "cpu-smoke-docker", image={"overlay": True}, docker={"restart": "unless-stopped"}
    )
    monkeypatch.setattr(vouch.base_pins, "base_reference", lambda p, allow_unpinned=False: (BASE, "d"))
    vouch.record(TAG, BUILT, vouch.pins_now(profile))
    fake = Engine(profile.name)
    monkeypatch.setattr(engine, "client", lambda: fake)
    monkeypatch.setattr(preflight, "run", lambda spec, values: None)
    monkeypatch.setattr(verify, "unvouched_models", lambda p, environ=os.environ: None)
    monkeypatch.setattr(provenance, "launch_differs", lambda spec, sha: None)  # test_provenance's business
    launch._start(specs.build(profile), {"SEAT_IMAGE": TAG}, vouch.image_check)
    assert what_runs.mark(launch.recorded(profile.name).conditions()) is None  # verified at `seat up`
    return fake


@pytest.mark.parametrize(
    "since_up",
    [
        {},
        {"RestartCount": 2},  # its restart policy, after a crash
        {"State": {"Status": "running", "StartedAt": "2099-01-02T00:00:00.000000000Z"}},  # a reboot
    ],
)
def test_a_docker_seat_is_verified_at_bench_time_only_until_its_container_starts_again(
    since_up, tmp_path, monkeypatch
):
    """A reboot or `docker restart` starts it again without counting a restart; either way it
    loaded what was there then, which nothing checked. A container that never started again
    stays verified."""
    fake = docker_seat_up(tmp_path, monkeypatch)
    fake.seat.attrs.update(since_up)
    mark = what_runs.mark(targets.of_profile(str(tmp_path / "try.yaml")).conditions)
    assert (mark is not None) == bool(since_up), mark
    assert mark is None or "started again since `seat up`" in mark


def test_a_docker_seat_restarted_since_up_onto_changed_weights_is_not_verified(tmp_path, monkeypatch):
    """Reproduction: `seat up` of a verified overlay seat whose restart policy is unless-stopped (as
    dsv4-flash-dspark-tp4's); the weights are re-downloaded while it runs, the container crashes
    (or the host reboots) and docker starts it again, loading the new weights. `seat bench` reads
    the run record written at `up` and carries no mark, though `seat model verify` would now name
    the changed files: nothing compares a restart with the record."""
    fake = docker_seat_up(tmp_path, monkeypatch)
    fake.seat.attrs["RestartCount"] = 1  # its restart policy started it again
    changed = "model files changed since their last full verify: base/model.safetensors"
    monkeypatch.setattr(verify, "unvouched_models", lambda p, environ=os.environ: changed)
    monkeypatch.setattr(verify, "unvouched", lambda p, key, environ=os.environ: changed)
    target = targets.of_profile(str(tmp_path / "try.yaml"))
    assert what_runs.mark(target.conditions), target.conditions


def test_a_docker_seats_weights_are_checked_at_bench_time_where_its_container_mounts_them(
    tmp_path, monkeypatch
):
    """`SEAT_MODEL_BASE_DIR=/elsewhere seat up`, then `seat bench` from a shell without the knob:
    the weights looked at again are those the container mounts (not the profile's folder, which
    would mark a seat that equals its records), and a file rewritten there since marks the run."""
    monkeypatch.setenv("SEAT_HOME", str(tmp_path / "home"))
    weights = tmp_path / "elsewhere"
    weights.mkdir()
    for name in WEIGHTS:
        (weights / name).write_bytes(os.urandom(4096))
    model = {"build": None, "host_dir": str(tmp_path / "default"), "files": WEIGHTS, "mount": "/models-base"}
    profile = over(
        tmp_path,
        "cpu-smoke-docker",
        image={"overlay": True},
        models={"base": model},
        vllm_args={"load-format": "safetensors"},
    )
    knob = {"SEAT_MODEL_BASE_DIR": str(weights)}
    monkeypatch.setenv("SEAT_MODEL_BASE_DIR", str(weights))
    lock.write(profile, lock.make(profile))
    assert verify.verify(profile, full=True)["ok"]
    monkeypatch.delenv("SEAT_MODEL_BASE_DIR")
    monkeypatch.setattr(vouch.base_pins, "base_reference", lambda p, allow_unpinned=False: (BASE, "d"))
    vouch.record(TAG, BUILT, vouch.pins_now(profile))
    fake = Engine(profile.name)
    fake.seat.attrs["Mounts"] = [{"Source": str(weights), "Destination": "/models-base"}]
    monkeypatch.setattr(engine, "client", lambda: fake)
    monkeypatch.setattr(preflight, "run", lambda spec, values: None)
    monkeypatch.setattr(provenance, "launch_differs", lambda spec, sha: None)  # test_provenance's business
    launch._start(specs.build(profile), {"SEAT_IMAGE": TAG, **knob}, vouch.image_check)
    assert what_runs.mark(launch.recorded(profile.name).conditions()) is None  # verified at `seat up`
    assert what_runs.mark(targets.of_profile(str(tmp_path / "try.yaml")).conditions) is None
    (weights / "model.safetensors").write_bytes(os.urandom(4096))  # a download lands
    mark = what_runs.mark(targets.of_profile(str(tmp_path / "try.yaml")).conditions)
    assert mark and "base/model.safetensors" in mark, mark


def test_a_venv_without_a_record_is_adopted_only_with_the_locked_wheels_files(venv_locked, tmp_path):
    """Reproduction: a venv an older kit made (no install record beside it), into which someone
    pip-installed a rebuilt tiny-a of the locked version (other files, the same name and version).
    `seat setup` adopts it ("holds what its lock names") by name and version alone and records it,
    so every seat of it is verified while it runs code the hashed lock never held."""
    plan = Native(python="python3.11", venv="tiny-venv", packages=["tiny-a"])
    venv = runtime.ensure_venv(plan, say=lambda m: None)
    rebuilt = tmp_path / "rebuilt"
    rebuilt.mkdir()
    wheel(rebuilt, "tiny-a", "1.0", b"VALUE = 2  # not the locked wheel's\n")
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "-q", "install", "--force-reinstall", "--no-deps"]
        + [str(next(rebuilt.glob("*.whl")))],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    layout.venv_record(venv).unlink()  # as an older kit left it
    runtime.ensure_venv(plan, say=lambda m: None)  # no record: made again from the hashed lock
    module = next(venv.glob("lib/python3*/site-packages/tiny_a.py")).read_text()
    assert "not the locked" not in module, "a rebuilt distribution passed for the locked one"


def test_a_model_folder_named_by_another_path_to_it_stays_verified(tmp_path, monkeypatch):
    """Reproduction: /models is a link to the disk that holds the weights. `seat model verify` ran
    with the knob unset (the profile's folder); `seat up` runs with SEAT_MODEL_BASE_DIR set to the
    same folder through the link. Every file is the one verified (same inode, size, mtime), yet
    the seat is marked UNVERIFIED ("read from ..., its last full verify hashed ..."): the folder
    is compared as text."""
    monkeypatch.setenv("SEAT_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("SEAT_MODEL_BASE_DIR", raising=False)
    weights = tmp_path / "disk" / "smol"
    weights.mkdir(parents=True)
    for name in WEIGHTS:
        (weights / name).write_bytes(os.urandom(4096))
    (tmp_path / "models").symlink_to(tmp_path / "disk")
    model = {"build": None, "host_dir": str(weights), "files": WEIGHTS, "mount": "/models-base"}
    profile = over(
        tmp_path, "cpu-smoke-docker", models={"base": model}, vllm_args={"load-format": "safetensors"}
    )
    lock.write(profile, lock.make(profile))
    assert verify.verify(profile, full=True)["ok"]
    assert verify.unvouched(profile, "base", {"SEAT_MODEL_BASE_DIR": str(weights)}) is None
    through_link = str(tmp_path / "models" / "smol")
    assert verify.unvouched(profile, "base", {"SEAT_MODEL_BASE_DIR": through_link}) is None


def test_an_edited_models_lock_is_refused_in_words_not_python_literals(tmp_path, monkeypatch):
    """Reproduction: a models lock edited by hand (a file's sha256 line deleted), and a profile
    given a second model whose lock was not made again. Both are refused, rightly, but the first
    says "(KeyError: 'sha256')" and the second prints Python lists ("locks models ['base'], the
    profile has ['base', 'draft']")."""
    monkeypatch.setenv("SEAT_HOME", str(tmp_path / "home"))
    weights = tmp_path / "smol"
    weights.mkdir()
    for name in WEIGHTS:
        (weights / name).write_bytes(os.urandom(64))
    model = {"build": None, "host_dir": str(weights), "files": WEIGHTS}
    profile = over(tmp_path, "cpu-smoke", models={"base": model}, vllm_args={"load-format": "safetensors"})
    path = lock.write(profile, lock.make(profile))
    data = yaml.safe_load(path.read_text())
    del data["models"]["base"]["files"][0]["sha256"]
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(SeatError) as torn:
        lock.read(profile)
    lock.write(profile, lock.make(profile))
    grown = over(
        tmp_path,
        "cpu-smoke",
        models={"base": model, "draft": {**model, "files": list(WEIGHTS)}},
        vllm_args={"load-format": "safetensors"},
    )
    with pytest.raises(SeatError) as stale:
        lock.read(grown)
    for said in (torn.value.message, stale.value.message):
        assert "KeyError" not in said and "['" not in said, said


def test_a_bench_whose_seat_cannot_be_proven_alone_on_its_port_is_marked(server, tmp_path):
    """Reproduction: the operator runs the kit as a user of the docker group (not root) and benches
    a docker seat; the seat's processes are root's, so /proc/PID/fd cannot be read and
    launch.require_identity answers "unverifiable: cannot read the seat's open files" around every
    group. The bench ignores that answer: a leftover server bound to the same port (SO_REUSEPORT)
    would answer some requests, and the summary still carries no mark (threat model T6: what cannot
    be compared counts as different)."""
    unproven = "unverifiable: cannot read the seat's open files (Permission denied)"
    target = Target(server.url, oracle.MODEL, verify=lambda: unproven)
    summary = run.bench(target, prose(), Options(0, 1), run.RunDir(tmp_path, "unproven"))
    assert what_runs.mark(summary["conditions"]), summary["conditions"]


@pytest.mark.parametrize("name", ["dsv4-flash-dspark-tp4", "deepspark-prebuilt"])
def test_the_compose_seat_started_alone_refuses_to_serve_beyond_loopback_without_a_key(
    name, tmp_path, compose
):
    """Reproduction: `SEAT_HOST=0.0.0.0 docker compose up -d --no-deps seat` (the usual way to
    recreate one service) for a profile without an API key. --no-deps skips the one-shot
    exposure-check the seat depends on, and the seat's own command binds 0.0.0.0 with no key and
    no refusal, where serve/NAME.sh and `seat up` refuse (threat model T7). Seen on a private
    engine with busybox as SEAT_IMAGE: compose created the seat and went to start it (stopped only
    by the missing GPU driver), exposure-check never ran. Here the seat service's command, as
    compose interpolates it, runs with a stand-in vllm."""
    from test_launch_forms import EXPOSED, REFUSAL, compose_services

    seat = compose_services(compose, name, {"SEAT_HOST": EXPOSED})["seat"]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "vllm").write_text('#!/bin/sh\necho serving "$@"\n')
    (bin_dir / "vllm").chmod(0o755)
    done = subprocess.run(
        seat["command"], env={"PATH": f"{bin_dir}:/usr/bin:/bin"}, capture_output=True, text=True, timeout=60
    )
    assert done.returncode != 0 and REFUSAL in done.stderr, done.stdout[:200]


@pytest.mark.parametrize("ref", [BUILT, "mine/seat:v1"])
def test_the_image_seat_build_recorded_is_verified_under_any_name(ref, tmp_path, monkeypatch):
    """Reproduction: `seat build` recorded image BUILT under its tag; the operator runs the same
    image by its id (SEAT_IMAGE=sha256:...) or under a second tag (`docker tag`). The id is the
    content hash `seat build` recorded, from the pins in force, yet the seat is marked "is not one
    `seat build` recorded on this machine": the record is looked up by the name, not the id."""
    monkeypatch.setenv("SEAT_HOME", str(tmp_path / "home"))
    profile = over(tmp_path, "cpu-smoke-docker", image={"overlay": True})
    monkeypatch.setattr(vouch.base_pins, "base_reference", lambda p, allow_unpinned=False: (BASE, "d"))
    vouch.record(TAG, BUILT, vouch.pins_now(profile))
    images = {TAG: BUILT, ref: BUILT}
    client = type(
        "Engine",
        (),
        {"images": type("Images", (), {"get": lambda self, r: type("I", (), {"id": images[r]})})()},
    )
    monkeypatch.setattr(engine, "client", lambda: client)
    assert vouch.image_check(profile, TAG) == (BUILT, None)
    assert vouch.image_check(profile, ref) == (BUILT, None)


def test_compare_names_a_difference_in_what_the_two_seats_ran(tmp_path):
    """Reproduction: two verified runs of one profile; the second seat was started with SEAT_NSYS=
    profile left exported from a profiling session, so its server ran inside `nsys profile` (its
    launch hash differs) on another build of the image (its image id differs). Both run folders
    carry their provenance, but `seat bench compare` compares none of it: "Conditions that differ:
    none", and the slower step time is left unexplained."""
    sides = [run_dir(tmp_path, "a", "m", 10.0, 2.0, 200.0), run_dir(tmp_path, "b", "m", 9.0, 2.0, 222.0)]
    for side, digit in zip(sides, "ab", strict=True):
        summary = Path(side) / "summary.json"
        data = json.loads(summary.read_text())
        data["conditions"]["provenance"] = {"image": "sha256:" + digit * 64, "launch_sha256": digit * 64}
        summary.write_text(json.dumps(data))
    result = compare.compare(*sides)
    assert result.differing, compare.markdown(result)


def test_a_stray_seat_nsys_is_refused_in_words_not_a_python_literal(tmp_path, monkeypatch):
    """Reproduction: SEAT_NSYS=profile left exported from a profiling session, then `seat up
    cpu-smoke` (a native profile, which has no nsys modes). The refusal is right, but it reads
    "SEAT_NSYS='profile': ..." (Python's repr of the value)."""
    monkeypatch.setenv("SEAT_HOME", str(tmp_path / "home"))
    spec = specs.build(profiles.load("cpu-smoke"))
    with pytest.raises(SeatError) as refused:
        launch._start(spec, {"SEAT_NSYS": "profile"})
    assert "'profile'" not in refused.value.message, refused.value.message


def test_weights_rewritten_while_the_seat_loads_them_mark_its_run(tmp_path, monkeypatch):
    """Reproduction: `seat up` of a native seat whose weights a full verify vouched for; while the
    server loads (minutes for a large model), an `hf download` left running in another terminal
    rewrites model.safetensors with other bytes of the same size. The run record was written, as
    verified, before the server read a byte, and nothing looks again once it is ready: the seat
    serves the new weights and `seat bench` carries no mark."""
    weights = tmp_path / "weights"
    weights.mkdir()
    for name in WEIGHTS:
        (weights / name).write_bytes(os.urandom(4096))
    model = {"build": None, "host_dir": str(weights), "files": WEIGHTS}
    folder = tmp_path / "profiles"
    folder.mkdir()
    (folder / "cpu-smoke.yaml").write_text((paths.PROFILES / "cpu-smoke.yaml").read_text())
    data = {"extends": "cpu-smoke", "models": {"base": model}, "vllm_args": {"load-format": "safetensors"}}
    (folder / "seat.yaml").write_text(yaml.safe_dump(data))
    monkeypatch.setattr(paths, "PROFILES", folder)
    monkeypatch.setenv("SEAT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("SEAT_PORT", str(free_port()))
    vllm = tmp_path / "home" / "venvs" / profiles.load("cpu-smoke").native.venv / "bin" / "vllm"
    vllm.parent.mkdir(parents=True)
    vllm.write_text("#!/bin/sh\n")  # a venv for the preflight to find: not this test's business
    vllm.chmod(0o755)
    monkeypatch.setattr(native, "venv_mark", lambda *args: None)
    monkeypatch.setattr(provenance, "launch_differs", lambda spec, sha: None)  # test_provenance's business
    monkeypatch.setattr(native, "spawn", lambda *args: str(os.getpid()))
    profile = profiles.load("seat")
    lock.write(profile, lock.make(profile))
    assert verify.verify(profile, full=True)["ok"]

    def loading(run, timeout, tick):
        (weights / "model.safetensors").write_bytes(os.urandom(4096))  # the download lands
        return 1.0

    monkeypatch.setattr(launch, "wait_ready", loading)
    run, _ = launch.up(specs.build(profile))
    try:
        target = targets.of_profile("seat")  # as `seat bench seat` sees it
        mark = what_runs.mark(target.conditions)
        assert mark and "model.safetensors" in mark, "the seat serves weights no verify vouched for"
    finally:
        launch._forget(run)  # the record names this test's own process: nothing to signal
