# ruff: noqa: F811  (fixtures imported from the test module that defines them)
"""What `seat build` makes and records, and when the outside check may trust that record: a base's
ONBUILD triggers, the base's stale bytecode of a file the overlay replaces, the b12x lock the
build used. The fake engine of test_outside_check; real CPython for what bytecode runs."""

import hashlib
import io
import json
import os
import py_compile
import subprocess
import sys
import tarfile
from importlib.util import cache_from_source

import pytest
from test_outside_check import (  # noqa: F401  (profile is a fixture)
    BASE,
    BASE_CONFIG,
    BUILT_FROM,
    CONFIG,
    LOCK,
    LOCKED,
    TAG,
    VLLM,
    built,
    engine_with,
    profile,
)

from seatkit.errors import SeatError
from seatkit.image import build, outside
from seatkit.image.dockerfile import IMAGE_FILES
from seatkit.seat.overlay_lock import Lock


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


TRIGGER = "RUN echo 'import hook' > /opt/venv/lib/python3.11/site-packages/zz-onbuild.pth"


def test_seat_build_refuses_a_base_with_onbuild_triggers(profile, monkeypatch, tmp_path):
    """The triggers would run inside the build, before the kit's steps, and the record would then
    make `seat up` trust the result without reading it."""
    client = engine_with(monkeypatch, {}, base_config={**BASE_CONFIG, "OnBuild": [TRIGGER]})
    monkeypatch.setattr(build, "base_reference", lambda p, allow_unpinned=False: ("base", "d"))
    (tmp_path / "overlay").mkdir()
    (tmp_path / "overlay" / "version.py").write_bytes(LOCKED)
    with pytest.raises(SeatError, match="the base base has ONBUILD triggers") as caught:
        build.build(profile, LOCK, tmp_path / "overlay")
    assert TRIGGER in caught.value.message
    assert "without triggers" in caught.value.hint and "never runs a base's triggers" in caught.value.hint
    assert client.by_id == {} and not list(
        outside._records().glob("*.json")
    )  # nothing made, nothing recorded


@pytest.mark.parametrize(
    "config, base_config, said",
    [
        ({**CONFIG, "OnBuild": [TRIGGER]}, BASE_CONFIG, "its ONBUILD triggers"),
        (CONFIG, {**BASE_CONFIG, "OnBuild": [TRIGGER]}, "the base has ONBUILD triggers"),
    ],
)
def test_the_outside_check_names_onbuild_triggers(profile, monkeypatch, config, base_config, said):
    """An image with triggers of its own is not what the kit's Dockerfile makes; one built from a base
    with triggers ran them (a plain `docker build`, or a record written before seat build refused)."""
    engine_with(monkeypatch, built(), config, base_config=base_config)
    verdict = outside.check(profile, TAG, LOCK)
    assert any(said in p and TRIGGER in p for p in verdict.problems), verdict.problems


def test_an_image_without_triggers_is_not_named_for_them(profile, monkeypatch):
    engine_with(monkeypatch, built(), {**CONFIG, "OnBuild": None}, base_config={**BASE_CONFIG, "OnBuild": []})
    assert not any("ONBUILD" in p for p in outside.check(profile, TAG, LOCK).problems)


# The b12x overlay `seat build --b12x-lock L --b12x-overlay DIR` copied: the record names its lock,
# and counts only while the kit's b12x lock (what the outside check allows over the base) is that one.
DENSE = b"# patched kernels\n"
KERNELS = Lock("/srv/b12x", "3" * 40, "b12x", "4" * 40, {"gemm/dense.py": sha(DENSE)})


def with_kernels(profile, monkeypatch, in_force):
    engine_with(monkeypatch, built(**{f"{profile.image.b12x_dir}/gemm/dense.py": DENSE}))
    monkeypatch.setattr(outside, "load_b12x", lambda: in_force)


@pytest.mark.parametrize(
    "in_force", [None, Lock("/srv/b12x", "5" * 40, "b12x", "6" * 40, {"gemm/dense.py": "0" * 64})]
)
def test_a_record_of_other_kernels_than_the_kits_b12x_lock_is_read_from_outside(
    profile, monkeypatch, in_force
):
    """Built with --b12x-lock elsewhere: the kit pins no b12x overlay, or another one."""
    with_kernels(profile, monkeypatch, in_force)
    outside.record(TAG, "sha256:" + "a" * 64, profile, LOCK, BUILT_FROM, KERNELS)
    assert outside.recorded(TAG)["b12x"] == KERNELS.dump()
    verdict = outside.check(profile, TAG, LOCK)
    assert verdict.how == "read from outside the image"
    assert any("gemm/dense.py" in p for p in verdict.problems), verdict.problems


def test_a_record_of_the_kernels_the_kits_b12x_lock_pins_is_trusted(profile, monkeypatch):
    with_kernels(profile, monkeypatch, KERNELS)
    outside.record(TAG, "sha256:" + "a" * 64, profile, LOCK, BUILT_FROM, KERNELS)
    verdict = outside.check(profile, TAG, LOCK)
    assert verdict.verified and "seat build" in verdict.how, verdict


def test_a_record_of_no_b12x_overlay_is_read_from_outside_once_the_kit_pins_one(profile, monkeypatch):
    with_kernels(profile, monkeypatch, KERNELS)
    outside.record(TAG, "sha256:" + "a" * 64, profile, LOCK, BUILT_FROM)  # the base's own kernels
    assert outside.check(profile, TAG, LOCK).how == "read from outside the image"


