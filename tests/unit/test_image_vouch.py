# ruff: noqa: F811  (profile: the fixture of test_outside_check, taken by name)
"""A profile that runs its image as it is (image.overlay false: cpu-smoke-docker, cpu-smollm2-docker,
deepspark-prebuilt) ran any image, SEAT_IMAGE's or one retagged under its tag, with nothing checked,
and its run record said verified. Now `seat up` starts it verified only when the record of the
build `seat build` made here vouches for the image; else the record carries why, and every number
of the seat is marked (the fake engine of test_outside_check)."""

import hashlib
from dataclasses import replace

import pytest
import yaml
from test_outside_check import (  # noqa: F401
    BUILT_FROM,
    LOCK,
    TAG,
    VLLM,
    Client,
    built,
    engine_with,
    profile,
)

from seatkit import engine
from seatkit.bench import report
from seatkit.doctor import image as doctor_image
from seatkit.image import outside, vouch
from seatkit.models import verify
from seatkit.seat import profiles, what_runs
from seatkit.seat.overlay_lock import Lock
from seatkit.serve import launch, preflight
from seatkit.serve import spec as specs
from seatkit.serve.backends import docker

RECORDED = "sha256:" + "a" * 64  # the id the fake engine gives the image under TAG
CONTAINER = "c" * 64


class Engine(Client):
    """The fake engine, where a seat's container (made with its argv) also starts."""

    def __init__(self, images):
        super().__init__(images)
        self.seats: list[str] = []

    def create(self, image, *argv, **kwargs):
        if not argv:  # a created, never-started container the outside check reads
            return super().create(image, **kwargs)
        self.seats.append(image)
        return type("Seat", (), {"id": CONTAINER, "start": lambda self: None})()


@pytest.fixture
def as_is(profile, tmp_path, monkeypatch):
    """A profile over cpu-smoke-docker that runs its image as it is; the fake engine holds the image
    `seat build` made (under TAG) and the base the profile pins."""
    path = tmp_path / "asis.yaml"
    path.write_text(yaml.safe_dump({"extends": "cpu-smoke-docker"}))
    client = Engine({TAG: (RECORDED, {}, built()), "base": ("sha256:" + "e" * 64, {}, {})})
    monkeypatch.setattr(engine, "client", lambda: client)
    monkeypatch.setattr(preflight, "run", lambda spec, values: None)
    monkeypatch.setattr(vouch, "load", lambda: LOCK)
    # Its weights are test_model_marks's business: here no lock pins them, which marks them too.
    monkeypatch.setattr(verify, "unvouched_models", lambda profile, environ: None)
    loaded = profiles.load(str(path))
    assert not loaded.image.overlay
    return loaded, client


def started(profile, image_check=vouch.image_check, image=TAG) -> launch.Running:
    """`seat up`'s start of the profile's seat with SEAT_IMAGE=image: its run record."""
    launch._start(specs.build(profile), {"SEAT_IMAGE": image}, image_check)
    return launch.recorded(profile.name)


def test_an_image_no_build_record_vouches_for_is_marked_and_the_mark_reaches_its_numbers(as_is):
    profile, client = as_is
    record = started(profile)
    why = vouch.not_built(TAG)
    assert record.unverified == why and "nothing checked what it runs" in why
    assert client.seats == [RECORDED]  # run by the id looked at, never by the tag
    summary = {"conditions": record.conditions(), "suites": {"code": {"content": "code", "requests": 1}}}
    assert report.rows(summary)[0][0] == "code UNVERIFIED"
    (row,) = doctor_image.experiment(profile, record)
    assert row.status == "WARN" and f"UNVERIFIED ({why})" in row.evidence
    assert "experiment" not in row.evidence and "seat build" in row.fix


def test_the_kits_own_build_is_verified(as_is):
    profile, client = as_is
    outside.record(TAG, RECORDED, profile, LOCK, BUILT_FROM)
    record = started(profile)
    assert record.unverified is None and record.conditions() == {}
    assert client.seats == [RECORDED]


