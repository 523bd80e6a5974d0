"""Nsight Systems modes, pass-through env and experiment mounts/env: the rendered script hands docker
exactly the LaunchSpec's argv (a stub docker records it), bad knob values stop the launch, and the
one-line configuration the script prints is the one `seat up` prints."""

import os
import subprocess
from dataclasses import replace

import pytest
import yaml
from conftest import unguarded

from seatkit import paths
from seatkit.errors import SeatError
from seatkit.seat import profiles
from seatkit.serve import effective, nsys, preflight, render
from seatkit.serve import spec as specs
from seatkit.serve.backends.native import process_start
from seatkit.serve.compose import EXPOSURE_CHECK

ORIGINAL_PROFILE_FLAGS = [
    "nsys",
    "profile",
    "--trace=cuda,nvtx,osrt",
    "--cuda-graph-trace=node",
    "--sample=none",
    "--cpuctxsw=none",
    "--duration=240",
    "--wait=primary",
    "--output=/cache/nsys/dsv4-flash-dspark-tp4",
]


def run_script(script, tmp_path, **env):
    """Run a rendered script with a stub docker that records its argv; (rc, argv, stderr)."""
    stub = tmp_path / "bin"
    stub.mkdir(exist_ok=True)
    record = tmp_path / "argv"
    record.unlink(missing_ok=True)
    (stub / "docker").write_text(f'#!/bin/sh\nprintf "%s\\0" "$@" > {record}\n')
    (stub / "docker").chmod(0o755)
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("SEAT_", "B12X_"))}
    done = subprocess.run(
        ["bash", str(script)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**environ, "PATH": f"{stub}:{os.environ['PATH']}", "SEAT_SKIP_PREFLIGHT": "1", **env},
    )
    argv = record.read_text().split("\0")[:-1] if record.exists() else None
    return done.returncode, argv, done.stderr


def after_image(argv, image):
    return argv[argv.index(image) + 1 :]


def default():
    return specs.build(profiles.load(profiles.DEFAULT_PROFILE))


SCRIPT = paths.REPO / "serve" / "dsv4-flash-dspark-tp4.sh"


@pytest.mark.parametrize("mode", ["off", "profile", "session"])
def test_script_runs_the_specs_container_argv_in_every_mode(tmp_path, mode):
    spec = default()
    values = {**spec.values({}), "SEAT_NSYS": mode}
    rc, argv, err = run_script(SCRIPT, tmp_path, SEAT_NSYS=mode)
    assert rc == 0, err
    assert after_image(argv, values["SEAT_IMAGE"]) == effective.argv(spec, values)
    words = effective.argv(spec, values)
    server = words.index("vllm")
    assert words[:7] == [
        "env",
        "-u",
        "NCCL_GRAPH_FILE",
        "-u",
        "NCCL_GRAPH_DUMP_FILE",
        "-u",
        "VLLM_B12X_MLA_EXTEND_MAX_CHUNKS",
    ]
    # The wrap sits between `env -u ...` and the server; the server's own argv is untouched.
    assert words[server:] == effective.argv(spec, spec.values({}))[7:]
    wrap = words[7:server]
    if mode == "off":
        assert wrap == []
    elif mode == "profile":
        assert wrap == ORIGINAL_PROFILE_FLAGS
    else:
        assert wrap == [
            "nsys",
            "launch",
            "--session-new=dsv4_flash_dspark_tp4_decode",
            "--trace=cuda,nvtx,osrt",
            "--cuda-graph-trace=node",
            "--sample=none",
            "--cpuctxsw=none",
        ]
        assert nsys.session_of(words) == {"session": "dsv4_flash_dspark_tp4_decode"}
    if mode != "session":
        assert nsys.session_of(words) is None


