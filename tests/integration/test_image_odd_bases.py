# ruff: noqa: F811  (fixtures imported from the test module that defines them)
"""`seat build` on an odd base, on the real docker engine (the stand-ins of test_image): a base
compiled to unchecked-hash bytecode, which Python runs instead of the overlay's source unless the
build removes it."""

import json

import docker
import pytest
from test_image import BASE, OVERLAY, VLLM, profile_for, pushed_digest, run, seat, write_tree

from seatkit.image import overlay


def pushed(client, registry, ctx, dockerfile, name):
    """A base built from dockerfile over the stand-in vllm package: (repository, tag, digest)."""
    write_tree(ctx / "vllm", BASE)
    (ctx / "Dockerfile").write_text(dockerfile)
    repository = f"{registry}/seatkit-test/vllm-{name}"
    client.images.build(path=str(ctx), tag=f"{repository}:stand-in", rm=True)
    return repository, "stand-in", pushed_digest(client, repository, "stand-in")


@pytest.fixture(scope="module")
def odd(docker_engine, registry, py312_image, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("odd-bases")
    client = docker.DockerClient(base_url=docker_engine)
    write_tree(tmp / "overlay", OVERLAY)
    lock = overlay.lock_from(tmp / "overlay", "https://example.invalid/seat-overlay@" + "ab" * 20)
    (tmp / "overlay.lock").write_text(lock.dump())
    compiled = (
        f"FROM {py312_image}\nCOPY vllm/ {VLLM}/\n"
        f"RUN /opt/venv/bin/python -m compileall -q --invalidation-mode unchecked-hash {VLLM}\n"
    )
    return {
        "tmp": tmp,
        "lock": lock,
        "bases": {
            "unchecked": pushed(client, registry, tmp / "unchecked", compiled, "unchecked"),
        },
    }


def build(odd, path):
    args = ["--lock", str(odd["tmp"] / "overlay.lock"), "--overlay", str(odd["tmp"] / "overlay")]
    return seat("build", str(path), *args, "--json", check=False)


def test_the_overlays_source_runs_over_a_base_compiled_to_unchecked_hash_bytecode(odd):
    """Python never reads the source of an unchecked-hash .pyc: the build removes the base's .pyc of
    each file it copies and keeps the rest."""
    path = profile_for(odd, "unchecked", "unchecked", smoke=["vllm.version"])
    done = build(odd, path)
    assert done.returncode == 0, done.stderr[-3000:]
    tag = json.loads(done.stdout)["tag"]
    ran = run(tag, "/opt/venv/bin/python", "-c", "import vllm.version as v; print(v.__version__)")
    assert ran.stdout.strip() == "overlay", (ran.stdout, ran.stderr)
    listed = run(tag, "ls", f"{VLLM}/__pycache__").stdout.split()
    assert "__init__.cpython-312.pyc" in listed and not any(n.startswith("version.") for n in listed)
    assert run(tag, "ls", "/opt/seatkit/copied").returncode != 0  # the list is gone with the build
