"""One launch, rendered three ways: for every shipped profile, the committed script, compose file and
k8s manifests run the same container argv with the same environment (and so does the container
`seat up` makes), and each refuses to serve beyond loopback without the API key unless the
operator says so.

Each form is read as what runs it reads it: the script by running it (a stand-in docker records
its argv), the compose file through compose's own `config` (its interpolation and .env), the
manifests with a YAML parser, as the kubelet gets them.
"""

import json
import os
import subprocess

import pytest
import yaml
from conftest import run_script, unguarded

from seatkit import engine, paths
from seatkit.seat import profiles
from seatkit.serve import effective, k8s, keys, launch, render
from seatkit.serve import spec as specs
from seatkit.serve.backends import docker
from seatkit.serve.compose import EXPOSURE_CHECK

EXPOSED = "0.0.0.0"
KEY = effective.API_KEY_ENV
REFUSAL = keys.REFUSAL.format(host=EXPOSED)
FROM_OUTSIDE = "(from outside)"  # a variable whose value the form takes from its launcher or a Secret


def launch_spec(name: str) -> specs.LaunchSpec:
    return specs.build(profiles.load(name))


def script(name: str, tmp_path, env: dict[str, str]) -> subprocess.CompletedProcess:
    """A dry run of serve/NAME.sh: the exposure refusal is said as a warning, the command printed."""
    return subprocess.run(
        ["bash", str(paths.REPO / "serve" / f"{name}.sh")],
        env={
            "PATH": os.environ["PATH"],
            "SEAT_HOME": str(tmp_path / "home"),
            "SEAT_DRY_RUN": "1",
            "SEAT_SKIP_PREFLIGHT": "1",
            **env,
        },
        capture_output=True,
        text=True,
        timeout=60,
    )


def script_container(name: str, tmp_path) -> tuple[list[str], dict[str, str], list[tuple[str, bool]]]:
    """The container argv, environment and mounts the script hands `docker run`."""
    key = tmp_path / "key"
    key.write_text("k3y\n")
    argv = [
        a.decode()
        for a in run_script(
            (paths.REPO / "serve" / f"{name}.sh").read_text(),
            tmp_path,
            {"SEAT_API_KEY_FILE": str(key), "SEAT_HOME": str(tmp_path / "home")},
        )
    ]
    at = argv.index(launch_spec(name).values({})["SEAT_IMAGE"])
    options = list(zip(argv[:at], argv[1 : at + 1], strict=True))
    env = dict((v.split("=", 1) if "=" in v else (v, FROM_OUTSIDE)) for o, v in options if o == "--env")
    mounts = [(v.split(":")[1], v.endswith(":ro")) for o, v in options if o == "--volume"]
    return argv[at + 1 :], env, mounts


def compose_config(compose, name: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    file = render.compose_path(name)
    return subprocess.run(
        [*compose, "-f", str(file), "config", "--format", "json"],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
        cwd=file.parent,
    )


def compose_services(compose, name: str, env: dict[str, str]) -> dict[str, dict]:
    done = compose_config(compose, name, {KEY: "k3y", **env})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.replace("$$", "$"))["services"]  # $$: compose's literal $


def pod_container(name: str) -> dict:
    text = (paths.REPO / "k8s" / name / "statefulset.yaml").read_text()
    workload = yaml.safe_load(text)
    return workload["spec"]["template"]["spec"]["containers"][0]


def kubelet(text: str) -> str:
    return text.replace("$$", "$")  # the kubelet's escape for a literal $


def pod_env(container: dict) -> dict[str, str]:
    return {e["name"]: kubelet(e["value"]) if "value" in e else FROM_OUTSIDE for e in container["env"]}


def host_of(argv: list[str]) -> str:
    return argv[argv.index("--host") + 1]


def bound_to(argv: list[str], host: str) -> list[str]:
    at = argv.index("--host") + 1
    return [*argv[:at], host, *argv[at + 1 :]]


