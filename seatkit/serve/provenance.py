"""One provenance record per `seat up`: what the seat runs, each part by the hash its record holds,
and each way it differs from its records.

A seat is verified when each part equals what its record says: the image `seat build` recorded (or
the venv its hashed lock installed), the weights a full verify vouched for against the models lock,
the launch the profile's rendered script (serve/<profile>.sh) was rendered from, and a profile that
sets only what the allowlist names (seatkit/seat/what_runs.yaml). Each that differs is said under
"differs", and that is the run's mark (what_runs.mark). The rest (the overlay and base-pin locks,
the knobs' values, what the launching shell passed the server, the kit's version) is recorded, so
that two runs can be told apart.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import seatkit
from seatkit import paths
from seatkit.models import lock as locks
from seatkit.models import verify
from seatkit.seat import overlay_lock, what_runs
from seatkit.serve import effective, pins, venv_lock
from seatkit.serve.backends import docker, native
from seatkit.serve.spec import LaunchSpec

# How a rendered script names the launch it was rendered from (serve.sh.j2 writes the line).
LAUNCH_LINE = re.compile(r"^# Launch sha256 ([0-9a-f]{64})\b", re.MULTILINE)


def script_path(name: str, root: Path | None = None) -> Path:
    """Where `seat render` writes the profile's launch script."""
    return (root or paths.REPO) / "serve" / f"{name}.sh"


def _file_sha256(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def launch_differs(spec: LaunchSpec, launch_sha256: str) -> str | None:
    """How the launch differs from the one its rendered script was rendered from (None: it does not)."""
    script = script_path(spec.profile.name)
    try:
        found = LAUNCH_LINE.search(script.read_text(errors="replace"))
    except OSError:
        found = None
    if found and found[1] == launch_sha256:
        return None
    return f"the launch differs from serve/{script.name}: run `seat render`"


def passed(spec: LaunchSpec, values: dict[str, str]) -> dict[str, str]:
    """What the launching shell hands the server beside the knobs: a docker seat's pass_env names
    it sets; what a native seat keeps of it (what_runs.yaml shell_kept), where the profile's own
    value, which wins, does not replace it."""
    if not spec.native:
        return spec.passed_env()
    return {k: v for k, v in sorted(native.inherited().items()) if k not in spec.env and k not in values}


def record(spec: LaunchSpec, values: dict[str, str], runs_other: str | None = None) -> dict:
    """The seat's provenance, as `seat up` starts it (values: the knobs, with the image id the
    backend's `prepared` checked; runs_other: why it found the image or venv is not the one its
    record names), and how it differs from its records."""
    p = spec.profile
    image = p.image
    runtime: dict[str, str | None]
    if spec.native:
        runtime = {"venv_lock": venv_lock.lock_sha256(p.native.venv)}  # type: ignore[union-attr]
    else:
        runtime = {"image": values.get(docker.CHECKED) or values.get("SEAT_IMAGE")}
    launch = effective.container(spec).sha256()
    differs = [
        *what_runs.differs(p),
        runs_other,
        verify.unvouched_models(p, values),
        launch_differs(spec, launch),
    ]
    return {
        "kit": seatkit.__version__,
        "profile_sha256": p.sha256,
        **runtime,
        "overlay_lock": _file_sha256(overlay_lock.LOCK) if image and image.overlay else None,
        "base_pins": _file_sha256(pins.lock_path(p)) if image else None,
        "model_locks": locks.hashes(p),
        "launch_sha256": launch,
        "knobs": {k.name: values[k.name] for k in spec.knobs},
        "passed": passed(spec, values),
        "differs": [why for why in differs if why],
    }
