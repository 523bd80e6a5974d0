"""The docker runtime against a real engine (no GPU here, no registry)."""

import json
import os
import subprocess
import threading
import time
import uuid

import docker
import pytest
from conftest import BIN, REPO, free_port

from seatkit.errors import SeatError
from seatkit.seat import layout, profiles
from seatkit.serve import launch
from seatkit.serve import spec as specs
from seatkit.serve.backends.docker import create_and_start, labels


def image_check(profile, image):
    """The image check's answer, for a test image that carries no overlay to check: its own id,
    unmarked."""
    return docker.from_env().images.get(image).id, None


def default_spec(image):
    spec = specs.build(profiles.load(profiles.DEFAULT_PROFILE))
    return spec, {
        **spec.values({}),
        "SEAT_IMAGE": image,
        "SEAT_CONTAINER": "seatkit-test-gpu",
        "SEAT_PORT": str(free_port()),
    }


def test_no_gpu_runtime_is_a_clear_error_and_leaves_nothing(busybox_image, tmp_path, monkeypatch):
    spec, values = default_spec(busybox_image)
    for knob in ("SEAT_MODEL_BASE_DIR", "SEAT_MODEL_DRAFT_DIR", "SEAT_CACHE_DIR"):
        values[knob] = str(tmp_path)
    values["SEAT_CONTAINER"] = f"seatkit-test-gpu-{uuid.uuid4().hex[:8]}"
    monkeypatch.setattr(launch.preflight, "run", lambda spec, values: None)  # it stops at "no GPU"
    with pytest.raises(SeatError) as caught:
        launch._start(spec, values, image_check)
    assert caught.value.message.startswith("no NVIDIA container runtime")
    # docker creates the container before the device request fails: the failed start removes it
    leftover = docker.from_env().containers.list(all=True, filters={"name": values["SEAT_CONTAINER"]})
    assert leftover == []
    assert launch.recorded(spec.profile.name) is None