@pytest.mark.parametrize(
    "recorded, base",
    [
        ("sha256:" + "0" * 64, BUILT_FROM),  # another image retagged under the recorded tag since
        (RECORDED, ("base", "c", "sha256:" + "9" * 64)),  # built on an earlier pin than today's
    ],
)
def test_an_image_the_record_does_not_vouch_for_is_marked(as_is, recorded, base):
    profile, _ = as_is
    outside.record(TAG, recorded, profile, LOCK, base)
    assert started(profile).unverified == vouch.not_built(TAG)


def test_a_prebuilt_image_the_kit_never_built_is_marked(as_is):
    """The profile's own image, as it names it: no build of the kit's, so nothing vouches for it."""
    profile, client = as_is
    record = started(profile, image="base")
    assert record.unverified == vouch.not_built("base") and client.seats == ["sha256:" + "e" * 64]


def test_a_seat_started_without_the_image_check_is_marked(as_is):
    profile, client = as_is
    outside.record(TAG, RECORDED, profile, LOCK, BUILT_FROM)
    assert started(profile, image_check=None).unverified == docker.UNCHECKED
    assert client.seats == [TAG]


def test_an_experiment_carries_both_reasons(as_is, tmp_path):
    path = tmp_path / "exp.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "extends": "cpu-smoke-docker",
                "env": {"PYTHONPATH": "/srv/patched"},
                "experiment": {"unverified": True, "reason": "a patched scheduler"},
            }
        )
    )
    record = started(profiles.load(str(path)))
    assert record.unverified == f"a patched scheduler; {vouch.not_built(TAG)}"
    assert what_runs.marked("x", record.conditions()).startswith("x UNVERIFIED (a patched scheduler; ")


def test_an_image_built_from_another_overlay_lock_than_the_kits_is_marked(as_is):
    """`seat build --lock mine.lock`: the image runs its own lock's files, and is checked against
    them, but it does not run the overlay the kit pins, so its numbers say so."""
    profile, _ = as_is
    mine = replace(LOCK, commit="b" * 40)
    outside.record(TAG, RECORDED, profile, mine, BUILT_FROM)
    why = vouch.other_lock(mine)
    assert started(profile).unverified == why and "not the pinned overlay" in why
    assert mine.sha256[:16] in why and "b" * 12 in why


def test_another_lock_and_a_mount_the_build_cannot_vouch_for_are_both_marked(as_is, monkeypatch):
    """Two reasons, both kept: the mount problem once replaced the other lock's mark."""
    profile, _ = as_is
    mine = replace(LOCK, commit="b" * 40)
    outside.record(TAG, RECORDED, profile, mine, BUILT_FROM)
    monkeypatch.setattr(outside, "_mounts", lambda *args: ["a mount lands over /opt/venv/bin"])
    why = started(profile).unverified
    assert why is not None and why.startswith(vouch.other_lock(mine) + "; ")
    assert why.endswith("but: a mount lands over /opt/venv/bin")


def test_an_overlay_image_built_from_another_lock_runs_it_and_is_marked(profile, monkeypatch):
    """An overlay profile's image of `seat build --lock other.lock`: checked against that lock (its
    files are the other lock's), started, and marked: it is not the overlay the kit pins."""
    code = b"__version__ = '0.32'\nimport os  # a fork's scheduler, not the overlay\n"
    other = Lock(
        LOCK.source, LOCK.commit, LOCK.path, LOCK.tree, {"version.py": hashlib.sha256(code).hexdigest()}
    )
    engine_with(monkeypatch, built(**{f"{VLLM}/version.py": code}))
    outside.record(TAG, RECORDED, profile, other, BUILT_FROM)
    monkeypatch.setattr(vouch, "load", lambda: LOCK)
    assert profile.image.overlay
    image_id, why = vouch.image_check(profile, TAG)
    assert image_id == RECORDED and why == vouch.other_lock(other)
