"""The seat's image against a real docker engine: pin from a loopback registry, build, run, verify.

Stand-ins replace what cannot be had here: small bases laid out like the vLLM image (busybox,
and Debian with a Python 3.12 venv), an overlay made by the test and locked by the kit. The seat's
image is built once (the `built` fixture); a test builds another only to prove something of the
build itself (its reproducibility, a plain `docker build`, BuildKit, a base that fails it).
"""

import json
import os
import re
import subprocess
import time

import docker
import pytest
import yaml
from conftest import BIN, free_port
from plain_repo import JUNK, repository_copy

from seatkit.errors import SeatError
from seatkit.image import build, overlay, prebuilt, vouch
from seatkit.seat import overlay_lock, profiles

VLLM = "/opt/venv/lib/python3.12/site-packages/vllm"
TABLE = bytes(range(256)) * 2048  # 512 KiB the base already has byte for byte
OVERLAY = {
    "__init__.py": b"",
    "version.py": b"__version__ = 'overlay'\n",
    "config/__init__.py": b"",
    "config/speculative.py": b"METHODS = ('eagle', 'dspark')\n",
    "v1/__init__.py": b"",
    "v1/spec_decode/__init__.py": b"",
    "v1/spec_decode/dspark.py": b"from vllm.models.deepseek_v4 import DeepSeekV4DSpark\n\n\n"
    b"class DSparkProposer(DeepSeekV4DSpark):\n    pass\n",
    "kernels/table.json": TABLE,
}
BASE = {  # what the base's own vllm package has: compiled code and the models the overlay lacks
    "__init__.py": b"",
    "version.py": b"__version__ = 'base'\n",
    "kernels/table.json": TABLE,
    "_C.abi3.so": b"\x7fELF compiled extension",
    "models/__init__.py": b"",
    "models/deepseek_v4/__init__.py": b"class DeepSeekV4DSpark:\n    pass\n",
}
SMOKE = ["vllm.config.speculative", "vllm.v1.spec_decode.dspark"]


def write_tree(root, files):
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)


def pushed_base(client, registry, tmp_path, from_image, files, name):
    """A base image with a vllm package, pushed to the loopback registry: (repository, tag, digest)."""
    ctx = tmp_path / f"base-{name}"
    write_tree(ctx / "vllm", files)
    (ctx / "Dockerfile").write_text(f"FROM {from_image}\nCOPY vllm/ {VLLM}/\n")
    repository = f"{registry}/seatkit-test/vllm-{name}"
    client.images.build(path=str(ctx), tag=f"{repository}:stand-in", rm=True)
    return repository, "stand-in", pushed_digest(client, repository, "stand-in")


def pushed_digest(client, repository, tag):
    for line in client.images.push(repository, tag=tag, stream=True, decode=True):
        assert "error" not in line, line
    return client.images.get(f"{repository}:{tag}").attrs["RepoDigests"][0].split("@")[1]


@pytest.fixture(scope="module")
def stand_ins(docker_engine, registry, busybox_image, py312_image, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("image")
    client = docker.DockerClient(base_url=docker_engine)  # set up before any test's DOCKER_HOST
    write_tree(tmp / "overlay", OVERLAY)
    lock = overlay.lock_from(tmp / "overlay", "https://example.invalid/seat-overlay@" + "ab" * 20)
    (tmp / "overlay.lock").write_text(lock.dump())
    no_models = {k: v for k, v in BASE.items() if not k.startswith("models/")}
    return {
        "tmp": tmp,
        "lock": lock,
        "bases": {
            "py": pushed_base(client, registry, tmp, py312_image, BASE, "py"),
            "py-no-models": pushed_base(client, registry, tmp, py312_image, no_models, "py-no-models"),
            "busybox": pushed_base(client, registry, tmp, busybox_image, BASE, "busybox"),
        },
    }


def profile_for(stand_ins, base, name, pinned=True, smoke=SMOKE):
    repository, tag, digest = stand_ins["bases"][base]
    path = stand_ins["tmp"] / f"{name}.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "extends": profiles.DEFAULT_PROFILE,
                "image": {
                    "name": repository,
                    "tag": tag,
                    "digest": digest if pinned else None,
                    "smoke_imports": smoke,
                },
            }
        )
    )
    return path


