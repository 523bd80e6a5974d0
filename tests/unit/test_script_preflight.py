"""The rendered script's preflight in bash, which `seat up` runs too: dry run on a machine that is
not the rig, docker diagnostics, and shard names read line by line."""

import json
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import free_port

from seatkit import paths
from seatkit.errors import SeatError
from seatkit.seat import profiles
from seatkit.serve import preflight
from seatkit.serve import spec as specs

DEFAULT = profiles.DEFAULT_PROFILE


def up_preflight(spec, check, values: dict) -> None:
    """One check as `seat up` runs it: the script's own, in bash."""
    preflight.run(replace(spec, checks=[check]), values)


def stub(bin_dir: Path, name: str, body: str) -> None:
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / name).write_text("#!/bin/bash\n" + body + "\n")
    (bin_dir / name).chmod(0o755)


def run(tmp_path, profile=DEFAULT, stubs=None, **env):
    """The committed script, with only core tools and the given stubs on PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for tool in ("grep", "tr", "sort", "cat"):
        target = bin_dir / tool
        if not target.exists():
            target.symlink_to(
                subprocess.run(
                    ["bash", "-c", f"command -v {tool}"], capture_output=True, text=True, check=True
                ).stdout.strip()
            )
    for name, body in (stubs or {}).items():
        stub(bin_dir, name, body)
    bash = subprocess.run(["bash", "-c", "command -v bash"], capture_output=True, text=True).stdout.strip()
    return subprocess.run(
        [bash, str(paths.REPO / "serve" / f"{profile}.sh")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env={
            "PATH": str(bin_dir),
            "HOME": str(tmp_path),
            "SEAT_HOME": str(tmp_path / "home"),
            "SEAT_PORT": str(free_port()),
            **env,
        },
    )


@pytest.mark.parametrize("profile", profiles.profile_names())
def test_dry_run_prints_the_command_on_a_machine_that_is_not_the_rig(tmp_path, profile):
    done = run(tmp_path, profile, SEAT_DRY_RUN="1")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()  # one argument a line, each but the last continued
    assert "  serve \\" in lines and all(line.endswith(" \\") for line in lines[:-1]) and len(lines) > 10
    config = f"seat {profile}: "  # the launch's one line of effective configuration
    said = done.stderr.splitlines()
    assert said[-1] == "seat: a dry run: nothing was started (without SEAT_DRY_RUN=1 this command runs)"
    findings = [line for line in said[:-1] if not line.startswith(("  hint:", config))]
    assert findings and all(line.startswith("seat preflight: warning: ") for line in findings)
    assert not run(tmp_path, profile).returncode == 0  # without the dry run the same findings stop it


def test_no_docker_command_and_no_daemon_are_said_as_such(tmp_path):
    done = run(tmp_path, SEAT_DRY_RUN="1")
    assert "no docker command on this machine" in done.stderr
    done = run(tmp_path, stubs={"docker": 'echo "Cannot connect to the Docker daemon" >&2; exit 1'})
    assert done.returncode == 1
    assert "seat preflight: no docker engine answers" in done.stderr and "docker pull" not in done.stderr


DOCKER_WITHOUT_IMAGE = 'case "$1 $2" in "image inspect") exit 1 ;; "container inspect") exit 1 ;; esac'


def test_a_local_tag_is_never_to_be_pulled(tmp_path):
    done = run(tmp_path, stubs={"docker": DOCKER_WITHOUT_IMAGE})
    assert "is not on this machine" in done.stderr
    assert "nothing to pull: seat build dsv4-flash-dspark-tp4 makes it" in done.stderr
    assert "docker pull" not in done.stderr
    done = run(tmp_path, stubs={"docker": DOCKER_WITHOUT_IMAGE}, SEAT_IMAGE="vendor/vllm:1")
    assert "hint: docker pull it" in done.stderr


def test_shard_names_are_read_line_by_line_never_split_or_globbed(tmp_path):
    dirs = {}
    for key in ("base", "draft"):
        folder = tmp_path / key
        folder.mkdir()
        for name in ("config.json", "tokenizer.json", "tokenizer_config.json"):
            (folder / name).write_text("{}")
        shards = ["shard one.safetensors", "*.safetensors"] if key == "base" else ["d.safetensors"]
        (folder / "model.safetensors.index.json").write_text(
            json.dumps({"weight_map": {f"w{i}": s for i, s in enumerate(shards)}})
        )
        (folder / shards[0]).write_text("x")  # '*.safetensors' would glob to this one
        dirs[f"SEAT_MODEL_{key.upper()}_DIR"] = str(folder)
    done = run(
        tmp_path,
        stubs={
            "docker": 'case "$1" in container) exit 1 ;; esac',
            "nvidia-smi": 'printf "GPU %s: x\\n" 0 1 2 3',
        },
        SEAT_CACHE_DIR=str(tmp_path),
        **dirs,
    )
    assert done.returncode == 1
    failures = [
        line
        for line in done.stderr.splitlines()
        if line.startswith("seat preflight:") and "warning" not in line
    ]
    assert failures == ["seat preflight: base model shard missing or empty: *.safetensors"]
    (tmp_path / "base" / "*.safetensors").write_text("x")
    done = run(
        tmp_path,
        stubs={
            "docker": 'case "$1" in container) exit 1 ;; run) echo RAN ;; esac',
            "nvidia-smi": 'printf "GPU %s: x\\n" 0 1 2 3',
        },
        SEAT_CACHE_DIR=str(tmp_path),
        **dirs,
    )
    assert done.returncode == 0 and done.stdout == "RAN\n", done.stderr


@pytest.mark.parametrize("given", ["relative/cache", "/tmp/a:b", "/tmp/a,b"])
def test_a_cache_folder_docker_cannot_mount_is_refused_by_seat_up_and_the_script(tmp_path, given):
    spec = specs.build(profiles.load("cpu-smoke-docker"))
    (check,) = [c for c in spec.checks if c.kind == "cache"]
    with pytest.raises(SeatError, match="must be an absolute path without"):
        up_preflight(spec, check, {**spec.values({}), "SEAT_CACHE_DIR": given})
    done = run(tmp_path, "cpu-smoke-docker", SEAT_DRY_RUN="1", SEAT_CACHE_DIR=given)
    assert "warning: cache directory must be an absolute path without ':' or ','" in done.stderr
    assert not (tmp_path / "relative").exists()


def test_a_missing_cache_folder_is_made_but_not_in_a_dry_run(tmp_path):
    spec = specs.build(profiles.load("cpu-smoke-docker"))
    (check,) = [c for c in spec.checks if c.kind == "cache"]
    cache = tmp_path / "new" / "cache"
    run(tmp_path, "cpu-smoke-docker", SEAT_DRY_RUN="1", SEAT_CACHE_DIR=str(cache))
    assert not cache.exists()
    up_preflight(spec, check, {**spec.values({}), "SEAT_CACHE_DIR": str(cache)})
    assert cache.is_dir()
    (tmp_path / "file").write_text("")
    with pytest.raises(SeatError, match="cannot make the cache directory") as caught:
        up_preflight(spec, check, {**spec.values({}), "SEAT_CACHE_DIR": str(tmp_path / "file" / "c")})
    assert "SEAT_CACHE_DIR" in caught.value.hint


def test_the_profiles_own_unpinned_image_is_refused_a_chosen_one_is_warned_of(tmp_path, capsys):
    """The script used to run deepspark-prebuilt's movable tag when the profile was not pinned."""
    spec = specs.build(profiles.load("deepspark-prebuilt"))
    (check,) = [c for c in spec.checks if c.kind == "pinned"]
    message = "the profile's own image verdictai/deepspark:v4-flash is not pinned by digest"
    with pytest.raises(SeatError, match=message):
        up_preflight(spec, check, spec.values({}))
    up_preflight(spec, check, {**spec.values({}), "SEAT_IMAGE": "mine/seat:1"})  # `seat up` warns alike
    assert capsys.readouterr().err == "seat preflight: warning: mine/seat:1 is not pinned by digest\n"
    up_preflight(spec, check, {**spec.values({}), "SEAT_IMAGE": "mine/seat@sha256:" + "a" * 64})
    assert capsys.readouterr().err == ""
    done = run(tmp_path, "deepspark-prebuilt", SEAT_DRY_RUN="1")
    assert f"warning: {message}" in done.stderr
    done = run(tmp_path, "deepspark-prebuilt", SEAT_DRY_RUN="1", SEAT_IMAGE="mine/seat:1")
    assert "warning: mine/seat:1 is not pinned by digest" in done.stderr and message not in done.stderr


