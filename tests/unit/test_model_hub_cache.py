"""A model folder laid out as the hub cache lays it out (models--ORG--NAME/snapshots/REV/FILE ->
../../blobs/BLOB) locks and verifies by content, under the names of its snapshot; a link that
leaves the cache repository is refused, and so is the whole layout for a seat whose container
mounts the snapshot alone."""

import hashlib
import json
import os
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from model_files import write_profile

from seatkit.cli.app import seat as seat_cli
from seatkit.errors import SeatError
from seatkit.models import lock as locks
from seatkit.models import verify
from seatkit.seat import profiles
from seatkit.serve import preflight, render
from seatkit.serve import spec as specs
from seatkit.serve.checks import Kind

REVISION = "0123456789abcdef0123456789abcdef01234567"
FILES = {
    "config.json": b'{"architectures": ["LlamaForCausalLM"]}',
    "tokenizer.json": b'{"model": {}}',
    "tokenizer_config.json": b"{}",
    "generation_config.json": b"{}",
    "model.safetensors": os.urandom(1 << 20),
    "sub/extra.json": b'{"nested": true}',
}


def hub_snapshot(cache: Path, repo: str = "models--Org--Tiny", files=FILES) -> Path:
    """The hub cache's layout: content-named blobs, refs/main, and a snapshot of relative links."""
    folder = cache / repo
    (folder / "blobs").mkdir(parents=True)
    (folder / "refs").mkdir()
    (folder / "refs" / "main").write_text(REVISION)
    snapshot = folder / "snapshots" / REVISION
    for name, body in files.items():
        blob = folder / "blobs" / hashlib.sha256(body).hexdigest()
        blob.write_bytes(body)
        link = snapshot / name
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    return snapshot


@pytest.fixture
def seat(tmp_path, monkeypatch):
    """cpu-smoke (a native seat) serving real weights from a hub cache snapshot under tmp_path."""
    monkeypatch.setenv("SEAT_HOME", str(tmp_path / "home"))
    snapshot = hub_snapshot(tmp_path / "hub")
    data = profiles._raw(profiles.profile_path("cpu-smoke"))[0]
    data["models"]["base"] = {"host_dir": str(snapshot), "files": list(FILES)[:4]}
    data["vllm_args"]["load-format"] = "safetensors"
    path = tmp_path / "hub-seat.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path), snapshot


def blob_of(snapshot: Path, name: str) -> Path:
    return (snapshot / name).resolve()


def test_seat_model_lock_and_verify_read_a_hub_snapshot_by_content(seat):
    path, snapshot = seat
    locked = CliRunner().invoke(seat_cli, ["model", "lock", path])
    assert locked.exit_code == 0, locked.output
    pinned = locks.read(profiles.load(path))["base"]
    assert pinned.revision == REVISION  # the snapshot's name is its commit
    assert {f.path: (f.size, f.sha256) for f in pinned.files} == {
        name: (len(body), hashlib.sha256(body).hexdigest()) for name, body in FILES.items()
    }
    checked = CliRunner().invoke(seat_cli, ["model", "verify", path, "--json"])
    assert checked.exit_code == 0, checked.output
    model = json.loads(checked.stdout)["models"]["base"]
    assert model["dir"] == str(snapshot) and model["files"] == len(FILES)
    assert set(model["identities"]) == set(FILES)  # each file by its name, its blob's identity


def test_a_rewritten_blob_is_named_by_its_snapshot_file_and_unverifies_the_launch(seat, tmp_path):
    path, snapshot = seat
    profile = profiles.load(path)
    locks.write(profile, locks.make(profile))
    assert verify.verify(profile)["ok"]
    assert verify.unvouched_models(profile) is None  # what `seat up` records: weights verified
    spec = specs.build(profile)
    sizes = next(c for c in spec.checks if c.kind is Kind.SIZES)

    def run_sizes() -> None:  # `seat up`'s preflight of the locked sizes, at every launch
        preflight.run(replace(spec, checks=[sizes]), spec.values({}))

    run_sizes()
    script = tmp_path / "serve.sh"
    script.write_text(render.render_script(spec))
    env = {"PATH": os.environ["PATH"], "SEAT_HOME": os.environ["SEAT_HOME"], "SEAT_DRY_RUN": "1"}
    before = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=60)
    assert before.returncode == 0 and "model.safetensors is missing" not in before.stderr, before.stderr
    blob = blob_of(snapshot, "model.safetensors")
    blob.write_bytes(os.urandom(blob.stat().st_size))  # same size, other bytes, no link touched
    assert "base/model.safetensors" in verify.unvouched_models(profile)
    checked = CliRunner().invoke(seat_cli, ["model", "verify", path])
    assert checked.exit_code == 1 and "changed: model.safetensors" in checked.output
    blob.write_bytes(b"short")
    after = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=60)
    assert "model.safetensors is missing or not the locked size" in after.stderr
    with pytest.raises(SeatError, match="model.safetensors is missing or not the locked size"):
        run_sizes()


@pytest.mark.parametrize("where", ["outside", "other-repository"])
def test_a_snapshot_link_that_leaves_its_cache_repository_is_refused(seat, tmp_path, where):
    path, snapshot = seat
    if where == "outside":
        target = tmp_path / "elsewhere.bin"
        target.write_bytes(b"x")
    else:
        target = blob_of(hub_snapshot(tmp_path / "hub", "models--Org--Other"), "config.json")
    (snapshot / "stray.bin").symlink_to(target)
    with pytest.raises(SeatError, match="stray.bin links outside its hub cache repository") as caught:
        locks.make(profiles.load(path))
    assert str(target) in caught.value.message and "fetch the model again" in caught.value.hint


def test_a_docker_seat_refuses_a_hub_snapshot_its_container_would_see_without_blobs(tmp_path):
    """A container mounts the snapshot folder alone: the links into blobs/ would dangle in it."""
    for key in ("base", "draft"):
        snapshot = hub_snapshot(tmp_path / "hub", f"models--Org--{key}")
        (tmp_path / key).symlink_to(snapshot)
    profile = profiles.load(write_profile(tmp_path))
    with pytest.raises(SeatError, match="links outside the model folder") as caught:
        locks.make(profile)
    assert "hub cache's blobs/" in caught.value.hint