def test_knob_values_reach_the_wrap(tmp_path):
    knobs = {
        "SEAT_NSYS": "profile",
        "SEAT_NSYS_GRAPH_TRACE": "graph",
        "SEAT_NSYS_DURATION": "30",
        "SEAT_NSYS_OUTPUT": "/cache/nsys/run1",
        "SEAT_NSYS_SESSION": "s1",
    }
    rc, argv, err = run_script(SCRIPT, tmp_path, **knobs)
    assert rc == 0, err
    assert "--cuda-graph-trace=graph" in argv and "--duration=30" in argv
    assert "--output=/cache/nsys/run1" in argv
    spec = default()
    assert after_image(argv, spec.values({})["SEAT_IMAGE"]) == effective.argv(
        spec, {**spec.values({}), **knobs}
    )


@pytest.mark.parametrize(
    "knob, value",
    [
        ("SEAT_NSYS", "on"),
        ("SEAT_NSYS", "1"),
        ("SEAT_NSYS_GRAPH_TRACE", "nodes"),
        ("SEAT_NSYS_DURATION", "0"),
        ("SEAT_NSYS_DURATION", "10; touch /tmp/x"),
        ("SEAT_NSYS_SESSION", "a b"),
        ("SEAT_NSYS_SESSION", "$(id)"),
        ("SEAT_NSYS_OUTPUT", "/etc/passwd"),
        ("SEAT_NSYS_OUTPUT", "/cache/nsys/../../etc/x"),
        ("SEAT_NSYS_OUTPUT", "/cache/nsys/a/b"),
        ("SEAT_NSYS_OUTPUT", "/cachexnsys/a"),
    ],
)
def test_a_bad_knob_stops_both_launches(tmp_path, knob, value):
    rc, argv, err = run_script(SCRIPT, tmp_path, **{"SEAT_NSYS": "session", knob: value})
    assert rc == 2 and argv is None, err  # the one knob grammar: exit 2, as for the host knobs
    assert f"seat: {knob}=" in err and f"hint: fix or unset {knob}" in err
    spec = default()
    with pytest.raises(SeatError) as caught:  # `seat up` runs the same check before anything
        preflight.run(replace(spec, checks=[]), {**spec.values({}), "SEAT_NSYS": "session", knob: value})
    assert (
        caught.value.message.startswith(f"preflight: {knob}=") and caught.value.hint == f"fix or unset {knob}"
    )


def test_pass_env_goes_through_only_when_set(tmp_path):
    spec = default()
    assert spec.pass_env == ["B12X_MICRO_MAX_ACTIVE_CLUSTERS"]
    assert spec.passed_env({}) == {}
    assert spec.passed_env({"B12X_MICRO_MAX_ACTIVE_CLUSTERS": "4"}) == {"B12X_MICRO_MAX_ACTIVE_CLUSTERS": "4"}
    rc, argv, err = run_script(SCRIPT, tmp_path)
    # `--env NAME` without a value: docker passes the launching shell's value, and nothing when unset.
    assert rc == 0 and argv[argv.index("B12X_MICRO_MAX_ACTIVE_CLUSTERS") - 1] == "--env", err
    assert not any(a.startswith("B12X_MICRO_MAX_ACTIVE_CLUSTERS=") for a in argv)
    compose = yaml.safe_load(render.render_compose(spec))["services"]["seat"]["environment"]
    assert compose["B12X_MICRO_MAX_ACTIVE_CLUSTERS"] is None  # compose: from the shell, only when set


@pytest.mark.parametrize(
    "env", [{}, {"B12X_MICRO_MAX_ACTIVE_CLUSTERS": "4", "SEAT_NSYS": "session", "SEAT_PORT": "9555"}]
)
def test_the_script_prints_the_same_configuration_line_as_seat_up(tmp_path, env):
    spec = default()
    rc, _, err = run_script(SCRIPT, tmp_path, **env)
    assert rc == 0
    line = spec.config_line(spec.values(env), env)
    assert line in err.splitlines()
    assert f"B12X_MICRO_MAX_ACTIVE_CLUSTERS={env.get('B12X_MICRO_MAX_ACTIVE_CLUSTERS', '(unset)')}" in line
    assert f"SEAT_NSYS={env.get('SEAT_NSYS', 'off')}" in line and "tp=4" in line