def seat(*args, check=True):
    done = subprocess.run(
        [str(BIN / "seat"), *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={
            "COLUMNS": "200",
            "PATH": "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
            "DOCKER_HOST": os.environ["DOCKER_HOST"],
            "SEAT_HOME": os.environ["SEAT_HOME"],
        },
    )  # this run's engine and home
    if check:
        assert done.returncode == 0, done.stderr[-3000:]
    return done


def seat_build(stand_ins, profile_path, *extra):
    done = seat(
        "build",
        str(profile_path),
        "--lock",
        str(stand_ins["tmp"] / "overlay.lock"),
        "--overlay",
        str(stand_ins["tmp"] / "overlay"),
        "--json",
        *extra,
    )
    return json.loads(done.stdout), done.stderr


def run(image, *command):
    argv = ["docker", "run", "--rm", "--network", "none", image, *command]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def built(stand_ins):
    """The seat's image, built once: its profile names the base by tag, `seat image pin` pins it
    from the registry, and `seat build` builds FROM that digest. (path, result, build log)"""
    path = profile_for(stand_ins, "py", "built", pinned=False)
    assert stand_ins["bases"]["py"][2] in seat("image", "pin", str(path)).stdout
    result, log = seat_build(stand_ins, path)
    return path, result, log


def test_pin_resolves_the_digest_from_a_registry_and_the_build_uses_it(stand_ins, built):
    refused = seat(
        "build",
        str(profile_for(stand_ins, "py", "unpinned", pinned=False)),
        "--lock",
        str(stand_ins["tmp"] / "overlay.lock"),
        "--overlay",
        str(stand_ins["tmp"] / "overlay"),
        check=False,
    )
    assert refused.returncode == 1 and "not pinned by digest" in refused.stderr
    path, result, log = built
    repository, tag, digest = stand_ins["bases"]["py"]
    assert yaml.safe_load(path.with_suffix(".lock").read_text())["digest"] == digest
    assert result["base"] == f"{repository}@{digest}" and result["base_digest"] == digest
    assert "seatkit smoke test: imported vllm.config.speculative vllm.v1.spec_decode.dspark" in log
    assert result["tag"].startswith("seatkit/built:overlay-abababababab-")
    # Two files differ from the base (version.py and the overlay's own); the table and __init__ do not.
    assert result["skipped"] == 2 and result["copied"] == len(OVERLAY) - 2

    image = result["tag"]
    listing = run(image, "sh", "-c", f"cat {VLLM}/version.py; ls {VLLM} {VLLM}/models/deepseek_v4")
    assert listing.returncode == 0, listing.stderr
    assert "__version__ = 'overlay'" in listing.stdout  # the overlay wins where both have a file
    assert "_C.abi3.so" in listing.stdout and "__init__.py" in listing.stdout  # the base's stay
    imported = run(
        image, "python3", "-c", "from vllm.v1.spec_decode.dspark import DSparkProposer; print('ok')"
    )
    assert imported.stdout.strip() == "ok", imported.stderr

    provenance = json.loads(seat("image", "inspect", image, "--json").stdout)
    labels = provenance["labels"]
    lock = stand_ins["lock"]
    assert labels["org.opencontainers.image.base.digest"] == f"{repository}@{digest}"
    assert labels["org.opencontainers.image.base.name"] == f"{repository}:{tag}"
    assert (
        labels["io.seatkit.overlay.commit"] == lock.commit and labels["io.seatkit.overlay.tree"] == lock.tree
    )
    assert labels["io.seatkit.overlay.lock.sha256"] == lock.sha256
    assert labels["io.seatkit.profile"] == "built" and labels["org.opencontainers.image.revision"]
    assert provenance["healthcheck"]["Test"] == ["CMD", "/opt/seatkit/health.sh"]
    assert not provenance["entrypoint"]  # the seat's command runs as given

    verified = seat(
        "overlay", "verify", "--image", image, "--lock", str(stand_ins["tmp"] / "overlay.lock"), "--json"
    )
    problems = json.loads(verified.stdout)
    assert problems["missing"] == [] and problems["changed"] == []
    assert "_C.abi3.so" in problems["extra"]


def test_the_image_seat_build_recorded_is_verified_until_its_tag_or_a_pin_moves(
    stand_ins, built, busybox_image, monkeypatch
):
    """Equality with the record on the real engine: the id built, from the pins in force (here the
    stand-in lock is the one in force); the shipped lock in force, or another image under the tag,
    and `seat overlay verify --profile` says what differs, as `seat up` marks it."""
    path, result, _ = built
    profile, image = profiles.load(str(path)), result["tag"]
    monkeypatch.setattr(vouch, "load", lambda: stand_ins["lock"])
    assert vouch.image_check(profile, image) == (result["image"], None)

    def verify():
        return seat("overlay", "verify", "--image", image, "--profile", str(path), check=False)

    shipped = verify()  # the kit's own lock is in force in the `seat` it runs
    kit = overlay_lock.load().sha256
    assert shipped.returncode == 1 and shipped.stdout.startswith("NOT verified: image sha256:"), shipped
    said = " ".join(shipped.stdout.split())
    assert f"(overlay lock {stand_ins['lock'].sha256[:12]}.., pins now {kit[:12]}..)" in said
    client = docker.from_env()
    client.images.get(busybox_image).tag(*image.rsplit(":", 1))
    try:
        retagged = verify()
        why = vouch.image_check(profile, image)[1]
    finally:
        client.images.get(result["image"]).tag(*image.rsplit(":", 1))  # the seat's tag on the build
    assert retagged.returncode == 1 and "retagged or rebuilt since" in " ".join(retagged.stdout.split())
    assert why is not None and why.startswith(f"image {client.images.get(busybox_image).id[:19]}")


def test_the_overlay_layer_is_the_same_across_builds_and_the_delta_is_smaller(stand_ins):
    path = profile_for(stand_ins, "py", "reproducible")
    first, _ = seat_build(stand_ins, path)
    second, _ = seat_build(stand_ins, path, "--no-cache")
    assert first["overlay_layer"] == second["overlay_layer"]
    full, _ = seat_build(stand_ins, path, "--full")
    assert full["copied"] == len(OVERLAY) and full["overlay_layer"] != first["overlay_layer"]
    assert full["overlay_layer_bytes"] > first["overlay_layer_bytes"] + len(TABLE) // 2
    print(f"overlay layer: delta {first['overlay_layer_bytes']} B, full {full['overlay_layer_bytes']} B")


def test_a_tampered_overlay_fails_the_build_and_overlay_verify_names_a_tampered_image(
    stand_ins, built, tmp_path
):
    path, result, _ = built
    changed = stand_ins["tmp"] / "overlay" / "config" / "speculative.py"
    original = changed.read_bytes()
    changed.write_bytes(original + b"# edited\n")
    try:
        refused = seat(
            "build",
            str(path),
            "--lock",
            str(stand_ins["tmp"] / "overlay.lock"),
            "--overlay",
            str(stand_ins["tmp"] / "overlay"),
            check=False,
        )
    finally:
        changed.write_bytes(original)
    assert refused.returncode == 1 and "does not match the lock" in refused.stderr
    assert "config/speculative.py" in refused.stderr and "nothing was built" in refused.stderr

    (tmp_path / "Dockerfile").write_text(f"FROM {result['tag']}\nRUN echo '# edited' >> {VLLM}/version.py\n")
    client = docker.from_env()
    client.images.build(path=str(tmp_path), tag="seatkit-test/tampered:1", rm=True)
    verified = seat(
        "overlay",
        "verify",
        "--image",
        "seatkit-test/tampered:1",
        "--lock",
        str(stand_ins["tmp"] / "overlay.lock"),
        "--json",
        check=False,
    )
    assert verified.returncode == 1 and json.loads(verified.stdout)["changed"] == ["version.py"]


def test_a_base_missing_what_the_overlay_imports_fails_the_smoke_step(stand_ins):
    path = profile_for(stand_ins, "py-no-models", "no-models")
    done = seat(
        "build",
        str(path),
        "--lock",
        str(stand_ins["tmp"] / "overlay.lock"),
        "--overlay",
        str(stand_ins["tmp"] / "overlay"),
        check=False,
    )
    assert done.returncode == 1
    assert "the base image lacks something the overlay depends on" in done.stderr
    assert "vllm.v1.spec_decode.dspark: ModuleNotFoundError: No module named 'vllm.models'" in done.stderr


def test_the_healthcheck_turns_healthy_when_the_server_answers(stand_ins):
    path = profile_for(stand_ins, "busybox", "health", smoke=[])
    result, log = seat_build(stand_ins, path)
    assert "no modules to import, skipped" in log
    port = free_port()
    client = docker.from_env()
    container = client.containers.run(
        result["tag"],
        [
            "sh",
            "-c",
            "mkdir -p /tmp/www && echo ok > /tmp/www/health && "
            'exec httpd -f -p "127.0.0.1:$SEAT_PORT" -h /tmp/www',
        ],
        detach=True,
        network_mode="host",
        environment={"SEAT_PORT": str(port)},
        healthcheck={
            "test": ["CMD", "/opt/seatkit/health.sh"],
            "interval": 500_000_000,
            "start_period": 0,
            "retries": 3,
            "timeout": 2_000_000_000,
        },
    )
    try:
        deadline = time.monotonic() + 30
        while (state := client.api.inspect_container(container.id)["State"]).get("Health", {}).get(
            "Status"
        ) != "healthy":
            assert state["Running"] and time.monotonic() < deadline, state
            time.sleep(0.3)
    finally:
        container.remove(force=True)


def test_buildkit_builds_the_same_context(stand_ins, tmp_path):
    """Debian's engine with BuildKit (no `# syntax=` line to pull) takes the context the kit writes."""
    repository, _, digest = stand_ins["bases"]["busybox"]
    profile = profiles.load(str(profile_for(stand_ins, "busybox", "buildkit", smoke=[])))
    ctx = build.context(stand_ins["lock"], stand_ins["tmp"] / "overlay")
    args = build.build_args(profile, stand_ins["lock"], f"{repository}@{digest}")
    done = subprocess.run(
        [
            "/usr/bin/docker",
            "build",
            "-q",
            "--network",
            "none",
            "-t",
            "seatkit-test/buildkit:1",
            *[f"--build-arg={k}={v}" for k, v in args.items()],
            "-",
        ],
        input=ctx.data,
        capture_output=True,
        timeout=300,
        env={"DOCKER_BUILDKIT": "1", "PATH": "/usr/bin:/bin", "DOCKER_HOST": os.environ["DOCKER_HOST"]},
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    listing = run("seatkit-test/buildkit:1", "cat", f"{VLLM}/version.py")
    assert listing.stdout == "__version__ = 'overlay'\n", listing.stderr


def test_a_base_whose_package_path_runs_through_a_symlink_is_refused(stand_ins, busybox_image, tmp_path):
    """COPY would replace the link with a folder and cut the base's own layout."""
    ctx = tmp_path / "linked"
    write_tree(ctx / "python3.11" / "site-packages" / "vllm", BASE)
    (ctx / "python3.12").symlink_to("python3.11")
    (ctx / "Dockerfile").write_text(f"FROM {busybox_image}\nCOPY . /opt/venv/lib/\n")
    docker.from_env().images.build(path=str(ctx), tag="seatkit-test/linked:1", rm=True)
    path = stand_ins["tmp"] / "linked.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "extends": profiles.DEFAULT_PROFILE,
                "image": {"name": "seatkit-test/linked", "tag": "1", "smoke_imports": []},
            }
        )
    )
    done = seat(
        "build",
        str(path),
        "--allow-unpinned",
        "--lock",
        str(stand_ins["tmp"] / "overlay.lock"),
        "--overlay",
        str(stand_ins["tmp"] / "overlay"),
        check=False,
    )
    assert done.returncode == 1
    assert (
        "/opt/venv/lib/python3.12 -> /opt/venv/lib/python3.11" in done.stderr
        and "image.vllm_dir" in done.stderr
    )


