"""The docker runtime against a real engine (no GPU here, no registry)."""

import os
import subprocess

import pytest

from conftest import REPO, free_port
from seatkit.errors import SeatError
from seatkit.serve import launch, profile as profiles, spec as specs


def default_spec(image):
    spec = specs.build(profiles.load(profiles.DEFAULT_PROFILE))
    return spec, {**spec.values({}), "SEAT_IMAGE": image, "SEAT_CONTAINER": "seatkit-test-gpu",
                  "SEAT_PORT": str(free_port())}


def test_no_gpu_runtime_is_a_clear_error(busybox_image, tmp_path):
    spec, values = default_spec(busybox_image)
    for knob in ("SEAT_MODEL_BASE_DIR", "SEAT_MODEL_DRAFT_DIR", "SEAT_CACHE_DIR"):
        values[knob] = str(tmp_path)
    with pytest.raises(SeatError) as caught:
        launch._docker_start(spec, values, {})
    assert caught.value.message.startswith("no NVIDIA container runtime")
    leftover = subprocess.run(["docker", "ps", "-aq", "--filter", "name=seatkit-test-gpu"],
                              capture_output=True, text=True).stdout.split()
    for container in leftover:  # docker creates it before the device request fails
        subprocess.run(["docker", "rm", "-f", container], capture_output=True)


def test_rendered_script_reaches_docker_with_its_preflight(busybox_image, tmp_path):
    models = {}
    for key in ("BASE", "DRAFT"):
        folder = tmp_path / key.lower()
        folder.mkdir()
        for name in ("config.json", "tokenizer.json", "tokenizer_config.json"):
            (folder / name).write_text("{}")
        (folder / "model.safetensors.index.json").write_text(
            '{"weight_map": {"w": "model-00001-of-00001.safetensors"}}')
        (folder / "model-00001-of-00001.safetensors").write_bytes(b"x")
        models[f"SEAT_MODEL_{key}_DIR"] = str(folder)
    env = {**os.environ, **models, "SEAT_IMAGE": busybox_image, "SEAT_CACHE_DIR": str(tmp_path),
           "SEAT_PORT": str(free_port()), "SEAT_CONTAINER": "seatkit-test-script"}
    done = subprocess.run(["bash", str(REPO / "serve" / "dsv4-flash-dspark-tp4.sh")], env=env,
                          capture_output=True, text=True, timeout=120)
    # Every check before the GPU one passes against the real engine and files; no GPU here.
    assert done.returncode == 1
    assert "nvidia-smi not found" in done.stderr or "GPUs visible" in done.stderr
    assert "is not pinned by digest" in done.stderr
    (tmp_path / "draft" / "model-00001-of-00001.safetensors").write_bytes(b"")
    done = subprocess.run(["bash", str(REPO / "serve" / "dsv4-flash-dspark-tp4.sh")], env=env,
                          capture_output=True, text=True, timeout=120)
    assert "draft model shard missing or empty: model-00001-of-00001.safetensors" in done.stderr