def experiment(tmp_path, docker, **top):
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump({"extends": profiles.DEFAULT_PROFILE, "docker": docker, **top}))
    return path


UNVERIFIED = {"unverified": True, "reason": "a patched b12x tree"}


def test_experiment_mounts_and_env_reach_every_form(tmp_path):
    path = experiment(
        tmp_path,
        {
            "extra_mounts": [
                {"source": "/srv/b12x overlay/b12x", "target": "/opt/venv/lib/python3.12/site-packages/b12x"},
                {"source": "/srv/scratch", "target": "/scratch", "read_only": False},
            ],
            "extra_env": {"B12X_TRY": "a b&c;d", "EXP_LEVEL": "2"},
        },
        experiment=UNVERIFIED,
    )
    spec = specs.build(profiles.load(str(path)))
    script = tmp_path / "exp.sh"
    script.write_text(render.render_script(spec))
    rc, argv, err = run_script(script, tmp_path)
    assert rc == 0, err
    assert "/srv/b12x overlay/b12x:/opt/venv/lib/python3.12/site-packages/b12x:ro" in argv
    assert "/srv/scratch:/scratch" in argv
    assert "B12X_TRY=a b&c;d" in argv and "EXP_LEVEL=2" in argv
    service = yaml.safe_load(render.render_compose(spec))["services"]["seat"]
    assert {"type": "bind", "source": "/srv/scratch", "target": "/scratch", "read_only": False} in service[
        "volumes"
    ]
    assert service["environment"]["B12X_TRY"] == "a b&c;d"
    # seat up mounts and sets the same from the spec (the real engine test runs it).
    assert [(m.source, m.target, m.read_only) for m in spec.mounts][-2:] == [
        (("/srv/b12x overlay/b12x",), "/opt/venv/lib/python3.12/site-packages/b12x", True),
        (("/srv/scratch",), "/scratch", False),
    ]
    assert spec.env["B12X_TRY"] == "a b&c;d"
    assert "extra_mounts=/opt/venv/lib/python3.12/site-packages/b12x,/scratch" in spec.facts
    assert "`B12X_TRY`" in render.render_launch_config(spec)


@pytest.mark.parametrize(
    "docker, expected",
    [
        ({"extra_mounts": [{"source": "srv/x", "target": "/x"}]}, "absolute path"),
        ({"extra_mounts": [{"source": "/srv/x:/y", "target": "/x"}]}, "without ':'"),
        ({"extra_mounts": [{"source": "/srv/a,b", "target": "/x"}]}, "without ':'"),
        ({"extra_mounts": [{"source": "/srv/../etc", "target": "/x"}]}, "'..'"),
        ({"extra_mounts": [{"source": "/srv/$(id)", "target": "/x"}]}, "plain text"),
        ({"extra_mounts": [{"source": "/srv/x", "target": "/x'"}]}, "plain text"),
        ({"extra_mounts": [{"source": "/srv/x", "target": "/models-base"}]}, "repeat what the profile sets"),
        ({"extra_mounts": [{"source": "/srv/x", "target": "/cache"}]}, "repeat a target"),
        ({"extra_mounts": [{"source": "/srv/x", "target": "/cache/"}]}, "repeat a target"),
        ({"extra_mounts": [{"source": "/srv/x", "target": "//cache/."}]}, "repeat a target"),
        ({"extra_mounts": [{"source": "/srv/x", "target": "/models-base/config.json"}]}, "repeat what the"),
        ({"extra_mounts": [{"source": "/srv/x", "target": "/cache/nsys"}]}, "repeat what the profile sets"),
        ({"extra_mounts": [{"source": "/srv/x", "target": "/"}]}, "repeat what the profile sets"),
        ({"extra_env": {"lower": "1"}}, "[A-Z_][A-Z0-9_]*"),
        ({"extra_env": {"A-B": "1"}}, "[A-Z_][A-Z0-9_]*"),
        ({"extra_env": {"X": "a\nb"}}, "plain text"),
        ({"extra_env": {"X": "`id`"}}, "plain text"),
        ({"extra_env": {"X": 'say "hi"'}}, "plain text"),
        ({"extra_env": {"X": "${HOME}"}}, "plain text"),
        ({"extra_env": {"X": "a\\b"}}, "plain text"),
        ({"extra_env": {"X": ""}}, "plain text"),
        ({"extra_env": {"X": 1}}, "valid string"),
        ({"extra_env": {"NCCL_PROTO": "Simple"}}, "repeat what the profile sets"),
        ({"pass_env": ["b12x"]}, "[A-Z_][A-Z0-9_]*"),
        ({"pass_env": ["HF_HUB_OFFLINE"]}, "repeat what the profile sets"),
        ({"pass_env": ["X"], "extra_env": {"X": "1"}}, "both in extra_env and pass_env"),
        ({"pass_env": ["VLLM_API_KEY"]}, "only from the key file"),
        ({"pass_env": ["SEAT_HOST"]}, "the kit's own SEAT_* names"),
        ({"extra_env": {"SEAT_NSYS": "profile"}}, "the kit's own SEAT_* names"),
        ({"extra_env": {"NCCL_GRAPH_FILE": "/x"}}, "also in unset_env"),
        ({"pass_env": ["NCCL_GRAPH_DUMP_FILE"]}, "also in unset_env"),
        ({"extra_env": {"VLLM_API_KEY": "k"}}, "only from the key file"),
        ({"pass_env": ["HF_TOKEN"]}, "look like credentials"),
        ({"pass_env": ["AWS_SECRET_ACCESS_KEY"]}, "look like credentials"),
    ],
)
def test_experiment_fields_have_a_strict_grammar(tmp_path, docker, expected):
    with pytest.raises(SeatError) as caught:
        profiles.load(str(experiment(tmp_path, docker)))
    assert expected in caught.value.message


