"""`seat up`'s preflight: the rendered script's own, run by bash with the seat's knob values, so a
launch by hand and `seat up` find the same things, said in the same words."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from dataclasses import replace

from seatkit.errors import SeatError
from seatkit.serve import render
from seatkit.serve.checks import Kind
from seatkit.serve.spec import LaunchSpec

# The script's check_knobs and fail() (serve/templates/preflight.sh.j2), when it stops: not a warning.
FAILURE = re.compile(r"^seat(?: preflight)?: (?!warning: )(?P<message>.*)(?:\n  hint: (?P<hint>.*))?", re.M)


def run(spec: LaunchSpec, values: dict[str, str]) -> None:
    """The knobs' grammar, then every check in order; the first failure raises with the script's words and hint, and its
    warnings (an image chosen by a tag) are said as the script says them. A taken container name
    is left to the create, which says whose it is (backends.docker.name_taken)."""
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
        sys.stderr.write(done.stderr)
        return
    said = FAILURE.search(done.stderr)  # fail() says one failure, with its hint, and exits
    if said is None:  # bash itself stopped
        raise SeatError(f"preflight failed: {done.stderr.strip() or f'bash exited {done.returncode}'}")
    raise SeatError(f"preflight: {said['message']}", said["hint"] or "")
