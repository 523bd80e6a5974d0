"""Model files are what the lock says, also through links: a re-pointed link is seen by doctor,
`seat model lock` follows links inside the model folder, refuses ones that leave it, and never
skips a file silently."""

import os
import shutil
from pathlib import Path

import pytest

from seatkit.doctor import models as doctor_models
from seatkit.errors import SeatError
from seatkit.models import lock as locks
from seatkit.models import verify
from seatkit.seat import profiles


@pytest.fixture
def seat(tmp_path, monkeypatch):
    """cpu-smoke's profile copied beside its own model folder (and lock) under tmp_path."""
    monkeypatch.setenv("SEAT_HOME", str(tmp_path / "home"))
    source = Path(profiles.load("cpu-smoke").source)
    shutil.copy(source, tmp_path / source.name)
    profile = profiles.load(str(tmp_path / source.name))
    model = tmp_path / "home" / "models" / "tiny-llama"
    model.mkdir(parents=True)
    for name in profile.models["base"].files:
        (model / name).write_bytes(os.urandom(64))
    return profile, model


def test_a_link_re_pointed_to_another_blob_of_the_same_size_is_seen_by_doctor(seat):
    profile, model = seat
    name = profile.models["base"].files[0]
    blobs = model / "blobs"
    blobs.mkdir()
    (blobs / "a").write_bytes(os.urandom(64))
    (blobs / "b").write_bytes(os.urandom(64))  # same size, other bytes, written before the verify
    (model / name).unlink()
    (model / name).symlink_to(blobs / "a")
    locks.write(profile, locks.make(profile))
    assert verify.verify(profile)["ok"]
    assert doctor_models.last_verify(profile).status == "OK"
    (model / name).unlink()
    (model / name).symlink_to(blobs / "b")  # no byte of any blob written since
    row = doctor_models.last_verify(profile)
    assert row.status == "WARN" and f"base/{name}" in row.evidence
    assert verify.verify(profile, full=True)["models"]["base"]["changed"] == [name]


def test_lock_follows_a_linked_sub_folder_inside_the_model_folder(seat):
    profile, model = seat
    (model / "real").mkdir()
    (model / "real" / "extra.bin").write_bytes(b"12345")
    (model / "linked").symlink_to(model / "real")
    files = {f.path for f in locks.make(profile)["base"].files}
    assert {"real/extra.bin", "linked/extra.bin"} <= files
    locks.write(profile, locks.make(profile))
    (model / "real" / "extra.bin").write_bytes(b"54321")
    assert set(verify.verify(profile)["models"]["base"]["changed"]) == {"real/extra.bin", "linked/extra.bin"}


@pytest.mark.parametrize("kind", ["folder", "file"])
def test_lock_refuses_a_link_that_leaves_the_model_folder(seat, tmp_path, kind):
    profile, model = seat
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "w.bin").write_bytes(b"x")
    (model / "away").symlink_to(outside if kind == "folder" else outside / "w.bin")
    with pytest.raises(SeatError, match="away links outside the model folder") as caught:
        locks.make(profile)
    assert "container mounts the model folder alone" in caught.value.hint


def test_lock_never_skips_a_broken_link_or_a_loop(seat):
    profile, model = seat
    (model / "dangling").symlink_to(model / "nothing")
    with pytest.raises(SeatError, match="dangling cannot be read"):
        locks.make(profile)
    (model / "dangling").unlink()
    (model / "sub").mkdir()
    (model / "sub" / "up").symlink_to(model)
    with pytest.raises(SeatError, match="sub/up links back to a folder above it"):
        locks.make(profile)


def test_the_model_folder_itself_may_be_a_link(seat, tmp_path):
    profile, model = seat
    moved = tmp_path / "store" / "tiny-llama"
    moved.parent.mkdir()
    model.rename(moved)
    model.symlink_to(moved)
    assert {f.path for f in locks.make(profile)["base"].files} == set(profile.models["base"].files)


@pytest.mark.parametrize("chain", [["loop"], ["a", "b"]])
def test_lock_refuses_a_file_link_loop_without_a_traceback(seat, chain):
    profile, model = seat
    for name, to in zip(chain, chain[1:] + chain[:1], strict=True):
        (model / name).symlink_to(to)
    with pytest.raises(SeatError, match="is a link loop"):
        locks.make(profile)