def test_compose_has_one_service_per_mode_with_the_same_argv():
    spec = default()
    services = yaml.safe_load(render.render_compose(spec))["services"]
    # the default seat has no key: the exposure check runs before each of them
    assert set(services) == {"seat", "seat-nsys-profile", "seat-nsys-session", EXPOSURE_CHECK}
    values = {k.name: f"${{{k.name}}}" for k in spec.knobs}
    for mode in ("off", "profile", "session"):
        service = services["seat" if mode == "off" else f"seat-nsys-{mode}"]
        assert unguarded(service["command"]) == effective.argv(spec, {**values, "SEAT_NSYS": mode})
    assert services["seat-nsys-session"]["extends"] == {"service": "seat"}


# Every variable and flag of the original launch script (research notes, deploy-anchors §3.1, §3.3).
ORIGINAL = """IMAGE NAME BASE_MODEL_HOST_DIR BASE_MODEL_DIR_NAME HEAD_MODEL_HOST_DIR HEAD_MODEL_DIR_NAME
MODEL_PATH DRAFT_MODEL_PATH SERVED_NAME PORT TP GPU_UTIL MAXLEN MAX_SEQS MAX_BATCHED MOE_BACKEND
GRAPH_CAP CACHE_DIR VLLM_OVERLAY B12X_OVERLAY DSPARK_NUM_SPECULATIVE_TOKENS DSPARK_CONFIDENCE_SCHEDULE
DSPARK_STS_TEMPS DSPARK_SCHEDULER_KNEE_TOKENS DSPARK_SCHEDULER_COST_EXPONENT DSPARK_COMMITTED_PREFIX_KV
DSPARK_VERIFY_LEN_BUCKETS DSPARK_VERIFY_BUCKET_REQ_COUNTS VLLM_B12X_MLA_SPEC_EXTEND_AS_DECODE
VLLM_B12X_MLA_SPEC_DECODE_MAX_Q B12X_DENSE_SPLITK_TURBO B12X_DENSE_SPLITK B12X_DENSE_SPLITK_LOSSLESS
B12X_DENSE_SPLITK_MAX B12X_DENSE_SPLITK_WAVE B12X_DENSE_SPLITK_WAVE_MAX B12X_DENSE_MXFP8_SWAP_AB
B12X_DENSE_MXFP8_SWAP_TILE_N B12X_MICRO_MAX_ACTIVE_CLUSTERS NSYS_PROFILE NSYS_LAUNCH_SESSION
NSYS_SESSION_NAME NSYS_CUDA_GRAPH_TRACE NSYS_OUTPUT NSYS_DURATION EXTRA_MOUNTS EXTRA_ENVS
VLLM_MEMORY_PROFILE_INCLUDE_ATTN --runtime --shm-size --restart --privileged""".split()


