"""Launch spec, preflight and API-key handling, without services."""

import os
import socket
import stat
from dataclasses import replace

import pytest

from seatkit.errors import SeatError
from seatkit.seat import profiles, sections
from seatkit.serve import keys, preflight
from seatkit.serve import spec as specs


def model_dir(tmp_path, shards=("a.safetensors", "b.safetensors"), empty=()):
    folder = tmp_path / "model"
    folder.mkdir()
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        (folder / name).write_text("{}")
    weight_map = {f"layer.{i}": s for i, s in enumerate(shards * 2)}
    (folder / "model.safetensors.index.json").write_text(__import__("json").dumps({"weight_map": weight_map}))
    for shard in shards:
        (folder / shard).write_bytes(b"" if shard in empty else b"x")
    return folder


def model_checks(folder):
    seat = profiles.load(profiles.DEFAULT_PROFILE)
    spec = specs.build(seat)
    values = {**spec.values({}), "SEAT_MODEL_BASE_DIR": str(folder)}
    checks = [c for c in spec.checks if c.label.startswith("base model")]
    return spec, values, checks


def run_checks(folder):
    spec, values, checks = model_checks(folder)
    preflight.run(replace(spec, checks=checks), values)


def test_complete_model_passes(tmp_path):
    run_checks(model_dir(tmp_path))


def test_missing_metadata_file_is_named(tmp_path):
    folder = model_dir(tmp_path)
    (folder / "tokenizer.json").unlink()
    with pytest.raises(SeatError, match="base model tokenizer.json is missing or empty"):
        run_checks(folder)


def test_every_shard_of_the_index_is_checked(tmp_path):
    with pytest.raises(SeatError, match="shard missing or empty: b.safetensors"):
        run_checks(model_dir(tmp_path, empty=("b.safetensors",)))


def test_missing_directory_says_which_knob(tmp_path):
    with pytest.raises(SeatError, match="base model directory not found") as caught:
        run_checks(tmp_path / "nowhere")
    assert "set SEAT_MODEL_BASE_DIR to the folder that has it" in caught.value.hint


def test_busy_port_and_reserved_port_are_refused():
    spec = specs.build(profiles.load("cpu-smoke"))
    port_free = next(c for c in spec.checks if c.kind == "port-free")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        values = {**spec.values({}), "SEAT_PORT": str(busy.getsockname()[1])}
        with pytest.raises(SeatError, match="already listens"):
            preflight.run(replace(spec, checks=[port_free]), values)
    seat = specs.build(profiles.load(profiles.DEFAULT_PROFILE))
    reserved = next(c for c in seat.checks if c.kind == "reserved-port")
    with pytest.raises(SeatError, match="reserved"):
        preflight.run(replace(seat, checks=[reserved]), {**seat.values({}), "SEAT_PORT": "9200"})


def test_gpu_check_needs_tensor_parallel_many(monkeypatch, tmp_path):
    seat = specs.build(profiles.load(profiles.DEFAULT_PROFILE))
    gpus = next(c for c in seat.checks if c.kind == "gpus")
    (tmp_path / "nvidia-smi").write_text('#!/bin/bash\nprintf "GPU %s: x\\n" 0 1\n')
    (tmp_path / "nvidia-smi").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    with pytest.raises(SeatError, match="2 GPUs visible, tensor parallelism needs 4"):
        preflight.run(replace(seat, checks=[gpus]), seat.values({}))


def test_api_key_file_is_private_and_stable(tmp_path):
    path = keys.ensure(tmp_path / "keys" / "seat")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    key = path.read_text()
    assert len(key.strip()) >= 40 and keys.ensure(path).read_text() == key


def test_api_key_never_reaches_the_command_line(monkeypatch, tmp_path):
    monkeypatch.setenv("SEAT_HOME", str(tmp_path))
    seat = profiles.load("cpu-smoke").model_copy(
        update={"server": sections.Server(served_model_name="tiny", api_key=True)}
    )
    spec = specs.build(seat)
    assert spec.api_key_file and all("api-key" not in str(w) for w in spec.command)
    assert any(c.kind == "api-key" for c in spec.checks)


def test_speculative_config_splices_a_knob_into_the_draft_path():
    data = profiles._raw(profiles.profile_path("cpu-smoke"))[0]
    data["models"]["draft"] = {"build": "tiny-llama", "files": ["config.json"]}
    data["speculative"] = {"method": "draft_model", "num_speculative_tokens": 3, "draft_model": "draft"}
    seat = profiles.parse({**data, "name": "draft"})
    word = specs.speculative_config(seat, {"draft": (specs.Ref("SEAT_HOME"), '/m "x"')})
    resolved = specs.resolve(word, {"SEAT_HOME": "/home/u"})
    assert __import__("json").loads(resolved) == {
        "method": "draft_model",
        "num_speculative_tokens": 3,
        "model": '/home/u/m "x"',
    }


def test_boolean_args_are_bare_or_negated():
    seat = profiles.load("cpu-smoke").model_copy(
        update={"vllm_args": {"enforce-eager": True, "enable-prefix-caching": False, "seed": 7}}
    )
    assert specs.vllm_flags(seat) == ["--enforce-eager", "--no-enable-prefix-caching", "--seed", "7"]