def names(check) -> list[str]:
    """The knobs a check's subject is made of."""
    return [word.name for word in check.subject if hasattr(word, "name")]


def test_an_empty_model_folder_knob_is_refused_not_read_as_the_working_directory(tmp_path):
    spec = specs.build(profiles.load("cpu-smoke-docker"))
    (check,) = [c for c in spec.checks if c.kind == "dir" and names(c) == ["SEAT_MODEL_BASE_DIR"]]
    with pytest.raises(SeatError, match="directory not found"):
        up_preflight(spec, check, {**spec.values({}), "SEAT_MODEL_BASE_DIR": ""})
    done = run(tmp_path, "cpu-smoke-docker", SEAT_DRY_RUN="1", SEAT_MODEL_BASE_DIR="")
    assert "directory not found" in done.stderr


def test_a_missing_model_folder_is_said_once_not_once_per_file(tmp_path):
    done = run(
        tmp_path, "dsv4-flash-dspark-tp4", SEAT_DRY_RUN="1", SEAT_MODEL_BASE_DIR=str(tmp_path / "nowhere")
    )
    assert done.returncode == 0, done.stderr
    findings = [line for line in done.stderr.splitlines() if line.startswith("seat preflight:")]
    assert sum(str(tmp_path / "nowhere") in line for line in findings) == 1, (
        done.stderr
    )  # the folder's own line
    assert (
        "config.json is missing" not in done.stderr and "lists no shards" not in done.stderr.split("draft")[0]
    )
    (tmp_path / "there").mkdir()  # a folder that exists but is empty: each missing file is a finding
    done = run(
        tmp_path, "dsv4-flash-dspark-tp4", SEAT_DRY_RUN="1", SEAT_MODEL_BASE_DIR=str(tmp_path / "there")
    )
    assert "base model config.json is missing or empty" in done.stderr