def test_launch_config_accounts_for_everything_of_the_original_script():
    seat = profiles.load(profiles.DEFAULT_PROFILE)
    decided = " ".join(f"{d.topic} {d.chosen}" for d in seat.decisions)
    wildcards = [w[:-1] for w in decided.replace(",", " ").replace(")", " ").split() if w.endswith("*")]
    kept = set(seat.env) | set(seat.docker.pass_env)
    missing = [
        name
        for name in ORIGINAL
        if name not in kept and name not in decided and not any(name.startswith(w) for w in wildcards)
    ]
    assert missing == []
    text = (paths.REPO / "LAUNCH_CONFIG.md").read_text()
    assert "What the kit does differently from the original script" in text
    assert all(d.topic in text for d in seat.decisions)


def test_bench_nsys_refuses_a_seat_it_cannot_trace(tmp_path, monkeypatch):
    from seatkit.bench import nsys as bench_nsys
    from seatkit.serve import launch

    monkeypatch.setenv("SEAT_HOME", str(tmp_path))
    with pytest.raises(SeatError) as caught:
        bench_nsys.session_of(profiles.DEFAULT_PROFILE)
    assert "needs a docker seat" in caught.value.message
    assert caught.value.hint == f"SEAT_NSYS=session seat up {profiles.DEFAULT_PROFILE}"
    native = launch.Running(
        "cpu-smoke",
        "native",
        str(os.getpid()),
        "http://127.0.0.1:1",
        "tiny",
        "log",
        0.0,
        since=process_start(os.getpid()),
    )
    launch._record(native)
    with pytest.raises(SeatError, match="needs a docker seat"):
        bench_nsys.session_of("cpu-smoke")


def test_bench_nsys_needs_a_profiles_seat_not_a_url():
    from click.testing import CliRunner

    from seatkit.cli.app import seat

    result = CliRunner().invoke(
        seat, ["bench", "run", "--url", "http://127.0.0.1:9", "--model", "m", "--nsys"]
    )
    assert result.exit_code == 2 and "--nsys traces one request of a profile's seat" in result.output


def test_a_missing_extra_mount_source_stops_every_launch(tmp_path):
    """docker run -v would create it as an empty root-owned folder (the script) where seat up's
    bind mount fails: both launches refuse it in preflight instead."""
    from dataclasses import replace

    from conftest import free_port

    from seatkit.serve import preflight

    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    missing = tmp_path / "no such overlay"
    path = tmp_path / "exp-missing.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "description": "a missing experiment mount",
                "runtime": "docker",
                "image": {"name": "seatkit-test/none", "tag": "1"},
                "server": {"port": free_port(), "served_model_name": "m"},
                "gpus": {"count": 0},
                "models": {"base": {"host_dir": str(model), "mount": "/models-base"}},
                "model": "base",
                "docker": {
                    "container_name": "seatkit-test-exp-missing",
                    "ulimits": {},
                    "extra_mounts": [{"source": str(missing), "target": "/opt/b12x"}],
                },
            }
        )
    )
    spec = specs.build(profiles.load(str(path)))
    (check,) = [c for c in spec.checks if c.kind == "exists"]
    with pytest.raises(SeatError) as caught:
        preflight.run(replace(spec, checks=[check]), spec.values({}))
    assert f"extra mount source not found: {missing}" in caught.value.message
    script = tmp_path / "exp.sh"
    script.write_text(render.render_script(spec))
    stub = tmp_path / "bin"
    stub.mkdir()
    # image inspect succeeds, container inspect finds none; anything else records a launch
    (stub / "docker").write_text(
        f'#!/bin/sh\ncase "$1 $2" in "image inspect"|"info ") exit 0 ;; '
        f'"container inspect") exit 1 ;; esac\ntouch {tmp_path}/launched\n'
    )
    (stub / "docker").chmod(0o755)
    environ = {k: v for k, v in os.environ.items() if not k.startswith("SEAT_")}
    done = subprocess.run(
        ["bash", str(script)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**environ, "PATH": f"{stub}:{os.environ['PATH']}"},
    )
    assert done.returncode == 1 and f"extra mount source not found: {missing}" in done.stderr
    assert not (tmp_path / "launched").exists() and not missing.exists()
    missing.mkdir()
    done = subprocess.run(
        ["bash", str(script)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**environ, "PATH": f"{stub}:{os.environ['PATH']}"},
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "launched").exists()


