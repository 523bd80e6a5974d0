"""The build context, the base pin and the Dockerfile's rules, without a docker engine."""

import hashlib
import io
import os
import py_compile
import re
import subprocess
import sys
import tarfile
from importlib.util import cache_from_source

import pytest
import yaml

from seatkit import paths
from seatkit.errors import SeatError
from seatkit.image import build, overlay, pin
from seatkit.image.dockerfile import IMAGE_FILES
from seatkit.seat import overlay_lock, profiles
from seatkit.serve import pins

DIGEST = "sha256:" + "1" * 64
VLLM = "/opt/venv/lib/python3.12/site-packages/vllm"


@pytest.fixture
def tree(tmp_path):
    files = {"__init__.py": b"", "config/speculative.py": b"X = 1\n", "v1/spec_decode/dspark.py": b"Y = 2\n"}
    for name, data in files.items():
        (tmp_path / "vllm" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "vllm" / name).write_bytes(data)
    lock = overlay_lock.Lock(
        "https://example.invalid/o", "a" * 40, "overlay/vllm", "b" * 40, overlay.tree_files(tmp_path / "vllm")
    )
    return tmp_path / "vllm", lock


def members(data):
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return tar.getmembers()


def test_the_context_is_byte_identical_from_the_same_inputs_whatever_the_files_times(tree):
    root, lock = tree
    first = build.context(lock, root).data
    for path in root.rglob("*"):
        path.touch()  # new times on disk change nothing
    assert build.context(lock, root).data == first
    entries = members(first)
    assert [m.name for m in entries] == sorted(m.name for m in entries)
    assert {m.mtime for m in entries} == {build.EPOCH} and {(m.uid, m.gid) for m in entries} == {(0, 0)}
    names = {m.name for m in entries}
    # laid out like the repository, so the one Dockerfile builds both
    assert {
        "Dockerfile",
        "overlay/overlay.lock",
        "image/overlay-check.sh",
        "image/build-check.sh",
        "image/health.sh",
    } <= names
    # every folder on the way to each file is an entry of its own, so none takes the build's time
    assert {f"overlay/root{VLLM[:i]}" for i in range(len(VLLM)) if VLLM[i] == "/"} - {"overlay/root"} <= names
    assert f"overlay/root{VLLM}/config/speculative.py" in names
    lock_entry = next(m for m in entries if m.name == "overlay/overlay.lock")
    with tarfile.open(fileobj=io.BytesIO(first)) as tar:
        assert overlay_lock.parse(tar.extractfile(lock_entry).read().decode()) == lock


def test_files_the_base_has_byte_for_byte_are_left_out_and_the_rest_copied(tree):
    root, lock = tree
    base = {"__init__.py": lock.files["__init__.py"], "config/speculative.py": "0" * 64}
    ctx = build.context(lock, root, base)
    assert ctx.skipped == ["__init__.py"] and ctx.copied == [
        "config/speculative.py",
        "v1/spec_decode/dspark.py",
    ]
    assert f"overlay/root{VLLM}/__init__.py" not in {m.name for m in members(ctx.data)}


def test_the_seat_tag_names_the_profile_the_overlay_commit_and_the_lock(tree):
    _, lock = tree
    tag = overlay_lock.seat_tag(profiles.load(profiles.DEFAULT_PROFILE), lock)
    assert tag == f"seatkit/{profiles.DEFAULT_PROFILE}:overlay-{'a' * 12}-{lock.sha256[:12]}"


def write_profile(tmp_path, digest=None):
    path = tmp_path / "seat.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "extends": profiles.DEFAULT_PROFILE,
                "image": {"name": "registry.invalid/vllm", "tag": "t1", "digest": digest},
            }
        )
    )
    return profiles.load(str(path))