def test_a_record_written_before_the_kit_recorded_the_kernels_is_read_from_outside(profile, monkeypatch):
    """Any record from before (an ONBUILD base's build among them) is read from outside."""
    with_kernels(profile, monkeypatch, None)
    outside.record(TAG, "sha256:" + "a" * 64, profile, LOCK, BUILT_FROM)
    assert outside.check(profile, TAG, LOCK).how.startswith("the image `seat build` made here")
    old = json.loads(outside._record_path(TAG).read_text())
    del old["b12x"]
    outside._record_path(TAG).write_text(json.dumps(old))
    verdict = outside.check(profile, TAG, LOCK)
    assert verdict.how == "read from outside the image"
    assert any("gemm/dense.py" in p for p in verdict.problems), verdict.problems


# The base's own bytecode of a file the overlay replaces. Real CPython and the real sh script the
# build runs; then the fake engine for the outside check.
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


def test_the_context_lists_every_file_it_copies_at_its_path_in_the_image(tmp_path):
    (tmp_path / "vllm").mkdir()
    (tmp_path / "vllm" / "version.py").write_bytes(LOCKED)
    (tmp_path / "b12x" / "gemm").mkdir(parents=True)
    (tmp_path / "b12x" / "gemm" / "dense.py").write_bytes(DENSE)
    data = build.context(LOCK, tmp_path / "vllm", {}, VLLM, (KERNELS, tmp_path / "b12x", "/k/b12x")).data
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        listed = tar.extractfile("overlay/copied").read().decode()
    assert listed == f"{VLLM}/version.py\n/k/b12x/gemm/dense.py\n"
    skipped = build.context(LOCK, tmp_path / "vllm", dict(LOCK.files), VLLM).data  # the base has it
    with tarfile.open(fileobj=io.BytesIO(skipped)) as tar:
        assert tar.extractfile("overlay/copied").read() == b""


PYC = f"{VLLM}/__pycache__/version.cpython-311.pyc"


@pytest.mark.parametrize("mode", MODES, ids=["unchecked-hash", "timestamp"])
def test_the_bases_bytecode_of_a_replaced_locked_file_is_refused(tmp_path, profile, monkeypatch, mode):
    """The image holds the locked source and the base's .pyc of the file it replaced."""
    compiled = open(_base_with_bytecode(tmp_path, mode)["mod"], "rb").read()
    engine_with(monkeypatch, built(**{PYC: compiled}), base={**BASE, PYC: compiled})
    verdict = outside.check(profile, TAG, LOCK)
    assert any("kept stale from the base" in p and PYC in p for p in verdict.problems), verdict.problems


def test_the_bases_bytecode_of_a_locked_file_it_already_had_is_fine(profile, monkeypatch):
    """A locked file the base has byte for byte is not copied: its .pyc is of that very source."""
    same = Lock("/srv/overlay", "1" * 40, "vllm", "2" * 40, {"version.py": sha(BASE[f"{VLLM}/version.py"])})
    kit = {k: v for k, v in built().items() if k.startswith("/opt/seatkit/")}
    engine_with(monkeypatch, {**BASE, **kit, "/opt/seatkit/overlay.lock": same.dump().encode()})
    assert outside.check(profile, TAG, same).problems == []


def test_only_the_bytecode_of_a_replaced_locked_file_may_be_gone(profile, monkeypatch):
    other = f"{VLLM}/__pycache__/other.cpython-311.pyc"
    engine_with(monkeypatch, built(), base={**BASE, other: b"compiled"})
    verdict = outside.check(profile, TAG, LOCK)
    assert verdict.problems and all(PYC not in p for p in verdict.problems)
    assert any("removed against the base" in p and other in p for p in verdict.problems), verdict.problems


@pytest.mark.parametrize("kept", [True, False])
def test_the_bases_bytecode_of_a_b12x_file_the_overlay_replaced_is_refused(profile, monkeypatch, kept):
    """The b12x overlay is judged by the tree (its lock's hashes); its sources' bytecode here."""
    pyc = f"{profile.image.b12x_dir}/gemm/__pycache__/dense.cpython-311.pyc"
    base = {**BASE, f"{profile.image.b12x_dir}/gemm/dense.py": b"# public kernels\n", pyc: b"compiled"}
    image = {
        **built(),
        **base,
        f"{VLLM}/version.py": LOCKED,
        f"{profile.image.b12x_dir}/gemm/dense.py": DENSE,
    }
    kit = {
        "/opt/seatkit/b12x.lock": KERNELS.dump().encode(),
        "/opt/seatkit/overlay.lock": LOCK.dump().encode(),
    }
    kit |= {f"/opt/seatkit/{s}": (IMAGE_FILES / s).read_bytes() for s in outside.tree.SCRIPTS}
    image = {k: v for k, v in {**image, **kit}.items() if k != PYC and (kept or k != pyc)}
    engine_with(monkeypatch, image, base=base)
    monkeypatch.setattr(outside, "load_b12x", lambda: KERNELS)
    verdict = outside.check(profile, TAG, LOCK)
    if kept:
        assert any("may run instead of the b12x overlay's source" in p and pyc in p for p in verdict.problems)
    else:
        assert verdict.problems == []  # what seat build makes: the base's bytecode of it removed