def test_ctrl_c_during_nsys_start_leaves_no_collection_running(tmp_path, monkeypatch):
    """Ctrl-C while `nsys start` runs in the container: the exec may have started collection,
    so the bench stops it before giving up."""
    from types import SimpleNamespace

    from seatkit.bench import nsys as bench_nsys

    def measure(target, prompt, options, around):  # the request itself is never reached
        with around():
            raise AssertionError("the request was sent after Ctrl-C")

    monkeypatch.setattr(bench_nsys.request, "measure", measure)

    class Container:
        id, calls = "c0ffee", []

        def exec_run(self, argv):
            self.calls.append(argv[1])
            if argv[1] == "start":
                raise KeyboardInterrupt
            return SimpleNamespace(exit_code=0, output=b"")

    container = Container()
    with pytest.raises(KeyboardInterrupt):
        bench_nsys.traced(None, None, None, container, "s1", "/cache/nsys/x", tmp_path)
    assert container.calls == ["start", "stop"]


def test_a_profile_without_nsys_modes_refuses_seat_nsys(tmp_path, monkeypatch):
    """cpu-smoke (native, no cache volume) has no modes: SEAT_NSYS=session must not launch a seat
    without the profiler the operator asked for, in the script or in seat up."""
    from seatkit.serve import launch

    spec = specs.build(profiles.load("cpu-smoke"))
    assert not spec.wraps
    environ = {k: v for k, v in os.environ.items() if not k.startswith("SEAT_")}

    def script(dry_run):
        return subprocess.run(
            ["bash", str(paths.REPO / "serve" / "cpu-smoke.sh")],
            capture_output=True,
            text=True,
            timeout=60,
            env={**environ, "SEAT_HOME": str(tmp_path), "SEAT_NSYS": "session", "SEAT_DRY_RUN": dry_run},
        )

    message = "SEAT_NSYS=session: this profile has no Nsight"
    done = script("0")
    assert done.returncode == 1 and message in done.stderr
    done = script("1")  # a dry run shows it as a warning
    assert done.returncode == 0 and f"warning: {message}" in done.stderr
    monkeypatch.setenv("SEAT_NSYS", "session")
    monkeypatch.setenv("SEAT_HOME", str(tmp_path))
    with pytest.raises(SeatError) as caught:
        launch.up(spec)
    assert "no Nsight Systems modes" in caught.value.message and "docker.cache" in caught.value.hint


def test_a_dry_run_names_every_bad_knob_and_runs_nothing(tmp_path):
    """One grammar, one behaviour: every bad value is said, then the script stops (exit 2), dry run
    or not, before preflight could hand a value to a command."""
    env = {"SEAT_DRY_RUN": "1", "SEAT_PORT": "0", "SEAT_NSYS": "on", "SEAT_NSYS_DURATION": "x"}
    rc, argv, err = run_script(SCRIPT, tmp_path, **env)
    assert rc == 2 and argv is None, err
    for knob in ("SEAT_PORT", "SEAT_NSYS", "SEAT_NSYS_DURATION"):
        assert f"seat: {knob}=" in err and f"hint: fix or unset {knob}" in err
    assert "docker run" not in err