def test_building_a_native_profile_or_a_missing_overlay_is_a_clear_error(stand_ins, tmp_path):
    with pytest.raises(SeatError, match="runs natively"):
        build.build(profiles.load("cpu-smoke"), stand_ins["lock"], stand_ins["tmp"] / "overlay")
    with pytest.raises(SeatError, match="no overlay at"):
        build.build(
            profiles.load(str(profile_for(stand_ins, "py", "missing"))),
            stand_ins["lock"],
            tmp_path / "absent",
        )


def plain_build(root, base, tag):
    """What an operator types first: `docker build --build-arg BASE_IMAGE=... -t NAME .` (and
    --force-rm: a build meant to fail leaves no container behind)."""
    done = subprocess.run(
        [
            "docker",
            "build",
            "--force-rm",
            "--network",
            "none",
            "--build-arg",
            f"BASE_IMAGE={base}",
            "-t",
            tag,
            ".",
        ],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return done.returncode, done.stdout + done.stderr


def test_a_plain_docker_build_from_the_repository_passes_the_same_checks_and_labels(
    stand_ins, built, tmp_path
):
    path, kit, kit_log = built
    repository, _, digest = stand_ins["bases"]["py"]
    root = repository_copy(
        tmp_path / "repo", profiles.load(str(path)), stand_ins["lock"], stand_ins["tmp"] / "overlay"
    )
    code, log = plain_build(root, f"{repository}@{digest}", "seatkit-test/plain:1")
    assert code == 0, log[-3000:]
    smoke = "seatkit smoke test: imported vllm.config.speculative vllm.v1.spec_decode.dspark"
    assert smoke in log and smoke in kit_log
    sent = re.search(r"Sending build context to Docker daemon\s+([\d.]+)([kMG]?B)", log)
    assert sent, log[:2000]  # the legacy builder says how much it sent
    size = float(sent.group(1)) * {"B": 1, "kB": 1e3, "MB": 1e6, "GB": 1e9}[sent.group(2)]
    assert len(TABLE) < size < JUNK  # the overlay went, runs/ and the rest stayed out

    plain, seat_built = build.labels("seatkit-test/plain:1"), build.labels(kit["tag"])
    # The b12x labels are recorded by `seat build` alone (it looks inside the base); a plain build
    # leaves them empty, as the Dockerfile says.
    keys = [
        k
        for k in seat_built["labels"]
        if (k.startswith("io.seatkit.") or ".base." in k) and not k.startswith("io.seatkit.b12x.")
    ]
    assert (
        plain["labels"]["io.seatkit.b12x.overlay"] == "" and seat_built["labels"]["io.seatkit.b12x.overlay"]
    )
    assert len(keys) == 8 and {k: plain["labels"][k] for k in keys} == {
        k: seat_built["labels"][k] for k in keys
    }
    assert plain["labels"]["io.seatkit.overlay.lock.sha256"] == stand_ins["lock"].sha256
    assert (plain["entrypoint"], plain["healthcheck"]) == (
        seat_built["entrypoint"],
        seat_built["healthcheck"],
    )

    # the whole overlay is copied (the table the base already has too): a bigger layer, same files
    layers = {
        name: build.overlay_layer(tag, f"{repository}@{digest}")["overlay_layer_bytes"]
        for name, tag in (("plain", "seatkit-test/plain:1"), ("kit", kit["tag"]))
    }
    assert layers["plain"] > layers["kit"] + len(TABLE) // 2
    for image in ("seatkit-test/plain:1", kit["tag"]):
        problems = json.loads(
            seat(
                "overlay",
                "verify",
                "--image",
                image,
                "--lock",
                str(stand_ins["tmp"] / "overlay.lock"),
                "--json",
            ).stdout
        )
        assert problems["missing"] == [] and problems["changed"] == [] and "__pycache__" not in str(problems)
        assert run(image, "echo", "served").stdout.strip() == "served"
    print(f"overlay layer: plain docker build {layers['plain']} B, seat build {layers['kit']} B")


def test_a_plain_build_whose_dockerfile_defaults_miss_the_lock_fails_naming_seat_render(stand_ins, tmp_path):
    path = profile_for(stand_ins, "busybox", "stale", smoke=[])
    root = repository_copy(
        tmp_path / "repo", profiles.load(str(path)), stand_ins["lock"], stand_ins["tmp"] / "overlay"
    )
    lock = stand_ins["lock"]
    (root / "overlay" / "overlay.lock").write_text(lock.dump().replace(lock.source, lock.source + "-moved"))
    repository, _, digest = stand_ins["bases"]["busybox"]
    code, log = plain_build(root, f"{repository}@{digest}", "seatkit-test/stale:1")
    assert code != 0 and f"the labels say {lock.sha256}" in log and "run `seat render`" in log


def test_a_prebuilt_image_is_compared_with_the_lock_as_facts(stand_ins, tmp_path, registry, busybox_image):
    """The stand-in for the author's pushed image: the overlay as built from a working tree that
    still had the models/ folder the lock lacks, and one file edited after the lock."""
    client = docker.from_env()
    pushed = dict(
        OVERLAY,
        **{
            "models/deepseek_v4/__init__.py": b"class DeepSeekV4DSpark: pass\n",
            "version.py": b"__version__ = 'pushed'\n",
        },
    )
    del pushed["kernels/table.json"]
    repository, tag, digest = pushed_base(client, registry, tmp_path, busybox_image, pushed, "prebuilt")
    path = stand_ins["tmp"] / "prebuilt.yaml"
    path.write_text(
        yaml.safe_dump(
            {"extends": "deepspark-prebuilt", "image": {"name": repository, "tag": tag, "smoke_imports": []}}
        )
    )

    def up():
        return subprocess.run(
            [str(BIN / "seat"), "up", str(path)],
            capture_output=True,
            text=True,
            timeout=600,
            env={
                "COLUMNS": "200",
                "PATH": "/usr/local/bin:/usr/bin:/bin",
                "DOCKER_HOST": os.environ["DOCKER_HOST"],
                "SEAT_HOME": str(tmp_path / "home"),
            },
        )

    unpinned = up()
    assert (
        unpinned.returncode == 1
        and "not pinned by digest" in unpinned.stderr
        and "seat image pin" in unpinned.stderr
    )
    seat("image", "pin", str(path))
    profile = profiles.load(str(path))
    found = prebuilt.compare(profile, stand_ins["lock"])
    assert found["image"] == f"{repository}@{digest}" and found["same"] is False
    assert found["missing"] == ["kernels/table.json"] and found["changed"] == ["version.py"]
    assert found["extra"] == ["models/deepseek_v4/__init__.py"]
    assert found["matching"] == len(OVERLAY) - 2 and found["locked"] == len(OVERLAY)
    # `seat up` states the differences from the shipped lock and goes on to its preflight, which
    # stops it here (no models, no GPUs on this machine), not the differences
    started = up()
    facts = [line.removeprefix("fact: ") for line in started.stdout.splitlines() if line.startswith("fact: ")]
    assert facts == prebuilt.facts(prebuilt.compare(profile))
    assert (
        facts[0].startswith(f"{repository}@{digest}: ")
        and f"of {len(overlay_lock.load().files)} locked" in facts[0]
    )
    assert started.returncode == 1 and "preflight" in started.stderr.lower(), started.stderr
    assert not any(
        "lock" in line for line in started.stderr.splitlines() if line.startswith(("error", "seat preflight"))
    )  # it stopped at preflight


def test_a_prebuilt_image_without_the_vllm_folder_is_a_fact_not_a_failure(stand_ins, tmp_path):
    """An image keeping vllm elsewhere: `seat up` stopped at the compare ('has no ..., pass --dir',
    an option `seat up` lacks) instead of stating it and going on to its preflight."""
    repository, tag, digest = stand_ins["bases"]["busybox"]
    path = tmp_path / "prebuilt-elsewhere.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "extends": "deepspark-prebuilt",
                "image": {
                    "name": repository,
                    "tag": tag,
                    "digest": digest,
                    "vllm_dir": "/opt/elsewhere/vllm",
                    "smoke_imports": [],
                },
            }
        )
    )
    found = prebuilt.compare(profiles.load(str(path)), stand_ins["lock"])
    assert found["package"] is False and found["missing"] == sorted(stand_ins["lock"].files)
    assert found["matching"] == 0 and found["same"] is False
    started = subprocess.run(
        [str(BIN / "seat"), "up", str(path)],
        capture_output=True,
        text=True,
        timeout=600,
        env={
            "COLUMNS": "200",
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "DOCKER_HOST": os.environ["DOCKER_HOST"],
            "SEAT_HOME": str(tmp_path / "home"),
        },
    )
    assert "fact: no folder at /opt/elsewhere/vllm" in started.stdout, started.stdout + started.stderr
    assert started.returncode == 1 and "preflight" in started.stderr.lower(), started.stderr
    assert "--dir" not in started.stderr


