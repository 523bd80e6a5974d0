"""The default seat's two model folders as files under a test's tmp_path, and its profile pointing at them."""

import os
from pathlib import Path

import yaml

from seatkit.seat import profiles


def write_profile(tmp_path, revision=None, name="seat"):
    """The default seat with both model folders under tmp_path, written as a profile file."""
    data = profiles._raw(profiles.profile_path(profiles.DEFAULT_PROFILE))[0]
    for key in ("base", "draft"):
        data["models"][key].update(host_dir=str(tmp_path / key), revision=revision)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def fill(folder: Path, files: dict[str, bytes]) -> None:
    for name, body in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(body)


BASE = {"config.json": b"{}", "model-00001.safetensors": os.urandom(5 << 20), "sub/empty.bin": b""}
DRAFT = {"config.json": b'{"draft": 1}', "model.safetensors": os.urandom(1 << 20)}
