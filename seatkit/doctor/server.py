"""Running-server rows: the seat's own process (as `seat up` recorded it, answering /health at
its URL), its vLLM and speculative config, serving alone."""

from __future__ import annotations

import json
import re

import requests

from seatkit import engine
from seatkit.bench import metrics
from seatkit.doctor.rows import Row, cannot, fail, ok, warn
from seatkit.errors import SeatError
from seatkit.seat.profiles import Profile
from seatkit.serve import bound, client, launch

LAYER = "server"
CHECKS = ("identity", "vLLM version", "spec config", "alone")
DEADLINE_S = 15  # for a whole answer


def _get(run: launch.Running, path: str) -> str:
    answer = client.fetch("GET", f"{run.url}{path}", DEADLINE_S, headers=launch.headers(run))
    answer.raise_for_status()
    return answer.content.decode(errors="replace")


def identity(run: launch.Running) -> Row:
    _get(run, "/health")
    what = launch.describe(run)
    return ok(
        LAYER,
        "identity",
        f"{what} recorded by seat up is alive; /health answers at {run.url}"
        " (listener identity: not proven yet)",
    )


def version(run: launch.Running, profile: Profile) -> Row:
    found = json.loads(_get(run, "/version")).get("version", "")
    expected = profile.rig.software.get("vllm", "")
    if not expected:
        return cannot(LAYER, "vLLM version", f"{found} serves; the profile's rig names no vllm version")
    public = found.split("+")[0]
    commits = re.findall(r"\b[0-9a-f]{7,40}\b", expected)
    if public and public in expected or any(c[:7] in found for c in commits):
        return ok(LAYER, "vLLM version", f"{found}, as the profile ({expected})")
    return warn(
        LAYER,
        "vLLM version",
        f"{found} serves; the profile names {expected}",
        f"seat build {profile.name} / seat setup {profile.name}, then seat up again",
    )


def spec_config(run: launch.Running, profile: Profile, text: str) -> Row:
    models = json.loads(_get(run, "/v1/models"))["data"]
    served = next((m for m in models if m["id"] == profile.server.served_model_name), None)
    problems = []
    if served is None:
        problems.append(
            f"/v1/models lists {[m['id'] for m in models]}, not {profile.server.served_model_name}"
        )
    want_len = profile.vllm_args.get("max-model-len")
    if served and want_len and served.get("max_model_len") != want_len:
        problems.append(f"max_model_len {served.get('max_model_len')}, profile {want_len}")
    spec = profile.speculative
    positions = metrics.parse(text).per_position
    k = spec.num_speculative_tokens if spec else 0
    if spec and not positions:
        problems.append("/metrics has no spec-decode counters: speculative decoding is off")
    elif len(positions) != k and positions:
        problems.append(f"/metrics counts {len(positions)} draft positions, profile k={k}")
    evidence = (
        f"{profile.server.served_model_name}, max_model_len {served.get('max_model_len') if served else '?'}, "
        f"{len(positions)} draft positions (k={k}, {spec.method if spec else 'no drafts'})"
    )
    if problems:
        return fail(
            LAYER, "spec config", "; ".join(problems), f"seat down {profile.name}; seat up {profile.name}"
        )
    return ok(LAYER, "spec config", evidence)


def alone(text: str) -> Row:
    snapshot = metrics.parse(text)
    busy = {k: snapshot.gauges.get(k, 0) for k in ("running", "waiting")}
    if any(busy.values()):
        return warn(
            LAYER,
            "alone",
            f"{busy['running']:.0f} running, {busy['waiting']:.0f} waiting now: a bench would share the seat",
            "stop other clients before a bench",
        )
    return ok(LAYER, "alone", "no request running or waiting")


def seat(profile: Profile) -> launch.Running | list[Row]:
    """The profile's running seat, or the rows that say why there is none to check: not up, no
    engine, or a profile edited since `seat up` (a FAIL: judged by that file, the seat would be held
    to, and its results marked by, what it does not run)."""
    no_engine: tuple[type[BaseException], ...] = (engine.NoEngine, *engine.errors())
    try:
        run = bound.seat_of(profile)
    except no_engine:
        return [
            cannot(LAYER, check, f"{profile.name} runs in docker and no docker engine answers", engine.HINT)
            for check in CHECKS
        ]
    except SeatError as exc:  # an unreadable record, or the profile edited since `seat up`
        return [fail(LAYER, "run record", exc.message, exc.hint)]
    if run is None:
        why = f"{profile.name} is not up (no process recorded by seat up is alive)"
        return [cannot(LAYER, check, why, f"seat up {profile.name}") for check in CHECKS]
    return run


def rows(profile: Profile, seat: launch.Running | list[Row]) -> list[Row]:
    """The running seat's rows; seat: what seat() found."""
    if isinstance(seat, list):
        return seat
    run = seat
    try:
        text = _get(run, "/metrics")
        return [identity(run), version(run, profile), spec_config(run, profile, text), alone(text)]
    except (requests.RequestException, ValueError, KeyError, TypeError, AttributeError, SeatError) as exc:
        # JSON of another shape than vLLM's is as much a foreign listener as no answer
        return [
            fail(
                LAYER,
                "identity",
                f"{run.url} does not answer as vLLM: {type(exc).__name__}: {str(exc)[:120]}",
                f"seat logs {profile.name}",
            )
        ]