def test_seat_up_compares_the_image_seat_image_names_not_the_pinned_one(stand_ins, tmp_path):
    """SEAT_IMAGE runs another image: the facts described the pinned one, which was not started."""
    repository, tag, digest = stand_ins["bases"]["busybox"]
    other = "{}@{}".format(*stand_ins["bases"]["py-no-models"][::2])
    path = tmp_path / "prebuilt-overridden.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "extends": "deepspark-prebuilt",
                "image": {"name": repository, "tag": tag, "digest": digest, "smoke_imports": []},
            }
        )
    )
    started = subprocess.run(
        [str(BIN / "seat"), "up", str(path)],
        capture_output=True,
        text=True,
        timeout=600,
        env={
            "COLUMNS": "200",
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "DOCKER_HOST": os.environ["DOCKER_HOST"],
            "SEAT_IMAGE": other,
            "SEAT_HOME": str(tmp_path / "home"),
        },
    )
    facts = [line.removeprefix("fact: ") for line in started.stdout.splitlines() if line.startswith("fact: ")]
    assert facts and facts[0].startswith(f"{other}: "), started.stdout + started.stderr
    assert facts == prebuilt.facts(prebuilt.compare(profiles.load(str(path)), image=other))
    assert started.returncode == 1 and "preflight" in started.stderr.lower(), started.stderr