def test_an_unpinned_base_is_refused_unless_allowed(tmp_path):
    profile = write_profile(tmp_path)
    with pytest.raises(SeatError, match="not pinned by digest") as caught:
        pins.base_reference(profile)
    assert "seat image pin" in caught.value.hint
    assert pins.base_reference(profile, allow_unpinned=True) == ("registry.invalid/vllm:t1", None)
    assert pins.base_reference(write_profile(tmp_path, DIGEST)) == (f"registry.invalid/vllm@{DIGEST}", DIGEST)


def test_the_lock_pins_the_base_and_a_stale_or_conflicting_lock_is_refused(tmp_path):
    profile = write_profile(tmp_path)
    lock = tmp_path / "seat.lock"
    lock.write_text(yaml.safe_dump({"name": "registry.invalid/vllm", "tag": "t1", "digest": DIGEST}))
    assert pins.lock_path(profile) == lock
    assert pins.base_reference(profile) == (f"registry.invalid/vllm@{DIGEST}", DIGEST)
    lock.write_text(yaml.safe_dump({"name": "registry.invalid/vllm", "tag": "t0", "digest": DIGEST}))
    with pytest.raises(SeatError, match="pins registry.invalid/vllm:t0"):
        pins.base_reference(profile)
    lock.write_text(
        yaml.safe_dump({"name": "registry.invalid/vllm", "tag": "t1", "digest": "sha256:" + "2" * 64})
    )
    with pytest.raises(SeatError, match="keep one"):
        pins.base_reference(write_profile(tmp_path, DIGEST))
    lock.write_text("name: x\n")
    with pytest.raises(SeatError, match="expected name, tag and digest"):
        pins.read(profile)


def test_the_dockerfile_keeps_its_rules():
    text = (paths.REPO / "Dockerfile").read_text()
    assert not re.search(r"^#\s*syntax=", text, re.M | re.I)  # BuildKit would try to pull a frontend
    assert re.search(r"^ARG BASE_IMAGE$", text, re.M)  # no tag-only default: the kit passes name@digest
    assert "FROM ${BASE_IMAGE}" in text
    assert "HEALTHCHECK" in text and 'CMD ["/opt/seatkit/health.sh"]' in text  # exec form
    assert "ENTRYPOINT []" in text  # the seat's command as given, whatever the base declares
    assert (
        "ARG OVERLAY_FILES=overlay/vllm/\nARG OVERLAY_INTO=${VLLM_DIR}/\nCOPY ${OVERLAY_FILES} ${OVERLAY_INTO}"
        in text
    )
    assert "VOLUME" not in text  # copied over the package, never mounted
    for label in (
        "org.opencontainers.image.source",
        "org.opencontainers.image.revision",
        "org.opencontainers.image.base.name",
        "org.opencontainers.image.base.digest",
        "io.seatkit.overlay.commit",
        "io.seatkit.overlay.tree",
        "io.seatkit.overlay.lock.sha256",
        "io.seatkit.profile",
    ):
        assert label in text


def test_the_default_seat_runs_the_built_image():
    profile = profiles.load(profiles.DEFAULT_PROFILE)
    assert profile.image.overlay and "vllm.v1.spec_decode.dspark" in profile.image.smoke_imports
    script = (paths.REPO / "serve" / f"{profiles.DEFAULT_PROFILE}.sh").read_text()
    assert f"SEAT_IMAGE={overlay_lock.seat_tag(profile, overlay_lock.load())}" in script


def test_a_profile_that_runs_its_image_as_it_is_has_nothing_to_build(tmp_path):
    """The prebuilt profile, once pinned: `seat build` copied the overlay over the author's image
    into a tag the seat never runs (it runs the prebuilt image by digest)."""
    path = tmp_path / "pinned-prebuilt.yaml"
    path.write_text(f"extends: deepspark-prebuilt\nimage: {{digest: 'sha256:{'a' * 64}'}}\n")
    lock = overlay_lock.Lock(
        "https://example.invalid/o", "a" * 40, "overlay/vllm", "b" * 40, {"x.py": "0" * 64}
    )
    with pytest.raises(SeatError, match="nothing to build") as caught:
        build.build(profiles.load(str(path)), lock, tmp_path / "overlay")
    assert "seat image pin" in caught.value.hint