def test_a_missing_model_folder_names_its_knob_and_how_to_get_it(tmp_path):
    """'set the knob that names it' left a newcomer to find which knob: the hint names it, and
    `seat model fetch` where the profile says where the model comes from; `seat up` says the same."""
    where = str(tmp_path / "nowhere")
    done = run(tmp_path, DEFAULT, SEAT_DRY_RUN="1", SEAT_MODEL_DRAFT_DIR=where)
    hint = f"seat model fetch {DEFAULT} downloads it, or set SEAT_MODEL_DRAFT_DIR to the folder that has it"
    assert f"draft model directory not found: {where}\n  hint: {hint}\n" in done.stderr, done.stderr
    spec = specs.build(profiles.load(DEFAULT))
    (check,) = [c for c in spec.checks if c.kind == "dir" and names(c) == ["SEAT_MODEL_DRAFT_DIR"]]
    with pytest.raises(SeatError) as raised:
        up_preflight(spec, check, {**spec.values({}), "SEAT_MODEL_DRAFT_DIR": where})
    assert raised.value.hint == hint
    done = run(
        tmp_path, "cpu-smoke-docker", SEAT_DRY_RUN="1", SEAT_MODEL_BASE_DIR=where
    )  # built by a native seat's setup, not on the hub
    assert (
        "hint: seat setup of a native profile that builds tiny-llama makes it, or set "
        "SEAT_MODEL_BASE_DIR to the folder that has it\n" in done.stderr
    )


