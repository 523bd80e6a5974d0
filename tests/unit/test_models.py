"""Model locks: lock, verify (sizes and hashes), fetch through `hf`, preflight sizes, bench compare."""

import hashlib
import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from conftest import free_port
from model_files import BASE, DRAFT, fill, write_profile

from seatkit.bench import compare
from seatkit.errors import SeatError
from seatkit.models import fetch, hashing, verify
from seatkit.models import lock as locks
from seatkit.seat import profiles
from seatkit.serve import preflight, render
from seatkit.serve import spec as specs

REV = "a" * 40


@pytest.fixture
def seat_home(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("SEAT_HOME", str(home))
    return home


@pytest.fixture
def locked(tmp_path, seat_home):
    fill(tmp_path / "base", BASE)
    fill(tmp_path / "draft", DRAFT)
    path = write_profile(tmp_path)
    profile = profiles.load(path)
    locks.write(profile, locks.make(profile, workers=2))
    return profile


def test_hash_files_match_sha256sum_in_parallel(tmp_path):
    fill(tmp_path, {"a": os.urandom(hashing.CHUNK * 2 + 7), "b": b"", "c": b"x"})
    files = sorted(tmp_path.iterdir())
    want = {
        Path(line.split()[1]): line.split()[0]
        for line in subprocess.run(
            ["sha256sum", *map(str, files)], capture_output=True, text=True
        ).stdout.splitlines()
    }
    seen = []
    assert hashing.hash_files(files, workers=3, on_bytes=seen.append) == want
    assert sum(seen) == sum(f.stat().st_size for f in files)


def test_lock_records_every_file_with_repository_revision_and_aggregate(locked, tmp_path):
    read = locks.read(locked)
    assert locks.lock_path(locked) == tmp_path / "seat.models.lock"
    base = read["base"]
    assert base.repository == "deepseek-ai/DeepSeek-V4-Flash" and base.revision is None
    assert {f.path: f.size for f in base.files} == {k: len(v) for k, v in BASE.items()}
    assert {f.path: f.sha256 for f in base.files} == {
        k: hashlib.sha256(v).hexdigest() for k, v in BASE.items()
    }
    lines = "".join(f"{hashlib.sha256(BASE[p]).hexdigest()}  {len(BASE[p])}  {p}\n" for p in sorted(BASE))
    assert base.sha256 == hashlib.sha256(lines.encode()).hexdigest()
    assert read["draft"].repository == "deepseek-ai/DeepSeek-V4-Flash-DSpark"
    assert locks.hashes(locked) == {"base": base.sha256, "draft": read["draft"].sha256}


def test_lock_takes_the_revision_hf_download_noted_and_skips_its_metadata(tmp_path, seat_home):
    fill(tmp_path / "base", BASE)
    fill(tmp_path / "draft", DRAFT)
    meta = tmp_path / "base" / ".cache" / "huggingface" / "download"
    fill(meta, {"config.json.metadata": f"{REV}\netag\n1700000000\n".encode()})
    profile = profiles.load(write_profile(tmp_path))
    made = locks.make(profile)
    assert made["base"].revision == REV and made["draft"].revision is None
    assert not any(".cache" in f.path for f in made["base"].files)


def test_verify_reports_missing_changed_and_extra_and_records_full_runs(locked, tmp_path):
    assert verify.verify(locked)["ok"]
    record = verify.last_full(locked.name)
    assert record["ok"] and record["models"]["base"]["sha256"] == locks.read(locked)["base"].sha256
    (tmp_path / "draft" / "config.json").unlink()
    same_size = bytearray(BASE["model-00001.safetensors"])
    same_size[-1] ^= 1
    (tmp_path / "base" / "model-00001.safetensors").write_bytes(bytes(same_size))
    (tmp_path / "base" / "stray.bin").write_bytes(b"?")
    sizes = verify.verify(locked, full=False)
    assert sizes["models"]["draft"]["missing"] == ["config.json"]
    assert sizes["models"]["base"]["changed"] == [] and sizes["models"]["base"]["extra"] == ["stray.bin"]
    assert verify.last_full(locked.name)["ok"]  # a sizes-only run is not recorded
    full = verify.verify(locked, full=True, workers=2)
    assert not full["ok"] and full["models"]["base"]["changed"] == ["model-00001.safetensors"]
    assert not verify.last_full(locked.name)["ok"]


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda d: d["models"]["base"]["files"][0].update(size=1), "aggregate hash does not match"),
        (lambda d: d["models"].pop("draft"), "the profile has"),
        (lambda d: d.update(models=[]), "not a models lock"),
    ],
)
def test_a_bad_lock_is_refused(locked, edit, message):
    path = locks.lock_path(locked)
    data = yaml.safe_load(path.read_text())
    edit(data)
    for model in data["models"].values() if isinstance(data["models"], dict) else ():
        model["sha256"] = locks.ModelLock(None, None, [locks.File(**f) for f in model["files"]]).sha256
    if message == "aggregate hash does not match":
        data["models"]["base"]["sha256"] = "0" * 64
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(SeatError, match=message):
        locks.read(locked)