@pytest.mark.parametrize("name", profiles.profile_names())
def test_every_form_refuses_to_serve_beyond_loopback_without_the_key_unless_told(name, tmp_path, compose):
    spec = launch_spec(name)
    keyed = bool(spec.api_key_file)
    exposed = script(name, tmp_path, {"SEAT_HOST": EXPOSED})
    told = script(name, tmp_path, {"SEAT_HOST": EXPOSED, keys.EXPOSE_WITHOUT_KEY: "1"})
    assert exposed.returncode == told.returncode == 0, exposed.stderr + told.stderr
    assert (REFUSAL in exposed.stderr) is not keyed and REFUSAL not in told.stderr
    if spec.native:  # one form only: compose and k8s take a container
        assert not render.compose_path(name).exists() and not (paths.REPO / "k8s" / name).exists()
        return
    services = compose_services(compose, name, {"SEAT_HOST": EXPOSED})
    assert host_of(services["seat"]["command"]) == EXPOSED
    if keyed:  # no key in the shell: compose refuses the file, the seat never starts
        done = compose_config(compose, name, {"SEAT_HOST": EXPOSED})
        assert done.returncode != 0 and f"export {KEY} from the seat's key file" in done.stderr
        assert EXPOSURE_CHECK not in services
    else:  # the one-shot check the seat depends on refuses, in a real shell, as the script does
        check = services[EXPOSURE_CHECK]
        assert services["seat"]["depends_on"] == {
            EXPOSURE_CHECK: {"condition": "service_completed_successfully", "required": True}
        }
        refused = subprocess.run([*check["entrypoint"], *check["command"]], capture_output=True, text=True)
        assert refused.returncode == 1 and REFUSAL in refused.stderr
        allowed = compose_services(compose, name, {"SEAT_HOST": EXPOSED, keys.EXPOSE_WITHOUT_KEY: "1"})
        check = allowed[EXPOSURE_CHECK]
        assert subprocess.run([*check["entrypoint"], *check["command"]]).returncode == 0
        guard = allowed["seat"]["command"][: -len(unguarded(allowed["seat"]["command"]))]
        told = subprocess.run([*guard, "echo", "served"], capture_output=True, text=True)  # then execs
        assert told.stdout == "served\n", told.stderr
    if spec.profile.kubernetes:  # a pod binds every address of its namespace: always the key
        pod = pod_container(name)
        assert host_of(pod["args"]) == pod_env(pod)["SEAT_HOST"] == EXPOSED
        secret = next(e for e in pod["env"] if e["name"] == KEY)["valueFrom"]["secretKeyRef"]
        assert secret == {"name": spec.profile.kubernetes.api_key_secret, "key": k8s.API_KEY_ITEM}


@pytest.mark.parametrize("name", [n for n in profiles.profile_names() if not launch_spec(n).native])
def test_every_form_runs_the_same_argv_with_the_same_environment_and_mounts(name, tmp_path, compose):
    spec = launch_spec(name)
    argv, env, mounts = script_container(name, tmp_path)
    seat = compose_services(compose, name, {})["seat"]
    compose_env = {k: FROM_OUTSIDE if v is None or k == KEY else v for k, v in seat["environment"].items()}
    assert unguarded(seat["command"]) == argv
    assert compose_env == env
    assert [(v["target"], v.get("read_only", False)) for v in seat["volumes"]] == mounts
    assert env["SEAT_HOST"] == host_of(argv) == spec.profile.server.host
    assert {n for n, v in env.items() if v == FROM_OUTSIDE} == {
        *spec.pass_env,
        *([KEY] if spec.api_key_file else []),
    }
    if not spec.profile.kubernetes:
        return
    pod = pod_container(name)
    assert [kubelet(a) for a in pod["args"]] == bound_to(argv, EXPOSED)
    assert pod_env(pod) == {**env, "SEAT_HOST": EXPOSED, KEY: FROM_OUTSIDE}
    passed = [e["valueFrom"]["configMapKeyRef"] for e in pod["env"] if e["name"] in spec.pass_env]
    assert all(ref["optional"] and ref["name"] == k8s.pass_env_config(spec.profile) for ref in passed)
    shm = {"name": "dshm", "mountPath": "/dev/shm"}
    pod_mounts = [(m["mountPath"], m.get("readOnly", False)) for m in pod["volumeMounts"] if m != shm]
    assert pod_mounts == mounts


@pytest.mark.parametrize("name", [n for n in profiles.profile_names() if not launch_spec(n).native])
def test_seat_up_creates_the_container_the_script_runs(name, tmp_path, monkeypatch):
    """The fourth form: `seat up`'s own container, made through the engine's API."""
    made = {}

    class Containers:
        def create(self, image, command, **kwargs):
            made.update(kwargs, command=command)
            return type("Container", (), {"id": "ab" * 32, "start": lambda self: None})()

        def get(self, ident):
            return type("Container", (), {"attrs": {"State": {"StartedAt": "now"}}})()

    monkeypatch.setattr(engine, "client", lambda: type("Client", (), {"containers": Containers()})())
    monkeypatch.setenv("SEAT_HOME", str(tmp_path / "home"))
    spec = launch_spec(name)
    for passed in spec.pass_env:
        monkeypatch.setenv(passed, "set in the shell")
    argv, env, mounts = script_container(name, tmp_path)
    run = launch.Running(name, "docker", "", "http://127.0.0.1:9", "m", str(tmp_path / "log"), 0.0)
    docker.create_and_start(
        spec, spec.values({}), {KEY: "k3y"} if spec.api_key_file else {}, run, launch._record
    )
    outside = {KEY, *spec.pass_env}
    assert made["command"] == argv
    assert {k: FROM_OUTSIDE if k in outside else v for k, v in made["environment"].items()} == env
    assert [(m["Target"], m["ReadOnly"]) for m in made["mounts"]] == mounts
