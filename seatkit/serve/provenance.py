"""One provenance record per `seat up`: what the seat runs, each part by the hash its record holds.

A seat is verified when each part equals what its record says: the image `seat build` recorded (or
the venv its hashed lock installed), the weights a full verify vouched for against the models lock,
and a profile that sets only what the allowlist names (seatkit/seat/what_runs.yaml); `mark` says
how each that differs differs, and that is the run's mark. The rest (the overlay and base-pin
locks, the launch as run, the kit's version) is recorded, so that two runs can be told apart.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import seatkit
from seatkit.models import lock as locks
from seatkit.models import verify
from seatkit.seat import overlay_lock, what_runs
from seatkit.serve import pins, venv_lock
from seatkit.serve.backends import docker
from seatkit.serve.spec import LaunchSpec, resolve


def _file_sha256(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def launch_sha256(spec: LaunchSpec, values: dict[str, str]) -> str:
    """The launch as run: its argv, the environment the profile sets, its mounts (as rendered)."""
    launch = {
        "argv": spec.container_argv(values),
        "env": spec.env,
        "mounts": [[resolve(m.source, values), m.target, m.read_only] for m in spec.mounts],
    }
    return hashlib.sha256(json.dumps(launch, sort_keys=True).encode()).hexdigest()


def record(spec: LaunchSpec, values: dict[str, str]) -> dict:
    """The seat's provenance, as `seat up` starts it (values: the knobs, with what the backend's
    `prepared` found of the image or venv)."""
    p = spec.profile
    image = p.image
    runtime: dict[str, str | None]
    if spec.native:
        runtime = {"venv_lock": venv_lock.lock_sha256(p.native.venv)}  # type: ignore[union-attr]
    else:
        runtime = {"image": values.get(docker.CHECKED) or values.get("SEAT_IMAGE")}
    return {
        "kit": seatkit.__version__,
        "profile_sha256": p.sha256,
        **runtime,
        "overlay_lock": _file_sha256(overlay_lock.LOCK) if image and image.overlay else None,
        "base_pins": _file_sha256(pins.lock_path(p)) if image else None,
        "model_locks": locks.hashes(p),
        "launch_sha256": launch_sha256(spec, values),
    }


def mark(spec: LaunchSpec, values: dict[str, str]) -> str | None:
    """How the seat differs from its records (None: it does not): the profile's experiment or
    what it sets off the allowlist, the image or venv, the weights."""
    why = values.get(docker.UNVERIFIED), verify.unvouched_models(spec.profile, values)
    return what_runs.conditions(spec.profile, *why).get("unverified")
