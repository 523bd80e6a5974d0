"""Host knobs from the environment (SEAT_PORT, SEAT_HOST, SEAT_IMAGE, SEAT_CONTAINER): one grammar,
checked by one bash loop that the rendered script and `seat up` both run, before anything runs."""

import os
import subprocess

import pytest

from seatkit.cli import app
from seatkit.seat import profiles
from seatkit.serve import render
from seatkit.serve import spec as specs

DOCKER = specs.build(profiles.load(profiles.DEFAULT_PROFILE))
BAD = (
    [
        ("SEAT_PORT", v)
        for v in [
            "0",
            "65536",
            "99999999999999999999",
            "8000; touch canary",
            "-1",
            "abc",
            " 80",
            "80\n",
            "",
            "08000",
        ]
    ]
    + [("SEAT_HOST", v) for v in ["a b", "$(touch canary)", "-h", "", "host;x", "a\n", "é"]]
    + [
        ("SEAT_IMAGE", v)
        for v in ["-v", "--privileged", "a b", "x$(touch canary)", "x:tag;y", "", "a/b:-t", "x@sha256:zz"]
    ]
    + [("SEAT_CONTAINER", v) for v in ["-x", "a b", "$(touch canary)", ""]]
)
GOOD = [
    ("SEAT_PORT", "1"),
    ("SEAT_PORT", "65535"),
    ("SEAT_HOST", "::1"),
    ("SEAT_HOST", "0.0.0.0"),
    ("SEAT_HOST", "localhost"),
    ("SEAT_IMAGE", "seatkit/x:overlay-1"),
    ("SEAT_IMAGE", "registry.local:5000/a/b:tag@sha256:" + "0" * 64),
    ("SEAT_CONTAINER", "seat_1"),
]


def script_accepts(tmp_path, name, value) -> bool:
    """What the rendered script says of the value (a dry run that skips preflight)."""
    script = tmp_path / "serve.sh"
    if not script.exists():
        script.write_text(render.render_script(DOCKER))
    done = subprocess.run(
        ["bash", str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"PATH": os.environ["PATH"], "SEAT_DRY_RUN": "1", "SEAT_SKIP_PREFLIGHT": "1", name: value},
    )
    assert done.returncode in (0, 2), done.stderr
    if done.returncode:
        assert done.stderr.startswith(f"seat: {name}=") and "canary" not in os.listdir(tmp_path)
    return done.returncode == 0


@pytest.mark.parametrize("name, value", BAD)
def test_a_bad_knob_is_refused_before_anything_runs(tmp_path, name, value):
    assert not script_accepts(tmp_path, name, value)
    assert not (tmp_path / "canary").exists()


@pytest.mark.parametrize("name, value", GOOD)
def test_a_good_knob_is_accepted(tmp_path, name, value):
    assert script_accepts(tmp_path, name, value)


@pytest.mark.parametrize(
    "env",
    [{"SEAT_PORT": "99999999999999999999"}, {"SEAT_PORT": "70000"}, {"SEAT_PORT": "x"}, {"SEAT_HOST": "a b"}],
)
def test_seat_up_shows_a_clear_error_not_a_traceback(tmp_path, monkeypatch, capsys, env):
    monkeypatch.setenv("SEAT_HOME", str(tmp_path))
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr("sys.argv", ["seat", "up", profiles.EMBEDDED_DEFAULT])
    with pytest.raises(SystemExit) as exited:
        app.main()
    printed = capsys.readouterr()
    assert exited.value.code == 1 and f"error: preflight: {next(iter(env))}=" in printed.err
    assert "Traceback" not in printed.err + printed.out
