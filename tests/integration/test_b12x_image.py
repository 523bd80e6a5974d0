"""The b12x the image carries, through the real engine: labels written by `seat build` name it with
the hash of gemm/dense.py as the image holds it; a pinned b12x overlay (a stand-in "patched" file)
lands over the b12x package, is verified like the vllm overlay, and a changed file stops the start."""

import hashlib
import json
import subprocess
import uuid

import pytest
import yaml
from conftest import BIN

from seatkit.image import b12x, overlay, vouch
from seatkit.seat import overlay_lock

SITE = "/opt/venv/lib/python3.12/site-packages"
PUBLIC_DENSE = b"def gemm(a, b):\n    return 'public tile'\n"
PATCHED_DENSE = b"def gemm(a, b, expected_m=None):\n    return 'ported tile'\n"


def write(root, files):
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)


def seat(*args):
    return subprocess.run([str(BIN / "seat"), *args], capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def world(busybox_image, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("b12x")
    base = f"seatkit-test/b12x-base-{uuid.uuid4().hex[:8]}"
    write(
        tmp / "base",
        {
            "vllm/__init__.py": b"",
            "b12x/__init__.py": b"",
            "b12x/gemm/__init__.py": b"",
            "b12x/gemm/dense.py": PUBLIC_DENSE,
        },
    )
    (tmp / "base" / "Dockerfile").write_text(
        f"FROM {busybox_image}\nCOPY vllm/ {SITE}/vllm/\nCOPY b12x/ {SITE}/b12x/\n"
        'LABEL local-inference.b12x.commit="0ff2847b0c55c599c8acabb32e694ce07faa1247"\n'
    )
    subprocess.run(
        ["docker", "build", "-q", "--network", "none", "-t", f"{base}:1", str(tmp / "base")],
        check=True,
        capture_output=True,
        timeout=300,
    )
    write(tmp / "vllm", {"__init__.py": b"", "config/speculative.py": b"METHODS = ('dspark',)\n"})
    (tmp / "overlay.lock").write_text(
        overlay.lock_from(tmp / "vllm", "https://example.invalid/o@" + "ab" * 20).dump()
    )
    write(tmp / "b12x", {"gemm/dense.py": PATCHED_DENSE})
    lock = seat(
        "overlay",
        "lock",
        "--from",
        str(tmp / "b12x"),
        "--source",
        "https://example.invalid/b12x-patched@" + "cd" * 20,
        "--path",
        "b12x",
        "--out",
        str(tmp / "b12x.lock"),
    )
    assert lock.returncode == 0, lock.stderr
    profile = tmp / "b12x-seat.yaml"
    profile.write_text(
        yaml.safe_dump(
            {"extends": "dsv4-flash-dspark-tp4", "image": {"name": base, "tag": "1", "smoke_imports": []}}
        )
    )
    made = []
    yield tmp, profile, made
    subprocess.run(["docker", "rmi", "-f", *made, f"{base}:1"], capture_output=True)


def build(world, b12x_lock):
    tmp, profile, made = world
    lock = ["--b12x-lock", str(b12x_lock)] if b12x_lock else []  # none: the repo has no b12x.lock
    done = seat(
        "build",
        str(profile),
        "--allow-unpinned",
        "--lock",
        str(tmp / "overlay.lock"),
        "--overlay",
        str(tmp / "vllm"),
        *lock,
        "--b12x-overlay",
        str(tmp / "b12x"),
        "--json",
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    made.append(result["tag"])
    labels = json.loads(
        subprocess.run(
            ["docker", "image", "inspect", result["tag"]], check=True, capture_output=True, text=True
        ).stdout
    )[0]["Config"]["Labels"]
    return result, labels, done.stderr


def dense_in(image: str) -> str:
    done = subprocess.run(
        [
            "docker",
            "run",
            "--rm",
            "--network",
            "none",
            "--entrypoint",
            "sha256sum",
            image,
            f"{SITE}/b12x/gemm/dense.py",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.stdout.split()[0]


def test_without_a_b12x_overlay_the_labels_say_public_kernels(world):
    tmp, _, _ = world
    assert not overlay_lock.B12X_LOCK.exists()
    result, labels, log = build(world, None)
    public = hashlib.sha256(PUBLIC_DENSE).hexdigest()
    assert labels["io.seatkit.b12x.overlay"] == b12x.PUBLIC and "public" in log
    assert labels["io.seatkit.b12x.dense_sha256"] == public == dense_in(result["tag"])
    assert labels["io.seatkit.b12x.commit"] == "0ff2847b0c55c599c8acabb32e694ce07faa1247"
    assert labels["io.seatkit.b12x.dir"] == f"{SITE}/b12x"
    assert "b12x" not in result["tag"].split(":")[1]
    assert vouch.recorded(result["tag"])["pins"]["b12x lock"] == "none"  # the base's own kernels
    assert b12x.kernels(labels).startswith("public (base image), b12x 0ff2847b")
    inspected = seat("image", "inspect", result["tag"])  # built --allow-unpinned: from a tag
    assert (
        f"(base not pinned by digest: built from {labels['org.opencontainers.image.base.digest']}"
        in " ".join(inspected.stdout.split())
    )


def test_a_pinned_b12x_overlay_lands_over_the_package_and_verifies(world):
    tmp, _, _ = world
    result, labels, _ = build(world, tmp / "b12x.lock")
    lock = overlay_lock.load(tmp / "b12x.lock")
    patched = hashlib.sha256(PATCHED_DENSE).hexdigest()
    assert labels["io.seatkit.b12x.dense_sha256"] == patched == dense_in(result["tag"])
    assert labels["io.seatkit.b12x.overlay"].endswith(f"lock sha256 {lock.sha256}")
    assert result["tag"].endswith(f"-b12x-{lock.sha256[:12]}")
    assert vouch.recorded(result["tag"])["pins"]["b12x lock"] == lock.sha256  # verified only while in force
    verify = seat(
        "overlay",
        "verify",
        "--lock",
        str(tmp / "b12x.lock"),
        "--image",
        result["tag"],
        "--dir",
        f"{SITE}/b12x",
        "--json",
    )
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert json.loads(verify.stdout)["changed"] == []


def test_a_named_b12x_lock_that_is_not_there_builds_nothing(world):
    """A mistyped --b12x-lock must not quietly build the public kernels under the patched name."""
    tmp, profile, _ = world
    done = seat(
        "build",
        str(profile),
        "--allow-unpinned",
        "--lock",
        str(tmp / "overlay.lock"),
        "--overlay",
        str(tmp / "vllm"),
        "--b12x-lock",
        str(tmp / "b12x.lokc"),
    )
    assert done.returncode == 2 and "b12x.lokc" in done.stderr and "does not exist" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_b12x_overlay_that_does_not_match_its_lock_builds_nothing(world):
    tmp, profile, _ = world
    wrong = tmp / "wrong"
    write(wrong, {"gemm/dense.py": b"something else\n"})
    done = seat(
        "build",
        str(profile),
        "--allow-unpinned",
        "--lock",
        str(tmp / "overlay.lock"),
        "--overlay",
        str(tmp / "vllm"),
        "--b12x-lock",
        str(tmp / "b12x.lock"),
        "--b12x-overlay",
        str(wrong),
    )
    assert done.returncode == 1
    said = " ".join(done.stderr.split())  # the terminal may wrap the message
    assert "does not match the b12x lock" in said and "1 changed (e.g. gemm/dense.py)" in said


def test_a_mount_over_the_b12x_package_is_what_the_run_records(world, busybox_image, tmp_path):
    """A real container's Mounts (as `seat bench` reads them) with an extra mount over b12x."""
    import docker

    (tmp_path / "b12x").mkdir()
    container = docker.from_env().containers.create(
        busybox_image,
        ["true"],
        name=f"seatkit-test-b12x-mount-{uuid.uuid4().hex[:8]}",
        network_mode="none",
        volumes={str(tmp_path / "b12x"): {"bind": f"{SITE}/b12x", "mode": "ro"}},
    )
    try:
        mounted = b12x.mounted_over(container.attrs["Mounts"], f"{SITE}/b12x")
    finally:
        container.remove(force=True)
    assert mounted == [f"{tmp_path / 'b12x'} at {SITE}/b12x"]
    assert b12x.kernels({"io.seatkit.b12x.dense_sha256": "ab" * 32}, mounted).startswith("mounted over")