def test_rendered_script_reaches_docker_with_its_preflight(busybox_image, tmp_path):
    models = {}
    for key in ("BASE", "DRAFT"):
        folder = tmp_path / key.lower()
        folder.mkdir()
        for name in ("config.json", "tokenizer.json", "tokenizer_config.json"):
            (folder / name).write_text("{}")
        (folder / "model.safetensors.index.json").write_text(
            '{"weight_map": {"w": "model-00001-of-00001.safetensors"}}'
        )
        (folder / "model-00001-of-00001.safetensors").write_bytes(b"x")
        models[f"SEAT_MODEL_{key}_DIR"] = str(folder)
    env = {
        **os.environ,
        **models,
        "SEAT_IMAGE": busybox_image,
        "SEAT_CACHE_DIR": str(tmp_path),
        "SEAT_PORT": str(free_port()),
        "SEAT_CONTAINER": "seatkit-test-script",
    }
    done = subprocess.run(
        ["bash", str(REPO / "serve" / "dsv4-flash-dspark-tp4.sh")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    # Every check before the GPU one passes against the real engine and files; no GPU here.
    assert done.returncode == 1
    assert "nvidia-smi not found" in done.stderr or "GPUs visible" in done.stderr
    assert "is not pinned by digest" in done.stderr
    (tmp_path / "draft" / "model-00001-of-00001.safetensors").write_bytes(b"")
    done = subprocess.run(
        ["bash", str(REPO / "serve" / "dsv4-flash-dspark-tp4.sh")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "draft model shard missing or empty: model-00001-of-00001.safetensors" in done.stderr


@pytest.fixture
def standin_seat(busybox_image, tmp_path):
    """cpu-smoke-docker on a stand-in image whose `vllm` runs the given shell lines instead of serving."""
    made = []

    def make(script: str) -> tuple:
        root = tmp_path / f"root{len(made)}"
        (root / "bin").mkdir(parents=True)
        (root / "bin" / "vllm").write_text(f"#!/bin/sh\n{script}\n")
        (root / "bin" / "vllm").chmod(0o755)
        (root / "Dockerfile").write_text(f"FROM {busybox_image}\nCOPY bin/vllm /bin/vllm\n")
        tag = f"seatkit-test/standin-vllm:{uuid.uuid4().hex[:8]}"
        subprocess.run(["docker", "build", "-q", "-t", tag, str(root)], capture_output=True, check=True)
        made.append(tag)
        model = tmp_path / "model"
        model.mkdir(exist_ok=True)
        for name in profiles.load("cpu-smoke").models["base"].files:
            (model / name).write_text("{}")
        name = f"seatkit-test-standin-{uuid.uuid4().hex[:8]}"
        environ = {
            **os.environ,
            "SEAT_IMAGE": tag,
            "SEAT_CONTAINER": name,
            "SEAT_PORT": str(free_port()),
            "SEAT_MODEL_BASE_DIR": str(model),
            "SEAT_CACHE_DIR": str(tmp_path),
        }
        return specs.build(profiles.load("cpu-smoke-docker")), environ, name

    yield make
    client = docker.from_env()
    for container in client.containers.list(all=True, filters={"name": "seatkit-test-standin-"}):
        container.remove(force=True)
    for tag in made:
        subprocess.run(["docker", "rmi", "-f", tag], capture_output=True)


@pytest.mark.parametrize("restart", ["no", "unless-stopped"])
def test_the_container_carries_the_profiles_restart_policy(standin_seat, tmp_path, restart):
    """What the engine recorded of the created seat, not what was asked of it."""
    _, environ, _ = standin_seat("exec sleep 600")
    path = tmp_path / "seat.yaml"
    path.write_text(f"extends: cpu-smoke-docker\ndocker: {{restart: '{restart}'}}\n")
    spec = specs.build(profiles.load(str(path)))
    run = launch.Running("seat", "docker", "", "http://127.0.0.1:9", "m", str(tmp_path / "log"), time.time())
    create_and_start(spec, spec.values(environ), {}, run, launch._record)
    try:
        host = docker.from_env().api.inspect_container(run.ident)["HostConfig"]
        assert host["RestartPolicy"]["Name"] == restart
    finally:
        launch.stop(run, grace=1)


def test_a_container_left_with_the_seats_name_is_named_with_its_state_and_owner(
    standin_seat, busybox_image, tmp_path, monkeypatch
):
    """Not the engine's bare 409 "Conflict": whose container holds the name, in what state, and
    how to free it, whether preflight finds it or the create does (taken after preflight looked)."""
    spec, environ, name = standin_seat("exec sleep 600")
    client = docker.from_env()
    stranger = client.containers.create(busybox_image, ["true"], name=name, network_mode="none")
    try:
        with pytest.raises(SeatError) as caught:
            launch.up(spec, environ=environ)
        assert caught.value.message == (
            f"a container named {name} already exists (created, {stranger.short_id}): not the kit's"
        )
        assert caught.value.hint.startswith(f"docker rm {name} if it is not wanted")
    finally:
        stranger.remove(force=True)
    profile = spec.profile.name
    left = launch.Running(
        profile, "docker", "", "http://127.0.0.1:9", "m", str(tmp_path / "log"), time.time()
    )
    create_and_start(spec, spec.values(environ), {}, left, launch._record)
    client.containers.get(left.ident).stop(timeout=1)  # exited, still there: `seat up` finds it down
    for preflight_looks in (True, False):
        if not preflight_looks:
            monkeypatch.setattr(launch.preflight, "run", lambda spec, values: None)
        with pytest.raises(SeatError) as caught:
            launch.up(spec, environ=environ)
        said = f"a container named {name} already exists (exited, {left.ident[:12]}): this SEAT_HOME's seat of {profile}"
        assert caught.value.message.removeprefix("preflight: ") == said and "Conflict" not in str(
            caught.value
        )
        assert caught.value.hint.startswith(f"seat down {profile}")
        assert launch.recorded(profile).ident == left.ident  # the failed up kept the record `seat down` reads
    launch.down(profile, grace=1)  # as the hint says: it frees the name
    assert client.containers.list(all=True, filters={"name": name}) == []


def test_a_seat_that_dies_before_ready_shows_its_last_log_lines(standin_seat):
    spec, environ, _ = standin_seat("echo 'stand-in: the engine core failed to start' >&2; exit 3")
    with pytest.raises(SeatError) as caught:
        launch.up(spec, environ=environ)
    assert "exited before it was ready" in caught.value.message
    assert "the engine core failed to start" in caught.value.message  # not "(no log)"
    assert launch.recorded(spec.profile.name) is None


def test_a_container_removed_while_starting_is_an_error_not_a_traceback(standin_seat):
    """Someone removes the seat's container (docker rm -f) while `seat up` waits for it."""
    spec, environ, name = standin_seat("echo 'stand-in: starting slowly'; exec sleep 600")

    def remove_when_started():
        client = docker.from_env()
        for _ in range(300):
            found = client.containers.list(all=True, filters={"name": name})
            if found:
                found[0].remove(force=True)
                return
            time.sleep(0.1)

    remover = threading.Thread(target=remove_when_started)
    remover.start()
    try:
        with pytest.raises(SeatError) as caught:  # SeatError, not docker's NotFound
            launch.up(spec, environ=environ)
    finally:
        remover.join()
    assert "exited before it was ready" in caught.value.message
    assert launch.recorded(spec.profile.name) is None  # the record does not outlive the container


def test_a_stranger_on_the_registrys_port_is_refused(docker_engine, tmp_path, monkeypatch):
    """A web server that answers /v2/ on the port the loopback registry was to take: no push goes
    to it (the port was free when chosen, not reserved)."""
    import http.server

    from seatkit.image import registry

    class Answer(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    stranger = http.server.HTTPServer(("127.0.0.1", 0), Answer)
    threading.Thread(target=stranger.serve_forever, daemon=True).start()
    monkeypatch.setattr(registry, "free_loopback_port", lambda: stranger.server_address[1])
    try:
        with pytest.raises(SeatError, match="another process.*listens on port"):
            with registry.loopback(tmp_path / "registry"):
                pytest.fail("the stranger was taken for the registry")
    finally:
        stranger.shutdown()


def test_a_base_build_that_fails_midway_leaves_no_tag_to_reuse(docker_engine, tmp_path, monkeypatch):
    """A root that streamed part of itself into `docker import` and then failed used to be tagged
    anyway, and the next build took the tag for a finished base."""
    from seatkit.image import cpu_base

    fake = tmp_path / "bin" / "mmdebstrap"
    fake.parent.mkdir()
    fake.write_text(
        "#!/bin/sh\nmkdir -p /tmp/$$ && echo half > /tmp/$$/half && tar -C /tmp/$$ -c half\n"
        "rm -rf /tmp/$$; echo 'E: the mirror went away' >&2; exit 1\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}:{os.environ['PATH']}")
    monkeypatch.setattr(cpu_base, "wheelhouse", lambda native, say: tmp_path)
    monkeypatch.setattr(cpu_base, "mirror", lambda: "http://127.0.0.1:9/debian")
    tag = f"seatkit-test/half-base:{uuid.uuid4().hex[:8]}"
    before = {i.id for i in docker.from_env().images.list(all=True)}
    with pytest.raises(SeatError, match="the mirror went away"):
        cpu_base.build(tag, profiles.load("cpu-smoke").native, say=lambda m: None)
    client = docker.from_env()
    assert not client.images.list(name=tag.split(":")[0])
    half = [
        i.id
        for i in client.images.list(all=True)
        if i.id not in before and i.attrs.get("Comment") == "Imported from -" and i.attrs["Size"] < 1_000_000
    ]
    assert half == []  # the untagged half image is gone too (other tests' images are not ours to judge)


def test_a_start_cut_short_after_the_container_exists_removes_it(busybox_image, tmp_path, monkeypatch):
    """Ctrl-C (or SIGTERM) between create and start: the record already named the container, and
    the way out removes both."""
    from docker.models.containers import Container

    spec, values = default_spec(busybox_image)
    for knob in ("SEAT_MODEL_BASE_DIR", "SEAT_MODEL_DRAFT_DIR", "SEAT_CACHE_DIR"):
        values[knob] = str(tmp_path)
    values["SEAT_CONTAINER"] = f"seatkit-test-cut-{uuid.uuid4().hex[:8]}"
    monkeypatch.setattr(launch.preflight, "run", lambda spec, values: None)
    seen = []

    def interrupted(self, **kwargs):
        seen.append(launch.recorded(spec.profile.name).ident == self.id)
        raise KeyboardInterrupt

    monkeypatch.setattr(Container, "start", interrupted)
    with pytest.raises(KeyboardInterrupt):
        launch._start(spec, values, image_check)
    assert seen == [True]
    assert docker.from_env().containers.list(all=True, filters={"name": values["SEAT_CONTAINER"]}) == []
    assert launch.recorded(spec.profile.name) is None


def test_helper_containers_that_read_an_image_are_labelled(busybox_image):
    from seatkit import engine
    from seatkit.image.container import created

    with created(busybox_image) as container:
        assert engine.HELPER_LABEL in container.labels
    assert (
        docker.from_env().containers.list(
            all=True, filters={"label": engine.HELPER_LABEL, "id": container.id}
        )
        == []
    )


def test_down_finds_the_container_of_a_seat_up_killed_before_it_recorded_one(busybox_image):
    """kill -9 between the engine's create and the record: the container carries the profile and
    SEAT_HOME in its labels, and `seat down` finds it by them."""
    profile = f"orphan-{uuid.uuid4().hex[:8]}"
    client = docker.from_env()
    container = client.containers.create(
        busybox_image, ["sleep", "600"], network_mode="none", labels=labels(profile)
    )
    container.start()
    stranger = client.containers.run(
        busybox_image,
        ["sleep", "600"],
        detach=True,
        network_mode="none",
        labels={"seatkit.profile": profile, "seatkit.home": "/elsewhere"},
    )
    try:
        assert launch.recorded(profile) is None
        run, was_running = launch.down(profile, grace=1)
        assert was_running and run.ident == container.id
        assert client.containers.list(all=True, filters={"id": container.id}) == []
        with pytest.raises(SeatError, match="nothing `seat up` started on this machine is recorded"):
            launch.down(profile, grace=1)  # another SEAT_HOME's seat is not this one's
        assert client.containers.get(stranger.id).status == "running"
    finally:
        stranger.remove(force=True)
        subprocess.run(["docker", "rm", "-f", container.id], capture_output=True)


def test_a_record_naming_a_container_that_is_not_the_seat_stops_nothing(busybox_image):
    """A record is only text: the container it names must carry the profile's label."""
    client = docker.from_env()
    bystander = client.containers.run(busybox_image, ["sleep", "600"], detach=True, network_mode="none")
    try:
        run = launch.Running(
            "cpu-smoke-docker",
            "docker",
            bystander.id,
            "http://127.0.0.1:9",
            "m",
            "/nonexistent/log",
            time.time(),
        )
        launch._record(run)
        assert launch.status("cpu-smoke-docker")["state"] == "exited"
        assert launch.down("cpu-smoke-docker", grace=1) == (run, False)
        assert client.containers.get(bystander.id).status == "running"
    finally:
        bystander.remove(force=True)


def test_image_inspect_prints_no_terminal_escapes_from_labels(busybox_image, tmp_path):
    tag = f"seatkit-test/escapes:{uuid.uuid4().hex[:8]}"
    (tmp_path / "Dockerfile").write_text(f"FROM {busybox_image}\n")
    subprocess.run(
        [
            "docker",
            "build",
            "-q",
            "--network",
            "none",
            "-t",
            tag,
            "--label",
            "org.opencontainers.image.base.digest=evil\x1b[2J\x1b]0;pwned\x07tag",
            str(tmp_path),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    try:
        done = subprocess.run(
            [str(BIN / "seat"), "image", "inspect", tag], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0 and "\x1b" not in done.stdout and "\x07" not in done.stdout
        assert "base not pinned by digest: built from evil\\x1b[2J\\x1b]0;pwned\\x07tag" in done.stdout, (
            done.stdout
        )
    finally:
        subprocess.run(["docker", "rmi", "-f", tag], capture_output=True)


def test_the_home_label_is_the_real_path_and_a_record_acts_only_on_its_homes_container(
    busybox_image, tmp_path, monkeypatch
):
    """A relative SEAT_HOME labelled its seat 'home', which every other 'home' matched; a linked
    one missed its own; and a record copied into another home stopped the first home's seat."""
    real, link = tmp_path / "real", tmp_path / "link"
    real.mkdir()
    link.symlink_to(real)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SEAT_HOME", "link")  # relative and linked
    profile = f"homes-{uuid.uuid4().hex[:8]}"
    client = docker.from_env()
    ours = client.containers.run(
        busybox_image, ["sleep", "600"], detach=True, network_mode="none", labels=labels(profile)
    )
    try:
        assert ours.labels["seatkit.home"] == str(real)
        monkeypatch.setenv("SEAT_HOME", str(tmp_path / "other"))
        victim = tmp_path / "victim.txt"
        victim.write_text("precious")
        copied = launch.Running(
            profile, "docker", ours.id, "http://127.0.0.1:9", "m", str(victim), time.time()
        )
        launch._record(copied)  # a record copied from the real home into another
        assert launch.down(profile, grace=1) == (copied, False)
        assert client.containers.get(ours.id).status == "running" and victim.read_text() == "precious"
        monkeypatch.setenv("SEAT_HOME", str(real))
        run, stopped = launch.down(profile, grace=1)
        assert stopped and run.ident == ours.id
        assert client.containers.list(all=True, filters={"id": ours.id}) == []
    finally:
        subprocess.run(["docker", "rm", "-f", ours.id], capture_output=True)


def test_one_down_stops_both_a_stale_records_and_an_unrecorded_container(busybox_image):
    """A record of a container removed by hand hid the container of a later `seat up` killed
    before its record: only a second `seat down` found it."""
    profile = f"stale-{uuid.uuid4().hex[:8]}"
    client = docker.from_env()
    gone = client.containers.create(busybox_image, ["true"], labels=labels(profile))
    launch._record(launch.Running(profile, "docker", gone.id, "http://127.0.0.1:9", "m", "", time.time()))
    gone.remove()
    orphan = client.containers.run(
        busybox_image, ["sleep", "600"], detach=True, network_mode="none", labels=labels(profile)
    )
    try:
        run, stopped = launch.down(profile, grace=1)
        assert run.ident == gone.id and stopped
        assert client.containers.list(all=True, filters={"id": orphan.id}) == []
        assert launch.recorded(profile) is None
    finally:
        subprocess.run(["docker", "rm", "-f", orphan.id], capture_output=True)


def test_a_container_removed_while_up_waits_shows_no_earlier_runs_log(busybox_image, tmp_path, monkeypatch):
    """`seat up` of a docker seat kept the last run's log: a container removed during the wait
    (nothing of its own to save) showed those lines as its last words."""
    spec = specs.build(profiles.load("cpu-smoke-docker"))
    values = {
        **spec.values({}),
        "SEAT_IMAGE": busybox_image,
        "SEAT_PORT": str(free_port()),
        "SEAT_CONTAINER": f"seatkit-test-removed-{uuid.uuid4().hex[:8]}",
        "SEAT_MODEL_BASE_DIR": str(tmp_path),
        "SEAT_CACHE_DIR": str(tmp_path),
    }
    monkeypatch.setattr(launch.preflight, "run", lambda spec, values: None)
    launch.log_path(spec.profile.name).parent.mkdir(parents=True, exist_ok=True)
    launch.log_path(spec.profile.name).write_text("an earlier run's last words\n")
    run = launch._start(spec, values)
    try:
        docker.from_env().containers.get(run.ident).remove(force=True)
        with pytest.raises(SeatError, match="exited before it was ready") as caught:
            launch.wait_ready(run, 60, lambda stage, t: None)
        assert "an earlier run's" not in caught.value.message
    finally:
        subprocess.run(["docker", "rm", "-f", run.ident], capture_output=True)
        layout.run_record(spec.profile.name).unlink(missing_ok=True)


def test_no_local_image_can_take_a_digest_reference_only_a_pull_gives(busybox_image, tmp_path):
    """`seat build` builds FROM the base's name@digest and records that pin: the engine must refuse
    every way a local image could claim a digest it was not pulled by (a tag, a loaded archive's
    manifest or its repositories file), or another base would pass as the pinned one."""
    forged = "seatkit-test/forged-base@sha256:" + "ab" * 32
    tagged = subprocess.run(["docker", "tag", busybox_image, forged], capture_output=True, text=True)
    assert tagged.returncode != 0 and "digest" in tagged.stderr
    archive = tmp_path / "archive"
    archive.mkdir()
    saved = subprocess.run(["docker", "save", busybox_image], capture_output=True, check=True)
    subprocess.run(["tar", "-C", str(archive), "-x"], input=saved.stdout, check=True)
    manifest = json.loads((archive / "manifest.json").read_text())
    layer = manifest[0]["Layers"][0].split("/")[0]
    for claim in ("manifest", "repositories"):
        manifest[0]["RepoTags"] = [forged] if claim == "manifest" else []
        (archive / "manifest.json").write_text(json.dumps(manifest))
        name, digest = forged.split("@")
        (archive / "repositories").write_text(json.dumps({name: {digest: layer}}))
        if claim == "manifest":
            (archive / "repositories").unlink()
        tar = subprocess.run(["tar", "-C", str(archive), "-c", "."], capture_output=True, check=True)
        subprocess.run(["docker", "load"], input=tar.stdout, capture_output=True)
        with pytest.raises(docker.errors.ImageNotFound):
            docker.from_env().images.get(forged)
    listed = docker.from_env().images.list()
    assert not [d for i in listed for d in i.attrs.get("RepoDigests") or [] if "forged-base" in d]