@pytest.mark.parametrize(
    "host, url",
    [
        (None, "http://127.0.0.1:8000/health"),
        ("0.0.0.0", "http://127.0.0.1:8000/health"),
        ("::", "http://127.0.0.1:8000/health"),
        ("::1", "http://[::1]:8000/health"),
        ("[::1]", "http://[::1]:8000/health"),
        ("127.0.0.2", "http://127.0.0.2:8000/health"),
    ],
)
def test_the_healthcheck_probes_where_the_seat_listens(tmp_path, host, url):
    """image/health.sh with a curl that says what it was asked for."""
    import subprocess

    (tmp_path / "curl").write_text('#!/bin/sh\nfor a; do last=$a; done\necho "$last"\n')
    (tmp_path / "curl").chmod(0o755)
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin", **({"SEAT_HOST": host} if host else {})}
    done = subprocess.run(
        ["sh", str(paths.REPO / "image" / "health.sh")], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0 and done.stdout.strip() == url, done.stderr


@pytest.fixture
def overlay_check(tmp_path):
    """image/overlay-check.sh beside a lock of two modules, over an installed tree that matches it."""
    import hashlib
    import shutil

    seatkit = tmp_path / "opt-seatkit"
    seatkit.mkdir()
    shutil.copy(paths.REPO / "image" / "overlay-check.sh", seatkit)
    tree = tmp_path / "vllm"
    files = {"a.py": b"A = 1\n", "pkg/__init__.py": b"", "pkg/mod.py": b"M = 2\n"}
    for name, data in files.items():
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        (tree / name).write_bytes(data)
    (seatkit / "overlay.lock").write_text(
        "# a lock\n"
        + "".join(f"{hashlib.sha256(data).hexdigest()}  {name}\n" for name, data in files.items())
    )

    def run():
        import subprocess

        return subprocess.run(
            ["sh", str(seatkit / "overlay-check.sh")],
            capture_output=True,
            text=True,
            env={"PATH": "/usr/bin:/bin", "SEAT_OVERLAY_DIR": str(tree)},
        )

    return tree, run


@pytest.mark.parametrize(
    "planted",
    ["pkg/mod/__init__.py", "pkg/mod.cpython-312-x86_64-linux-gnu.so", "pkg/mod.abi3.so", "a/__init__.py"],
)
def test_the_build_check_refuses_a_locked_module_that_python_would_not_load(overlay_check, planted):
    tree, run = overlay_check
    assert run().returncode == 0
    (tree / planted).parent.mkdir(parents=True, exist_ok=True)
    (tree / planted).write_bytes(b"")
    done = run()
    assert done.returncode == 1, done.stderr
    assert f"HIDDEN by {planted}" in done.stderr


def test_the_build_check_allows_a_namespace_folder_and_names_a_changed_file(overlay_check):
    tree, run = overlay_check
    (tree / "pkg" / "mod").mkdir()  # no __init__: the module is still found first
    (tree / "pkg" / "mod" / "data.json").write_text("{}")
    assert run().returncode == 0, run().stderr
    (tree / "a.py").write_text("A = 3\n")
    done = run()
    assert done.returncode == 1 and "a.py: FAILED" in done.stderr


def test_a_torn_pin_is_a_clear_error_and_pinning_writes_whole_files(tmp_path, monkeypatch):
    from pathlib import Path

    profile = write_profile(tmp_path)
    lock = pins.lock_path(profile)
    lock.write_text('name: registry.invalid/vllm\ntag: "t1\n')  # a crash mid-write, as it once could
    with pytest.raises(SeatError, match="not valid YAML"):
        pins.base_reference(profile)
    good = yaml.safe_dump({"name": "registry.invalid/vllm", "tag": "t1", "digest": DIGEST})
    lock.write_text(good)
    monkeypatch.setattr(pin, "resolve", lambda name, tag: "sha256:" + "3" * 64)
    real = Path.write_text

    def torn(self, text):
        real(self, text[:20])
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as patched:
        patched.setattr(Path, "write_text", torn)
        with pytest.raises(OSError):
            pin.pin(profile)
    assert lock.read_text() == good and sorted(p.name for p in tmp_path.iterdir()) == [
        "seat.lock",
        "seat.yaml",
    ]
    pin.pin(profile)
    assert pins.read(profile)["digest"] == "sha256:" + "3" * 64


# The base's own bytecode of a file the overlay replaces: real CPython and the real sh script the
# build runs.
def _import_value(root) -> str:
    return subprocess.run(
        [sys.executable, "-B", "-c", "import pkg.mod as m; print(m.VALUE)"],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("PYTHON")},
    ).stdout.strip()


