"""`seat up` records a seat verified only when its weights are vouched for: every locked model's
last full verify found its folder as locked and nothing in it changed since (or `--verify-models`
hashed it in this `up`). Else the run record, whence every result's mark, says why. Preflight
compares sizes only, and a fine-tuned checkpoint of the same shapes has every size of the lock
(review3 #4)."""

import os
import shutil

import pytest
import yaml
from conftest import free_port

from seatkit import paths
from seatkit.doctor import image as doctor_image
from seatkit.models import lock, verify
from seatkit.seat import profiles, what_runs
from seatkit.serve import launch, provenance
from seatkit.serve import spec as specs
from seatkit.serve.backends import native

FILES = ["config.json", "model.safetensors", "tokenizer.json"]


def stand_in_venv(home):
    """A venv with a `vllm` for preflight to find; what it holds is no concern of these tests."""
    vllm = home / "venvs" / profiles.load("cpu-smoke").native.venv / "bin" / "vllm"
    vllm.parent.mkdir(parents=True, exist_ok=True)
    vllm.write_text("#!/bin/sh\n")
    vllm.chmod(0o755)


@pytest.fixture
def kit(tmp_path, monkeypatch):
    """profiles/ of its own (cpu-smoke, and `seat` over it reading real weights from a folder of
    this test), with `seat up`'s start faked: the record names this process."""
    folder = tmp_path / "profiles"
    folder.mkdir()
    shutil.copy(paths.PROFILES / "cpu-smoke.yaml", folder)
    shutil.copy(paths.PROFILES / "cpu-smoke-docker.yaml", folder)
    weights = tmp_path / "weights"
    weights.mkdir()
    for name in FILES:
        (weights / name).write_bytes(os.urandom(4096))
    model = {"build": None, "host_dir": str(weights), "files": FILES}
    data = {"extends": "cpu-smoke", "models": {"base": model}, "vllm_args": {"load-format": "safetensors"}}
    (folder / "seat.yaml").write_text(yaml.safe_dump(data))
    docker = {
        "extends": "cpu-smoke-docker",
        "models": {"base": {**model, "mount": "/models-base"}},
        "vllm_args": {"load-format": "safetensors"},
    }
    (folder / "boxed.yaml").write_text(yaml.safe_dump(docker))
    monkeypatch.setattr(paths, "PROFILES", folder)
    monkeypatch.setenv("SEAT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("SEAT_PORT", str(free_port()))
    stand_in_venv(tmp_path / "home")  # the venv is not this test's
    monkeypatch.setattr(native, "venv_mark", lambda *args: None)
    monkeypatch.setattr(provenance, "launch_differs", lambda spec, sha256: None)  # test_provenance's
    monkeypatch.setattr(native, "spawn", lambda *args: str(os.getpid()))
    return weights


def locked(name: str) -> profiles.Profile:
    profile = profiles.load(name)
    lock.write(profile, lock.make(profile))
    return profile


def started(profile, environ=None) -> str | None:
    """`seat up`'s start of the profile's seat: what its run record says is unverified."""
    launch._start(specs.build(profile), environ)
    return what_runs.mark(launch.recorded(profile.name).conditions())


def test_weights_fully_verified_and_unchanged_start_a_verified_seat(kit):
    profile = locked("seat")
    assert verify.verify(profile, full=True)["ok"]
    assert started(profile) is None


def test_weights_rewritten_since_their_full_verify_start_a_seat_not_recorded_as_verified(kit):
    profile = locked("seat")
    assert verify.verify(profile, full=True)["ok"]
    (kit / "model.safetensors").write_bytes(os.urandom(4096))  # other weights, the same size
    why = started(profile)
    assert why is not None and "base/model.safetensors" in why, why
    assert why.startswith("model files changed since their last full verify (")
    assert why.endswith("(seat model verify seat, or seat up --verify-models)")
    (row,) = doctor_image.experiment(profile, launch.recorded("seat"))  # doctor says it, and what to do
    assert row.status == "WARN" and f"UNVERIFIED ({why})" in row.evidence
    assert "seat model verify seat" in row.evidence and "seat down seat && seat up seat" in row.fix


def test_weights_never_fully_verified_here_are_marked_until_verify_models_hashes_them(kit):
    profile = locked("seat")
    assert started(profile) == (
        "model base: never fully verified against its lock here "
        "(seat model verify seat, or seat up --verify-models)"
    )
    launch._forget(launch.recorded("seat"))
    verify.require_match(profile)  # what `seat up --verify-models` runs before the start
    assert started(profile) is None


def test_a_model_no_lock_pins_is_marked(kit):
    why = started(profiles.load("seat"))
    assert why is not None and why.startswith("model base: no models lock pins its files"), why


def test_an_experiment_carries_both_reasons(kit, tmp_path):
    data = {"extends": "seat", "env": {"VLLM_CPU_KVCACHE_SPACE": "2"}}
    (paths.PROFILES / "exp.yaml").write_text(
        yaml.safe_dump({**data, "experiment": {"unverified": True, "reason": "a patched scheduler"}})
    )
    assert started(profiles.load("exp")).startswith("a patched scheduler; model base: no models lock")


def test_a_docker_seats_model_folder_knob_onto_other_same_size_weights_is_not_vouched_for(kit, tmp_path):
    """A container mounts SEAT_MODEL_BASE_DIR: other weights of every locked size are not the ones
    hashed, whatever the record says of the profile's folder."""
    profile = locked("boxed")
    assert verify.verify(profile, full=True)["ok"]
    values = specs.build(profile).values({})
    assert verify.unvouched_models(profile, values) is None
    other = tmp_path / "other"
    shutil.copytree(kit, other)
    (other / "model.safetensors").write_bytes(os.urandom(4096))
    why = verify.unvouched_models(profile, specs.build(profile).values({"SEAT_MODEL_BASE_DIR": str(other)}))
    assert why is not None and f"read from {other}, its last full verify (" in why, why
    assert f"hashed {kit}" in why


def test_a_native_seat_s_verify_hashes_the_folder_it_serves_whatever_the_knob_says(
    kit, tmp_path, monkeypatch
):
    """A native server is started on the profile's host_dir (the knob moves no native model): a
    full verify with the knob set hashed another folder, and vouched for nothing the seat read.
    Now it hashes host_dir, and a broken copy where the knob points changes nothing."""
    profile = locked("seat")
    other = tmp_path / "other"
    shutil.copytree(kit, other)
    for file in other.iterdir():
        file.write_bytes(b"not the locked bytes")
    monkeypatch.setenv("SEAT_MODEL_BASE_DIR", str(other))
    assert verify.verify(profile, full=True)["ok"]  # kit's folder, as locked; `other` never read
    assert started(profile) is None


def test_seat_setup_records_the_built_models_it_hashed_so_its_seat_starts_verified(tmp_path, monkeypatch):
    """The README's main job (seat demo: setup, then up) on a machine no `seat model verify` ran."""
    from seatkit.serve import runtime

    monkeypatch.setenv("SEAT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("SEAT_PORT", str(free_port()))
    stand_in_venv(tmp_path / "home")
    monkeypatch.setattr(native, "venv_mark", lambda *args: None)
    monkeypatch.setattr(provenance, "launch_differs", lambda spec, sha256: None)  # test_provenance's
    monkeypatch.setattr(native, "spawn", lambda *args: str(os.getpid()))
    monkeypatch.setattr(runtime, "ensure_venv", lambda native, say: tmp_path / "venv")
    folder = tmp_path / "home" / "models" / "tiny-llama"
    folder.mkdir(parents=True)
    for name in ["config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json"]:
        (folder / name).write_bytes(os.urandom(64))
    (tmp_path / "built.yaml").write_text("extends: cpu-smoke\n")
    profile = locked(str(tmp_path / "built.yaml"))
    assert verify.last_full(profile.name) is None
    runtime.setup(profile, say=lambda line: None)
    assert verify.last_full(profile.name)["ok"] and started(profile) is None