def test_a_lock_of_another_revision_than_the_profile_is_refused(locked, tmp_path):
    pinned = profiles.load(write_profile(tmp_path, revision=REV, name="seat"))
    with pytest.raises(SeatError, match="was locked with no revision"):
        locks.read(pinned)


def test_a_variant_keeps_the_lock_of_the_profile_it_extends_while_its_models_are_the_same(locked, tmp_path):
    """A variant that changes a flag is held to its base's pins (preflight, verify); one that
    changes a model's folder is held to none of them, and its own lock, once made, wins."""
    (tmp_path / "flag.yaml").write_text("extends: seat\nvllm_args: {max-num-seqs: 2}\n")
    flag = profiles.load(str(tmp_path / "flag.yaml"))
    assert locks.pinning(flag) == locks.lock_path(locked)
    assert locks.read(flag)["base"].sha256 == locks.read(locked)["base"].sha256
    spec = specs.build(flag)
    (base,) = [c for c in spec.checks if c.kind == "sizes" and c.label == "base model"]
    (tmp_path / "base" / "config.json").write_bytes(b"{ }")
    with pytest.raises(SeatError, match="base model: config.json is missing or not the locked size"):
        preflight.run(replace(spec, checks=[base]), spec.values({}))
    assert verify.verify(flag, full=False)["models"]["base"]["changed"] == ["config.json"]

    fill(tmp_path / "other", DRAFT)
    moved = f"extends: flag\nmodels: {{draft: {{host_dir: {tmp_path / 'other'}}}}}\n"
    (tmp_path / "moved.yaml").write_text(moved)
    other = profiles.load(str(tmp_path / "moved.yaml"))
    assert locks.read(other) is None
    with pytest.raises(SeatError, match="has no models lock"):
        verify.require_lock(other)
    locks.write(other, locks.make(other, workers=2))
    assert locks.pinning(other) == tmp_path / "moved.models.lock"


def test_fetch_forms_hf_download_per_model(locked, tmp_path):
    with pytest.raises(SeatError, match="no hub revision"):
        fetch.plan(locked, locks.read(locked))
    pinned = profiles.load(write_profile(tmp_path, revision=REV, name="pinned"))
    lock = {k: locks.ModelLock(v.repository, REV, v.files) for k, v in locks.read(locked).items()}
    assert fetch.plan(pinned, lock) == [
        (
            "base",
            [
                "hf",
                "download",
                "deepseek-ai/DeepSeek-V4-Flash",
                "--revision",
                REV,
                "--local-dir",
                str(tmp_path / "base"),
            ],
        ),
        (
            "draft",
            [
                "hf",
                "download",
                "deepseek-ai/DeepSeek-V4-Flash-DSpark",
                "--revision",
                REV,
                "--local-dir",
                str(tmp_path / "draft"),
            ],
        ),
    ]


def pinned_lock(tmp_path):
    """A profile pinned at REV whose folders are empty, and a lock of what the hub would give."""
    source = tmp_path / "hub"
    fill(source / "base", BASE)
    fill(source / "draft", DRAFT)
    path = write_profile(tmp_path, revision=REV, name="pinned")
    for key in ("base", "draft"):
        (tmp_path / key).symlink_to(source / key)
    profile = profiles.load(path)
    made = {k: locks.ModelLock(v.repository, REV, v.files) for k, v in locks.make(profile).items()}
    locks.write(profile, made)
    for key in ("base", "draft"):
        (tmp_path / key).unlink()
    return profile, source


def stub_hf(tmp_path, source: Path, corrupt: bool = False) -> Path:
    """An `hf` that records its argv and copies the repository's files into --local-dir."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "hf").write_text(f"""#!/bin/bash
