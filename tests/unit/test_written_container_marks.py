# ruff: noqa: F811  (profile: the fixture of test_outside_check, taken by name)
"""A container written into after `seat up` (a .pth docker cp'd into site-packages, a module of
the overlay edited by docker exec) fails doctor's overlay row, which judges the container's own
layer (tree.written); the bench judges it the same way: its results are marked with what was
written, and a write during the bench stops it (review3 #9). test_outside_check's fake engine."""

from dataclasses import replace

import pytest
from test_outside_check import LOCK, RUN_TIME, SITE_PACKAGES, profile, running_container  # noqa: F401

from seatkit import engine
from seatkit.doctor import targets
from seatkit.errors import SeatError
from seatkit.image import outside
from seatkit.serve import launch

IDENT = "c" * 64  # a full container id, as a run record holds one
PLANTED = {"Path": f"{SITE_PACKAGES}/zz.pth", "Kind": 1}


@pytest.fixture
def seat(profile, monkeypatch):
    """The profile's container, as `seat up` recorded it (verified, from this very file), with
    only the run-time writes in its layer so far: the box, to write into."""
    made = running_container(monkeypatch, changes=RUN_TIME)
    box = engine.client().get(made)
    engine.client().by_id[IDENT] = box
    box.id = IDENT
    box.image.labels = {}
    monkeypatch.setattr(outside, "lock_for", lambda image, default: LOCK)
    run = launch.Running(
        profile.name,
        "docker",
        IDENT,
        "http://127.0.0.1:9",
        "tiny",
        "log",
        0.0,
        profile_sha256=profile.sha256,
        profile_source=profile.source,
        unverified=None,
    )
    launch._record(run)
    monkeypatch.setattr(launch, "alive", lambda run: True)  # the fake engine's container runs
    monkeypatch.setattr(launch, "require_identity", lambda run: "ours")
    return box


def test_the_bench_of_a_container_only_its_run_time_wrote_into_is_verified(profile, seat):
    assert outside.check(profile, IDENT, LOCK, is_container=True).problems == []
    target = targets.of_profile(profile.source)
    assert "unverified" not in target.conditions
    assert target.verify() == "ours"


def test_the_bench_of_a_container_written_into_since_its_start_is_marked(profile, seat):
    seat.changes.append(PLANTED)
    said = outside.check(profile, IDENT, LOCK, is_container=True).problems  # what doctor says
    assert said
    why = targets.of_profile(profile.source).conditions["unverified"]
    assert why == f"written into its container since it started: {'; '.join(said)}", why
    assert "zz.pth" in why


def test_a_record_mark_and_the_written_files_are_both_carried(profile, seat):
    launch._record(replace(launch.recorded(profile.name), unverified="a reason"))
    seat.changes.append(PLANTED)
    why = targets.of_profile(profile.source).conditions["unverified"]
    assert why.startswith("a reason; written into its container since it started: ") and "zz.pth" in why


def test_a_write_during_the_bench_stops_it_naming_the_file(profile, seat):
    target = targets.of_profile(profile.source)
    seat.changes.append(PLANTED)
    with pytest.raises(SeatError) as err:
        target.verify()
    assert "written into during the bench" in err.value.message and "zz.pth" in err.value.message
    assert f"seat down {profile.name} && seat up {profile.name}" in err.value.hint