def test_an_unpinned_prebuilt_profile_still_runs_the_image_seat_image_names(stand_ins, tmp_path):
    """The compare asked for the profile's own pin first, and refused with a hint naming a flag
    `seat up` lacks, though the script's preflight only warns of the chosen image's tag."""
    repository, tag, _ = stand_ins["bases"]["busybox"]
    other = "{}@{}".format(*stand_ins["bases"]["py-no-models"][::2])
    path = tmp_path / "prebuilt-unpinned.yaml"
    path.write_text(
        yaml.safe_dump(
            {"extends": "deepspark-prebuilt", "image": {"name": repository, "tag": tag, "smoke_imports": []}}
        )
    )
    started = subprocess.run(
        [str(BIN / "seat"), "up", str(path)],
        capture_output=True,
        text=True,
        timeout=600,
        env={
            "COLUMNS": "200",
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "DOCKER_HOST": os.environ["DOCKER_HOST"],
            "SEAT_IMAGE": other,
            "SEAT_HOME": str(tmp_path / "home"),
        },
    )
    assert f"fact: {other}: " in started.stdout, started.stdout + started.stderr
    assert "--allow-unpinned" not in started.stderr and "not pinned" not in started.stderr


def test_an_image_whose_vllm_folder_holds_an_absolute_link_names_it(stand_ins, tmp_path, busybox_image):
    """A package installed from a working tree can hold links to absolute paths: the safe tar
    filter refused the member and `overlay verify --image` (and `seat up` on a prebuilt image)
    ended in a tarfile traceback. The link is a finding, never made on this machine."""
    ctx = tmp_path / "abslink"
    write_tree(ctx / "vllm", {"__init__.py": b"VERSION = 'x'\n"})
    (ctx / "vllm" / "lib").symlink_to("/usr/lib")
    (ctx / "Dockerfile").write_text(f"FROM {busybox_image}\nCOPY vllm/ {VLLM}/\n")
    client = docker.from_env()
    tag = f"seatkit-test/abslink:{free_port()}"
    client.images.build(path=str(ctx), tag=tag, rm=True)
    try:
        done = seat(
            "overlay", "verify", "--image", tag, "--lock", str(stand_ins["tmp"] / "overlay.lock"), check=False
        )
    finally:
        client.images.remove(tag, force=True)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert "links: 1\n  lib -> /usr/lib\n" in done.stdout, done.stdout