printf '%s\\n' "$*" >> {tmp_path}/hf-argv
repo=${{2##*-}}; [ "$repo" = Flash ] && src={source}/base || src={source}/draft
mkdir -p "$6" && cp -r "$src"/. "$6"/
{'echo tampered > "$6"/config.json' if corrupt else ""}
""")
    (bin_dir / "hf").chmod(0o755)
    return bin_dir


@pytest.mark.parametrize("corrupt", [False, True])
def test_fetch_runs_hf_then_verifies_against_the_lock(tmp_path, seat_home, monkeypatch, corrupt):
    profile, source = pinned_lock(tmp_path)
    monkeypatch.setenv("PATH", f"{stub_hf(tmp_path, source, corrupt)}:{os.environ['PATH']}")
    result = fetch.fetch(profile, say=lambda m: None)
    argv = (tmp_path / "hf-argv").read_text().splitlines()
    assert argv == [
        f"download deepseek-ai/DeepSeek-V4-Flash --revision {REV} --local-dir {tmp_path / 'base'}",
        f"download deepseek-ai/DeepSeek-V4-Flash-DSpark --revision {REV} --local-dir {tmp_path / 'draft'}",
    ]
    assert result["ok"] is not corrupt
    assert result["models"]["base"]["changed"] == (["config.json"] if corrupt else [])
    assert verify.last_full(profile.name)["ok"] is not corrupt


def test_fetch_without_hf_says_how_to_get_it(tmp_path, seat_home, monkeypatch):
    profile, _ = pinned_lock(tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path / "nothing-here"))
    with pytest.raises(SeatError) as caught:
        fetch.fetch(profile, say=lambda m: None)
    assert "`hf`" in caught.value.message and "pip install -U huggingface_hub" in caught.value.hint


def test_preflight_checks_every_size_against_the_lock(locked, tmp_path):
    spec = specs.build(locked)
    sizes = [c for c in spec.checks if c.kind == "sizes"]
    assert [c.label for c in sizes] == ["base model", "draft model"]
    assert dict(sizes[0].values) == {k: len(v) for k, v in BASE.items()}
    values = spec.values({})
    preflight.run(replace(spec, checks=sizes), values)
    (tmp_path / "base" / "config.json").write_bytes(b"{ }")
    with pytest.raises(SeatError, match="base model: config.json is missing or not the locked size"):
        preflight.run(replace(spec, checks=sizes), values)


def test_the_script_checks_sizes_too(tmp_path, seat_home):
    """cpu-smoke's rendered script, with a stand-in venv, against its committed lock."""
    profile = profiles.load("cpu-smoke")
    model = seat_home / "models" / "tiny-llama"
    for f in locks.read(profile)["base"].files:
        fill(model, {f.path: b"x" * f.size})
    vllm = seat_home / "venvs" / profile.native.venv / "bin" / "vllm"
    fill(vllm.parent, {"vllm": b"#!/bin/sh\n"})
    vllm.chmod(0o755)
    script = tmp_path / "serve.sh"
    script.write_text(render.render_script(specs.build(profile)))
    env = {**os.environ, "SEAT_DRY_RUN": "1", "SEAT_PORT": str(free_port())}
    done = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    (model / "tokenizer.json").write_bytes(b"short")
    message = "base model: tokenizer.json is missing or not the locked size"
    done = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True)
    assert done.returncode == 0 and f"warning: {message}" in done.stderr  # a dry run warns
    done = subprocess.run(
        ["bash", str(script)], env={**env, "SEAT_DRY_RUN": "0"}, capture_output=True, text=True
    )
    assert done.returncode == 1 and message in done.stderr


def run_with_lock(tmp_path, name, locks_):
    folder = tmp_path / name
    folder.mkdir()
    stats = {"median": 1.0, "min": 1.0, "max": 1.0, "cv": 0.01, "n": 5}
    (folder / "summary.json").write_text(
        json.dumps(
            {
                "conditions": {"model": "m", "k": 5, "sampling": {"temperature": 0.0}, "model_locks": locks_},
                "suites": {
                    "code": {
                        "content": "code",
                        "decode_tok_s": stats,
                        "tokens_per_step": stats,
                        "ms_per_step": stats,
                    }
                },
            }
        )
    )
    return str(folder)


def test_compare_lists_a_differing_model_lock(tmp_path):
    a = run_with_lock(tmp_path, "a", {"base": "1" * 64})
    b = run_with_lock(tmp_path, "b", {"base": "2" * 64})
    c = run_with_lock(tmp_path, "c", None)
    assert compare.compare(a, b).differing["model_lock"] == [
        f"base={'1' * 12} vs base={'2' * 12} (can move either factor)"
    ]
    assert "model_lock" not in compare.compare(a, a).differing
    assert "model_lock" not in compare.compare(a, c).differing  # unrecorded on one side: not a difference


def test_cli_lock_and_verify_print_plain_progress_and_exit_1_on_a_difference(locked, tmp_path):
    from click.testing import CliRunner

    from seatkit.cli.app import seat

    runner = CliRunner()
    done = runner.invoke(seat, ["model", "lock", locked.source])
    assert done.exit_code == 0 and "wrote" in done.output
    assert "to hash" in done.output and "100 % of" in done.output  # no terminal: plain lines
    assert runner.invoke(seat, ["model", "verify", locked.source]).exit_code == 0
    (tmp_path / "draft" / "model.safetensors").write_bytes(os.urandom(1 << 20))
    assert runner.invoke(seat, ["model", "verify", locked.source, "--sizes-only"]).exit_code == 0
    failed = runner.invoke(seat, ["model", "verify", locked.source, "--json"])
    assert failed.exit_code == 1
    assert '"changed": [\n        "model.safetensors"' in failed.output


def test_seat_up_verify_models_stops_before_launching(locked, tmp_path):
    from click.testing import CliRunner

    from seatkit.cli.app import seat

    (tmp_path / "base" / "config.json").write_bytes(b"[]")  # same size, other bytes
    done = CliRunner().invoke(seat, ["up", locked.source, "--verify-models"])
    assert isinstance(done.exception, SeatError)
    assert "differ from the models lock" in done.exception.message and "config.json" in done.exception.message


# cpu-smoke's tiny Llama as a stand-in builder writes it (the real one is an integration test).
TINY = {
    "config.json": b"{}",
    "tokenizer.json": b"[1]",
    "tokenizer_config.json": b"{ }",
    "generation_config.json": b"{}\n",
}


@pytest.fixture
def built(tmp_path, seat_home):
    """A profile extending cpu-smoke, its tiny-llama folder in SEAT_HOME built and locked as it is."""
    path = tmp_path / "built.yaml"
    path.write_text(yaml.safe_dump({"extends": "cpu-smoke"}))
    fill(seat_home / "models" / "tiny-llama", TINY)
    profile = profiles.load(str(path))
    locks.write(profile, locks.make(profile))
    return profile


def ensure(profile, said, runs, monkeypatch, writes=TINY):
    """ensure_model as `seat setup` calls it, with a stand-in builder that writes `writes`."""
    from seatkit.serve import runtime

    def run(argv, log, what, say):
        runs.append(what)
        if what.startswith("building"):
            fill(Path(argv[-1]), writes)

    monkeypatch.setattr(runtime, "_run", run)
    pinned = runtime.Pinned(profile, "base", locks.read(profile)["base"])
    return runtime.ensure_model("tiny-llama", profile.models["base"].files, Path("/v"), said.append, pinned)


def test_setup_rebuilds_a_built_model_whose_sizes_differ_from_the_lock(built, seat_home, monkeypatch):
    model = seat_home / "models" / "tiny-llama"
    (model / "tokenizer.json").write_bytes(b"stale")
    said, runs = [], []
    assert ensure(built, said, runs, monkeypatch) == model
    assert runs == ["building the tiny-llama model"] and (model / "tokenizer.json").read_bytes() == b"[1]"
    assert any(
        "lacks a file the profile names, or one at the size its lock records: building it again" in line
        for line in said
    )


def test_setup_hashes_a_built_model_no_verify_vouches_for_and_rebuilds_it_when_its_bytes_differ(
    built, seat_home, monkeypatch
):
    model = seat_home / "models" / "tiny-llama"
    said, runs = [], []
    assert ensure(built, said, runs, monkeypatch) == model
    assert runs == [] and any(line.startswith(f"hashing {model}") for line in said)  # as locked: kept
    (model / "config.json").write_bytes(b"[]")  # same size, other bytes: only a hash tells
    said.clear()
    assert ensure(built, said, runs, monkeypatch) == model
    assert runs == ["building the tiny-llama model"] and (model / "config.json").read_bytes() == b"{}"
    assert any(
        "differs from built's models lock (1 changed (e.g. config.json)): building it again" in line
        for line in said
    )


def test_setup_keeps_a_model_its_last_full_verify_vouches_for_without_hashing_it(
    built, seat_home, monkeypatch
):
    model = seat_home / "models" / "tiny-llama"
    assert verify.verify(built)["ok"]
    said, runs = [], []
    assert ensure(built, said, runs, monkeypatch) == model
    assert runs == [] and said == []
    (model / "tokenizer.json").write_bytes(TINY["tokenizer.json"])  # the same bytes, written since
    assert verify.changed_since(built, "base", verify.last_full(built.name)) == ["base/tokenizer.json"]
    assert ensure(built, said, runs, monkeypatch) == model
    assert runs == [] and any(line.startswith(f"hashing {model}") for line in said)  # hashed, as locked


@pytest.mark.parametrize("record", ["torn", "failed", "other lock", "other folder"])
def test_a_verify_record_that_is_torn_failed_or_of_another_lock_or_folder_vouches_for_nothing(
    built, seat_home, record
):
    verify.verify(built)
    path = verify._record_path(built.name)
    data = json.loads(path.read_text())
    if record == "torn":
        path.write_text(path.read_text()[:40])
    else:
        field, value = {
            "failed": ("changed", ["config.json"]),
            "other lock": ("sha256", "0" * 64),
            "other folder": ("dir", "/elsewhere"),
        }[record]
        data["models"]["base"][field] = value
        path.write_text(json.dumps(data))
    assert verify.unvouched(built, "base")


def test_a_verify_record_stays_in_its_own_seat_home_not_in_a_cache_the_tests_share(seat_home):
    """Every test's SEAT_HOME links these folders to the user's: a record there would be a trace."""
    from conftest import SHARED_CACHES

    record = verify._record_path("p")
    assert record.is_relative_to(seat_home)
    assert record.relative_to(seat_home).parts[0] not in SHARED_CACHES


def test_a_verified_file_gone_since_counts_as_changed(built, seat_home):
    verify.verify(built)
    (seat_home / "models" / "tiny-llama" / "config.json").unlink()
    record = verify.last_full(built.name)
    assert verify.changed_since(built, "base", record) == ["base/config.json"]
    assert verify.unvouched(built, "base")


def test_a_fresh_build_unlike_the_lock_is_refused_naming_the_file_and_never_left_in_place(
    built, seat_home, monkeypatch
):
    model = seat_home / "models" / "tiny-llama"
    (model / "config.json").write_bytes(b"[]")
    said, runs = [], []
    with pytest.raises(SeatError) as err:
        ensure(built, said, runs, monkeypatch, writes={**TINY, "config.json": b"[]"})
    assert "just built differs from built's models lock: 1 changed (e.g. config.json)" in err.value.message
    assert "seat model lock built" in err.value.hint and "CAVEATS.md" in err.value.hint
    assert not model.exists()  # neither the stale folder nor the new build looks complete
    assert (model.with_name("tiny-llama.differs") / "config.json").read_bytes() == b"[]"
    with pytest.raises(
        SeatError, match="differs from built's models lock"
    ):  # and the next setup says so again
        ensure(built, said, runs, monkeypatch, writes={**TINY, "config.json": b"[]"})
    assert runs == ["building the tiny-llama model"] * 2


def test_the_preflight_follows_symlinked_files(tmp_path, seat_home):
    """A hub cache snapshot holds symlinks to blobs: its sizes are the blobs'."""
    profile = profiles.load("cpu-smoke")
    model, blobs = seat_home / "models" / "tiny-llama", tmp_path / "blobs"
    for f in locks.read(profile)["base"].files:
        fill(blobs, {f.path: b"x" * f.size})
        (model / f.path).parent.mkdir(parents=True, exist_ok=True)
        (model / f.path).symlink_to(blobs / f.path)
    vllm = seat_home / "venvs" / profile.native.venv / "bin" / "vllm"
    fill(vllm.parent, {"vllm": b"#!/bin/sh\n"})
    vllm.chmod(0o755)
    spec = specs.build(profile)
    script = tmp_path / "serve.sh"
    script.write_text(render.render_script(spec))
    env = {**os.environ, "SEAT_DRY_RUN": "1", "SEAT_PORT": str(free_port())}
    done = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_ctrl_c_stops_hashing_at_the_next_chunk(tmp_path):
    """Ctrl-C during a verify must not go on hashing the multi-GB shards already started."""
    import signal

    files = [tmp_path / f"shard-{i}" for i in range(2)]
    for path in files:
        path.write_bytes(b"x" * (hashing.CHUNK * 16))
    chunks = []

    def interrupt_once(n: int) -> None:
        chunks.append(n)
        if len(chunks) == 1:
            os.kill(os.getpid(), signal.SIGINT)

    with pytest.raises(KeyboardInterrupt):
        hashing.hash_files(files, workers=2, on_bytes=interrupt_once)
    assert len(chunks) < 32  # both shards to the end: every one of their 32 chunks


def test_a_file_vanishing_mid_verify_is_a_clear_error(locked, tmp_path):
    """Another process deletes a shard while the others hash: a SeatError, not a traceback."""
    doomed = tmp_path / "base" / "config.json"

    def delete(n: int) -> None:
        doomed.unlink(missing_ok=True)

    with pytest.raises(SeatError) as caught:
        verify.verify(locked, full=True, workers=1, on_bytes=delete)
    assert "config.json" in caught.value.message


@pytest.mark.parametrize("repository", ["--help/x", "../..", "-o/x", ".x/y"])
def test_a_repository_that_reads_as_an_option_or_a_path_is_refused(tmp_path, repository):
    data = yaml.safe_load(Path(write_profile(tmp_path)).read_text())
    data["models"]["base"]["repository"] = repository
    path = tmp_path / "hostile.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(SeatError):
        profiles.load(str(path))


def test_full_verifies_at_the_same_time_each_record_whole(seat_home):
    """Two verifies at once (a cron job and an operator): no crash on the other's temporary file."""
    code = (
        "from seatkit.models import verify\n"
        "r = {'profile': 'p', 'full': True, 'time': 0, 'models': {}, 'ok': True, 'pad': 'x' * 100000}\n"
        "for _ in range(200):\n    verify._record(r)\n"
    )
    writers = [
        subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE, text=True) for _ in range(3)
    ]
    errors = [w.communicate(timeout=600)[1] for w in writers]
    assert [w.returncode for w in writers] == [0, 0, 0], errors
    assert verify.last_full("p")["ok"] is True
    assert sorted(p.name for p in (seat_home / "verified").iterdir()) == ["p.json"]


