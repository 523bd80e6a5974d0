"""`seat up`'s preflight: the rendered script's own, run by bash with the seat's knob values, so a
launch by hand and `seat up` find the same things, said in the same words."""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from dataclasses import replace

from seatkit.errors import SeatError
from seatkit.models import lock as locks
from seatkit.models import verify
from seatkit.seat.profiles import Profile
from seatkit.serve import render
from seatkit.serve.checks import Kind
from seatkit.serve.spec import LaunchSpec, resolve

FAILED = "seat preflight: "  # the script's fail(), in serve/templates/preflight.sh.j2
WARNED = FAILED + "warning: "
HINT = "  hint: "


def warnings(spec: LaunchSpec, values: dict[str, str]) -> list[str]:
    """What `seat up` should say before it starts: an image by a tag (the script warns too), and a
    locked model file changed since its last full verify (the script compares sizes only)."""
    subjects = (resolve(c.subject, values) for c in spec.checks if c.kind == Kind.PINNED)
    return [
        f"{image} is not pinned by digest: a tag can move" for image in subjects if "@sha256:" not in image
    ] + _changed_models(spec.profile, values)


def _changed_models(profile: Profile, values: dict[str, str]) -> list[str]:
    try:
        record = verify.last_full(profile.name)
        if record is None or locks.read(profile) is None:
            return []
        changed = verify.changed_since(profile, record["time"], record["models"], values)
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(record["time"]))
    except (SeatError, OSError, ValueError, KeyError, TypeError, AttributeError):
        return []  # a torn record, an unreadable folder: the checks and `seat doctor` name them
    if not changed:
        return []
    if len(changed) == 1:
        what = f"model file {changed[0]} changed since its last full verify ({when})"
    else:
        what = f"{len(changed)} model files changed since their last full verify ({when}), e.g. {', '.join(changed[:3])}"
    return [f"{what}; preflight compares sizes only: seat model verify {profile.name} hashes again"]


def run(spec: LaunchSpec, values: dict[str, str]) -> None:
    """Every check in order; the first failure raises with the script's words and hint. A taken
    container name is left to the create, which says whose it is (backends.docker.name_taken)."""
    spec = replace(spec, checks=[c for c in spec.checks if c.kind != Kind.CONTAINER_FREE])
    with tempfile.NamedTemporaryFile("w", prefix="seat-preflight-", suffix=".sh") as script:
        script.write(render.render_preflight(spec))  # a file: a long sizes check outgrows an argument
        script.flush()
        done = subprocess.run(
            ["bash", "-p", script.name],
            env={**os.environ, **values, "SEAT_DRY_RUN": "0"},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
        )
    if done.returncode == 0:
        return
    lines = done.stderr.splitlines()
    failed = [i for i, line in enumerate(lines) if line.startswith(FAILED) and not line.startswith(WARNED)]
    if not failed:  # bash itself stopped
        raise SeatError(f"preflight failed: {done.stderr.strip() or f'bash exited {done.returncode}'}")
    hint = next(iter(lines[failed[-1] + 1 :]), "")
    raise SeatError(
        "preflight: " + lines[failed[-1]].removeprefix(FAILED),
        hint.removeprefix(HINT) if hint.startswith(HINT) else "",
    )
