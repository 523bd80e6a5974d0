"""An environment value that names a path is where code can come from: the temporary folder
(Inductor's default cache), a relative path the server resolves against its working directory,
a native seat's caches, and the path-taking names a native seat's shell holds."""

import subprocess

import pytest
from test_what_runs import EXPERIMENT, error_of, write  # the profile helpers of the rules' tests

from seatkit.seat import profiles
from seatkit.serve import render
from seatkit.serve import spec as specs
from seatkit.serve.backends.native import inherited


@pytest.mark.parametrize("name", ["TMP", "TEMP", "TMPDIR"])
def test_the_temporary_folder_is_a_cache_of_compiled_code(tmp_path, name):
    """tempfile.gettempdir() reads TMPDIR, then TEMP, then TMP: Inductor keeps its compiled graphs
    there (torchinductor_<user>) and runs what it finds. A passed TMP moved them unseen."""
    message = error_of(write(tmp_path, {"docker": {"pass_env": [name]}}))
    assert f"docker.pass_env.{name}: it moves Inductor's default cache" in message
    message = error_of(write(tmp_path, {"env": {name: "/srv/exp"}}))
    assert f"env.{name}: it moves" in message and "out of the kit's cache mount (/cache)" in message
    assert profiles.load(str(write(tmp_path, {"env": {name: "/cache/tmp"}}))).env[name] == "/cache/tmp"


@pytest.mark.parametrize("base", ["cpu-smoke-docker", "cpu-smoke"])
@pytest.mark.parametrize(
    "name, value",
    [
        ("VLLM_SOME_FUTURE_LOADER", ".."),
        ("VLLM_SOME_FUTURE_LOADER", "."),
        ("VLLM_SOME_FUTURE_LOADER", "~"),
        ("VLLM_SOME_FUTURE_LOADER", "~exp"),
        ("VLLM_FUTURE_LIB_PATH", "lib"),
        ("SOME_PLUGIN_DIR", "plugins"),
        ("VLLM_TUNED_CONFIG_FOLDER", "configs"),
    ],
)
def test_a_relative_value_names_a_path_as_an_absolute_one_does(tmp_path, base, name, value):
    """The server resolves `lib` against its working directory, `..` above it and `~` to HOME:
    a folder of code as much as /srv/exp, which the / test alone let through."""
    message = error_of(write(tmp_path, {"env": {name: value}}, base=base))
    assert f"env.{name}: its value names a file or folder" in message
    assert profiles.load(str(write(tmp_path, {"env": {name: value}, "experiment": EXPERIMENT}, base=base)))


@pytest.mark.parametrize("value", ["cache/triton", "../cache/triton"])
def test_a_relative_cache_value_is_not_judged_as_if_it_were_absolute(tmp_path, value):
    """cache/triton is under the working directory (the image's WORKDIR), not under /cache."""
    message = error_of(write(tmp_path, {"env": {"TRITON_CACHE_DIR": value}}))
    assert "env.TRITON_CACHE_DIR: it moves" in message


def test_a_setting_whose_name_ends_as_a_path_does_is_still_a_setting(tmp_path):
    env = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", "VLLM_CPU_OMP_THREADS_BIND": "auto"}
    loaded = profiles.load(str(write(tmp_path, {"env": env}, base="cpu-smoke"))).env
    assert {n: loaded[n] for n in env} == env


@pytest.mark.parametrize(
    "name, value",
    [
        ("TRITON_CACHE_DIR", "/srv/exp/triton"),
        ("TORCHINDUCTOR_CACHE_DIR", "/srv/exp/inductor"),
        ("VLLM_CACHE_ROOT", "/srv/exp/vllm"),
        ("XDG_CACHE_HOME", "/srv/exp"),
        ("HOME", "/srv/exp"),
        ("TMPDIR", "/srv/exp"),
        ("TMP", "/srv/exp"),
    ],
)
@pytest.mark.parametrize("where", ["env", "docker.extra_env"])
def test_a_native_profile_moves_no_cache_of_compiled_code(tmp_path, name, value, where):
    """A docker profile points a cache only into the kit's cache mount; a native profile skipped
    that check, and its TRITON_CACHE_DIR pointed the server at planted kernels, verified. A native
    seat's caches are the server's defaults under the launching user's folders."""
    docker = profiles.load("cpu-smoke-docker").docker.model_dump(mode="json")
    section = (
        {"env": {name: value}}
        if where == "env"
        else {"docker": {**docker, "extra_env": {name: value}, "cache": None}}
    )
    message = error_of(write(tmp_path, section, base="cpu-smoke"))
    assert f"{where}.{name}: it moves" in message and "a native seat's are the server's defaults" in message
    assert profiles.load(str(write(tmp_path, {**section, "experiment": EXPERIMENT}, base="cpu-smoke")))


UNSEEN = {
    "TORCHINDUCTOR_CACHE_DIR": "/srv/exp/inductor",
    "TRITON_CACHE_DIR": "/srv/exp/triton",
    "TRITON_HOME": "/srv/exp",
    "VLLM_CACHE_ROOT": "/srv/exp/vllm",
    "FLASHINFER_WORKSPACE_BASE": "/srv/exp/fi",
    "CUDA_CACHE_PATH": "/srv/exp/cuda",
    "VLLM_CONFIG_ROOT": "/srv/exp/config",
    "VLLM_TUNED_CONFIG_FOLDER": "/srv/exp/tuned",
    "SOME_FUTURE_PLUGIN_DIR": "/srv/exp/plugins",
}
KEPT = {
    "XDG_CACHE_HOME": "/srv/me/.cache",
    "TMPDIR": "/srv/me/tmp",
    "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
    "SOME_TOOL_LEVEL": "3",
}


def test_seat_up_takes_no_path_from_the_shell_but_the_users_own_folders(monkeypatch):
    """A TORCHINDUCTOR_CACHE_DIR left exported reached the native server, its value never seen by
    the kit; HOME, XDG_CACHE_HOME and the temporary folder are where its default caches are."""
    for name, value in {**UNSEEN, **KEPT}.items():
        monkeypatch.setenv(name, value)
    env = inherited()
    assert not set(UNSEEN) & set(env), sorted(set(UNSEEN) & set(env))
    assert {n: env.get(n) for n in KEPT} == KEPT and "HOME" in env and "PATH" in env


def test_the_script_takes_no_path_from_the_shell_but_the_users_own_folders(tmp_path):
    """The script an operator runs by hand keeps what `seat up` keeps, its own SEAT_* knobs among
    them (SEAT_HOME ends as a path-taking name does)."""
    spec = specs.build(profiles.load("cpu-smoke"))
    home, seen = tmp_path / "home", tmp_path / "seen"
    server = home / "venvs" / spec.profile.native.venv / "bin" / "vllm"
    server.parent.mkdir(parents=True)
    server.write_text(f"#!/bin/sh\nenv > {seen}\n")
    server.chmod(0o755)
    script = tmp_path / "serve.sh"
    script.write_text(render.render_script(spec))
    environ = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "SEAT_HOME": str(home), **UNSEEN, **KEPT}
    done = subprocess.run(
        ["bash", str(script)],
        cwd=tmp_path,
        env={**environ, "SEAT_SKIP_PREFLIGHT": "1"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    env = dict(line.partition("=")[::2] for line in seen.read_text().splitlines() if "=" in line)
    assert not set(UNSEEN) & set(env), sorted(set(UNSEEN) & set(env))
    assert {n: env.get(n) for n in KEPT} == KEPT and env["HOME"] == str(tmp_path)