def test_a_torn_hub_metadata_file_names_no_revision_rather_than_crashing(tmp_path, seat_home):
    """hf killed mid-write leaves bytes that are not text: the lock knows no revision, and says so."""
    fill(tmp_path / "base", BASE)
    fill(tmp_path / "draft", DRAFT)
    meta = tmp_path / "base" / ".cache" / "huggingface" / "download"
    fill(
        meta,
        {
            "config.json.metadata": b"\xff\xfe\x00torn",
            "model-00001.safetensors.metadata": f"{REV}\n".encode(),
        },
    )
    profile = profiles.load(write_profile(tmp_path))
    assert locks.make(profile)["base"].revision == REV


def test_a_docker_seat_s_built_model_is_verified_where_its_knob_mounts_it(tmp_path, seat_home):
    """cpu-smollm2-docker mounts SEAT_MODEL_BASE_DIR when set: `seat model verify` must hash that
    folder, not SEAT_HOME's, or it passes a model the seat does not serve. A native seat's built
    model has no such knob and stays SEAT_HOME's."""
    docker, native = profiles.load("cpu-smollm2-docker"), profiles.load("cpu-smollm2")
    elsewhere = {"SEAT_MODEL_BASE_DIR": str(tmp_path / "mounted")}
    assert locks.model_dir(docker, "base", elsewhere) == tmp_path / "mounted"
    assert locks.model_dir(docker, "base", {}) == seat_home / "models" / "smollm2-135m"
    assert locks.model_dir(native, "base", elsewhere) == seat_home / "models" / "smollm2-135m"


def test_a_native_seat_s_host_folder_is_verified_where_it_serves_it(tmp_path):
    """A native seat serves host_dir itself (no knob reaches its argv): SEAT_MODEL_<KEY>_DIR set in
    the shell must not send `seat model verify` to another folder, or it vouches for files the seat
    does not serve."""
    served = tmp_path / "served"
    path = tmp_path / "native.yaml"
    path.write_text(
        f"extends: cpu-smoke\nmodels:\n  base: {{host_dir: {served}, build: null, repository: null}}\n"
    )
    native = profiles.load(str(path))
    assert native.models["base"].host_dir == str(served)
    elsewhere = {"SEAT_MODEL_BASE_DIR": str(tmp_path / "decoy")}
    assert locks.model_dir(native, "base", elsewhere) == served