@pytest.mark.parametrize("profile", [DEFAULT, "cpu-smoke-docker"])
def test_the_dry_runs_command_pairs_each_option_with_its_value_and_pastes_as_the_launch(tmp_path, profile):
    """'--name' and its value on two lines doubled a 3,445-character command to 150 lines: an
    option and its value share a line, and what is pasted runs exactly what the launch runs."""
    port, key = str(free_port()), tmp_path / "key"
    key.write_text("k")  # cpu-smoke-docker reads its API key before the launch
    printed = run(tmp_path, profile, SEAT_DRY_RUN="1", SEAT_PORT=port, SEAT_API_KEY_FILE=str(key)).stdout
    lines = printed.splitlines()
    assert "  --rm \\" in lines and "  --ipc host \\" in lines and "  --network host \\" in lines
    assert not any(line.strip(" \\").startswith("--") and line.strip(" \\").count(" ") > 1 for line in lines)
    pasted = subprocess.run(
        ["bash", "-c", "docker() { printf '%s\\n' \"$@\"; }\n" + printed],
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    launched = run(
        tmp_path,
        profile,
        {"docker": "printf '%s\\n' \"$@\""},
        SEAT_SKIP_PREFLIGHT="1",
        SEAT_PORT=port,
        SEAT_API_KEY_FILE=str(key),
    ).stdout
    assert pasted == launched and "--name" in launched


def _environment():
    from seatkit.serve import render

    return render._environment()


def test_every_check_kind_has_a_bash_arm():
    from seatkit.serve.checks import Check, Kind

    seat = specs.build(profiles.load(DEFAULT))
    macro = _environment().get_template("preflight.sh.j2").module.check
    values = {Kind.GPUS: ("1",), Kind.SIZES: (("a", 1),), Kind.RESERVED_PORT: ("1",)}
    values |= {Kind.RESERVED_NAME: ("x",), Kind.PINNED: ("x",)}
    for kind in Kind:
        check = Check(kind, (specs.Ref("SEAT_HOST"), "/x"), "label", values.get(kind, ()))
        assert macro(check, seat.profile, seat).strip(), kind


def test_a_check_kind_without_an_arm_is_an_error_not_a_pass():
    from seatkit.serve import render
    from seatkit.serve.checks import Check

    check = Check("venvv")  # misspelt, or a kind added to the enum alone
    seat = specs.build(profiles.load(DEFAULT))
    with pytest.raises(SeatError, match="no check of kind 'venvv'"):
        render.render_script(replace(seat, checks=[check]))
    with pytest.raises(SeatError, match="no check of kind 'venvv'"):
        up_preflight(seat, check, {})


def test_a_relative_model_folder_is_refused_by_seat_up_and_the_script_not_mounted_as_a_volume(tmp_path):
    """docker takes a relative -v source as a named volume, and the SDK refuses it with an API
    error: a model folder given relative (or a relative SEAT_HOME in the script) stops in preflight."""
    (tmp_path / "rel" / "models" / "smollm2-135m").mkdir(parents=True)
    spec = specs.build(profiles.load("cpu-smollm2-docker"))
    (check,) = [c for c in spec.checks if c.kind == "dir" and names(c) == ["SEAT_MODEL_BASE_DIR"]]
    with pytest.raises(SeatError, match="must be an absolute path to be mounted"):
        up_preflight(spec, check, {**spec.values({}), "SEAT_MODEL_BASE_DIR": "."})
    done = run(tmp_path, "cpu-smollm2-docker", SEAT_DRY_RUN="1", SEAT_HOME="rel")
    assert "directory must be an absolute path to be mounted: rel/models/smollm2-135m" in done.stderr