def _base_with_bytecode(root, mode) -> dict[str, str]:
    """A base package whose modules were compiled the given way: {module: its .pyc}."""
    (root / "pkg").mkdir()
    (root / "pkg" / "__init__.py").write_text("")
    compiled = {}
    for name in ("mod", "same"):
        source = root / "pkg" / f"{name}.py"
        source.write_text("VALUE = 'base'\n")
        os.utime(source, (build.EPOCH, build.EPOCH))  # a base built reproducibly at the kit's time
        py_compile.compile(str(source), invalidation_mode=mode)
        compiled[name] = cache_from_source(str(source))
    return compiled


MODES = [py_compile.PycInvalidationMode.UNCHECKED_HASH, py_compile.PycInvalidationMode.TIMESTAMP]


@pytest.mark.parametrize("mode", MODES, ids=["unchecked-hash", "timestamp at build.EPOCH, same size"])
def test_the_build_removes_the_bases_bytecode_of_each_copied_file(tmp_path, mode):
    compiled = _base_with_bytecode(tmp_path, mode)
    source = tmp_path / "pkg" / "mod.py"
    source.write_text("VALUE = 'lock'\n")  # the overlay's file, as seat build copies it: same size, same time
    os.utime(source, (build.EPOCH, build.EPOCH))
    assert _import_value(tmp_path) == "base"  # what the image ran before: the base's bytecode
    (tmp_path / "copied").write_text(f"{source}\n{tmp_path}/pkg/data.json\n")
    subprocess.run(["sh", str(IMAGE_FILES / "drop-bytecode.sh"), str(tmp_path / "copied")], check=True)
    assert _import_value(tmp_path) == "lock"
    assert not os.path.exists(compiled["mod"]) and os.path.exists(compiled["same"])  # not copied: kept


def test_the_context_lists_every_file_it_copies_at_its_path_in_the_image(tree, tmp_path):
    root, lock = tree
    dense = b"# patched kernels\n"
    kernels = overlay_lock.Lock(
        "/srv/b12x", "3" * 40, "b12x", "4" * 40, {"gemm/dense.py": hashlib.sha256(dense).hexdigest()}
    )
    (tmp_path / "b12x" / "gemm").mkdir(parents=True)
    (tmp_path / "b12x" / "gemm" / "dense.py").write_bytes(dense)
    data = build.context(lock, root, {}, VLLM, (kernels, tmp_path / "b12x", "/k/b12x")).data
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        listed = tar.extractfile("overlay/copied").read().decode()
    assert listed == "".join(f"{VLLM}/{name}\n" for name in sorted(lock.files)) + "/k/b12x/gemm/dense.py\n"
    skipped = build.context(lock, root, dict(lock.files), VLLM).data  # the base has them all
    with tarfile.open(fileobj=io.BytesIO(skipped)) as tar:
        assert tar.extractfile("overlay/copied").read() == b""