def test_links_in_a_prebuilt_images_vllm_are_facts_not_a_refusal(
    stand_ins, tmp_path, registry, busybox_image
):
    """A package built elsewhere may link anywhere in its image: copying it out refused such links
    as unsafe, so `seat up` stopped instead of stating them."""
    client = docker.from_env()
    ctx = tmp_path / "linked"
    write_tree(ctx / "vllm", {k: v for k, v in OVERLAY.items() if k != "version.py"})
    (ctx / "vllm" / "version.py").symlink_to("/etc/hostname")  # a locked file, now a link out
    (ctx / "vllm" / "libs").symlink_to("../../lib")  # a folder linked outside the package
    (ctx / "Dockerfile").write_text(f"FROM {busybox_image}\nCOPY vllm/ {VLLM}/\n")
    repository = f"{registry}/seatkit-test/vllm-linked"
    client.images.build(path=str(ctx), tag=f"{repository}:stand-in", rm=True)
    digest = pushed_digest(client, repository, "stand-in")
    path = tmp_path / "prebuilt-linked.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "extends": "deepspark-prebuilt",
                "image": {"name": repository, "tag": "stand-in", "digest": digest, "smoke_imports": []},
            }
        )
    )
    found = prebuilt.compare(profiles.load(str(path)), stand_ins["lock"])
    assert found["links"] == ["libs -> ../../lib", "version.py -> /etc/hostname"]
    assert found["changed"] == ["version.py"] and found["missing"] == []
    started = subprocess.run(
        [str(BIN / "seat"), "up", str(path)],
        capture_output=True,
        text=True,
        timeout=600,
        env={
            "COLUMNS": "200",
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "DOCKER_HOST": os.environ["DOCKER_HOST"],
            "SEAT_HOME": str(tmp_path / "home"),
        },
    )
    assert "fact: " in started.stdout and "unsafe" not in started.stderr, started.stdout + started.stderr
    assert started.returncode == 1 and "preflight" in started.stderr.lower(), started.stderr
