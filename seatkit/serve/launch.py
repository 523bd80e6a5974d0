"""`seat up | down | status | logs`: start a seat, wait until it serves, and stop exactly what started.

What `up` started (a PID or a container id) is recorded in SEAT_HOME/run/<profile>.json; `down`
stops that and nothing else.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, replace
from pathlib import Path

import requests

from seatkit import engine, flock, safe_yaml
from seatkit.errors import NotRunning, SeatError
from seatkit.files import write_atomic
from seatkit.seat import layout, what_runs
from seatkit.serve import backends, client, identity, keys, nsys, preflight, provenance
from seatkit.serve.backends import ImageCheck, native
from seatkit.serve.running import Running
from seatkit.serve.spec import LaunchSpec, resolve


def recorded(profile: str) -> Running | None:
    path = layout.run_record(profile)
    if not path.exists():
        return None
    try:
        return Running.from_record(safe_yaml.read_json(path, "run record"))
    except (SeatError, TypeError, OSError) as exc:  # torn, or of another shape: say so, never a traceback
        raise SeatError(
            f"the run record {path} is unreadable ({exc})",
            "check what runs (ps, docker ps), stop it by hand, then delete the file",
        ) from None


def _record(run: Running) -> None:
    write_atomic(layout.run_record(run.profile), json.dumps(asdict(run), indent=2))


def _own_record(run: Running) -> Running | None:
    """The profile's record when it is still this run's: a `seat down` and a newer `seat up` while
    this one was paused (Ctrl-Z) or slow leave a record this run must neither read nor remove."""
    try:
        current = recorded(run.profile)
    except SeatError:
        return None
    return current if current and (current.ident, current.token) == (run.ident, run.token) else None


def _forget(run: Running) -> None:
    if _own_record(run):
        layout.run_record(run.profile).unlink(missing_ok=True)


def log_path(profile: str) -> Path:
    """Where `up` keeps the seat's log (a container's is saved there when it stops)."""
    return layout.seat_log(profile)


def alive(run: Running) -> bool:
    """Whether the recorded seat runs (a PID recycled since, or a stranger's container, does not)."""
    return backends.of(run.runtime).alive(run)


def in_container(run: Running) -> bool:
    """Whether the recorded seat is a container of the docker engine (else a local process)."""
    return backends.of(run.runtime).container


def describe(run: Running) -> str:
    """What the seat is, for people: `process id 123` or `container 0123456789ab`."""
    return backends.of(run.runtime).describe(run)


def _tail(log: str, lines: int = 20) -> str:
    try:
        return "".join(Path(log).read_text(errors="replace").splitlines(True)[-lines:])
    except OSError:
        return "(no log)"


def seat_url(host: str, port: str) -> str:
    """http://host:port, an IPv6 address in brackets (http://::1:8000 is no URL)."""
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def headers(run: Running) -> dict[str, str]:
    key = run.api_key
    return {"Authorization": f"Bearer {key}"} if key else {}


def who_listens(run: Running) -> str:
    """identity.OURS when only the seat's processes listen on its port; raises on a stranger."""
    port = int(run.url.rsplit(":", 1)[1])
    return identity.check(port, lambda: backends.of(run.runtime).listeners(run))


def require_identity(run: Running) -> str:
    """Before and after each bench group: the seat still listens, and nothing else does."""
    proof = who_listens(run)
    if proof == identity.NOT_YET:
        raise SeatError(
            f"nothing of {run.profile}'s listens on {run.url} any more",
            f"seat status {run.profile}; seat logs {run.profile}",
        )
    return proof


def wait_ready(
    run: Running,
    timeout: float,
    tick: Callable[[str, float], None],
    running: Callable[[Running], bool] = alive,
) -> float:
    """Poll /health, then /v1/models, until both answer from the seat's own listener alone;
    returns seconds waited. `running` says whether the server still runs (by default: the seat
    `up` started; a container the script or compose started is not one)."""
    start = time.monotonic()
    stage = "health"
    while True:
        waited = time.monotonic() - start
        if not running(run):
            mine = _own_record(run)
            if mine is None or mine.stopping:  # its log may be another seat's: never shown as this one's
                raise SeatError(
                    f"{run.profile} was stopped while this `seat up` waited for it "
                    "(by `seat down`, or another `seat up` started it since)",
                    f"seat status {run.profile}",
                )
            backends.of(run.runtime).save_log(run)  # a container's log lives in the engine until saved
            raise SeatError(
                f"the seat exited before it was ready; last log lines:\n{_tail(run.log)}",
                f"full log: {run.log}",
            )
        proof = who_listens(run)  # a stranger on the port ends the wait at once
        if waited > timeout:
            raise SeatError(
                f"the seat was not ready after {timeout:.0f} s (waiting for {stage}); it is stopped",
                f"its log: {run.log}; raise server.health_timeout_s for cold caches",
            )
        auth = headers(run)  # a key file gone bad ends the wait; an answer cut at its deadline does not
        try:
            if stage == "health" and client.fetch("GET", f"{run.url}/health", 2).ok:
                stage = "models"
            if stage == "models":
                answer = client.fetch("GET", f"{run.url}/v1/models", 5, headers=auth)
                if (
                    answer.ok
                    and any(m["id"] == run.model for m in answer.json()["data"])
                    and proof != identity.NOT_YET
                ):
                    return waited
        except (requests.RequestException, SeatError, ValueError, KeyError, TypeError):  # TypeError: odd JSON
            pass
        tick(stage, waited)
        time.sleep(0.5)


def up(
    spec: LaunchSpec,
    tick: Callable[[str, float], None] = lambda s, t: None,
    environ: dict[str, str] | None = None,
    image_check: ImageCheck | None = None,
) -> tuple[Running, float]:
    """Preflight, start, wait until served; on any failure stop what was started.
    Knobs come from environ (default: this process's environment). A seat of an overlay image
    needs image_check (seatkit.image.vouch.image_check, from the layer above: the image's id and why
    it is not the one `seat build` recorded, or None), then runs by that id, since a tag can move
    meanwhile; without it, an image a profile runs as it is is marked unverified. The run record
    carries the seat's provenance and how it differs from its records (seatkit.serve.provenance)."""
    p = spec.profile
    # One start of a profile at a time, from the check that it is down to the record of what started.
    with flock.exclusive(
        layout.run_record(p.name).with_suffix(".lock"),
        f"seat up {p.name}",
        f"another `seat up {p.name}` is starting it",
        f"wait, then: seat status {p.name}",
    ):
        previous = recorded(p.name)
        if previous and alive(previous):
            raise SeatError(
                f"{p.name} is already up ({previous.runtime} {previous.ident[:12]}, {previous.url})",
                f"seat down {p.name} first",
            )
        run = _start(spec, environ, image_check)
    try:
        waited = wait_ready(run, p.server.health_timeout_s, tick)
    except BaseException as exc:
        if not _stop_quietly(run) and isinstance(exc, Exception):
            raise _maybe_left(run, exc) from None
        raise
    return run, waited


def _stop_quietly(run: Running) -> bool:
    """Stop what started, on the way out of a failure; False when the engine did not let it
    (the record stays for `seat down`)."""
    refused: tuple[type[BaseException], ...] = (SeatError, *engine.errors())
    try:
        stop(run, grace=10)
        return True
    except refused:
        return False
    except KeyboardInterrupt:  # a second Ctrl-C: leave now, and say what may be left
        raise SeatError(
            f"interrupted while stopping {run.profile}: it may still be there", f"seat down {run.profile}"
        ) from None


def _start(
    spec: LaunchSpec, environ: dict[str, str] | None, image_check: ImageCheck | None = None
) -> Running:
    """Preflight, start and record the seat; its run record says what started."""
    p = spec.profile
    values = spec.values(environ)
    preflight.run(replace(spec, checks=[]), values)  # the knobs' grammar first, as the script's order
    keys.refuse_exposure(values["SEAT_HOST"], bool(spec.api_key_file))
    if not spec.wraps:
        nsys.refuse_unwrapped(dict(os.environ) if environ is None else environ)
    env = {}
    key_file = ""
    if spec.api_key_file:  # made before preflight, which checks it
        key_file = str(keys.ensure(Path(resolve(spec.api_key_file, values))))
        env["VLLM_API_KEY"] = keys.read(key_file)
    preflight.run(spec, values)
    backend = backends.of(p.runtime)
    values, why = backend.prepared(spec, values, image_check)
    log = log_path(p.name)
    log.parent.mkdir(parents=True, exist_ok=True)
    run = Running(
        profile=p.name,
        runtime=p.runtime,
        ident="",
        log=str(log),
        started=time.time(),
        url=seat_url(values["SEAT_HOST"], values["SEAT_PORT"]),
        model=p.server.served_model_name,
        api_key_file=key_file,
        nsys=_nsys_values(values),
        boot=native.boot_id(),
        token=secrets.token_hex(16),
        profile_source=str(Path(p.source).resolve()),
        provenance=provenance.record(spec, values, why),
    )
    log.write_bytes(b"")  # this run's log alone: a container's is saved into it when it stops
    try:
        backend.start(spec, values, env, run, _record)
    except BaseException as exc:  # Ctrl-C, SIGTERM, a refusal or a lost engine after a start began
        stopped = bool(run.ident) and _stop_quietly(run)
        if not stopped and isinstance(exc, engine.errors()):
            raise _maybe_left(run, exc) from None  # a create whose answer was lost may have made one
        raise
    return run


def _maybe_left(run: Running, exc: BaseException) -> SeatError:
    """The failure, and that the seat may still be there: the engine did not answer to stop it."""
    failed = f"the docker engine failed ({type(exc).__name__}: {exc})"
    said = exc.message if isinstance(exc, SeatError) else failed
    return SeatError(
        f"{said}\n{run.profile} may still be there: the docker engine did not answer to stop it",
        f"seat down {run.profile} once the engine answers (it finds the container by its "
        "record or its labels)",
    )


def _nsys_values(values: dict[str, str]) -> dict | None:
    on = values.get(nsys.MODE, nsys.OFF) != nsys.OFF
    return {k: values[k] for k in (nsys.MODE, nsys.SESSION, nsys.OUTPUT)} if on else None


def stop(run: Running, grace: float) -> bool:
    """Stop the recorded process group or container; True when something was running."""
    was_alive = backends.of(run.runtime).stop(run, grace)
    _forget(run)
    return was_alive


def down(profile: str, grace: float = 30.0, containers: bool = True) -> tuple[Running, bool]:
    """Stop what `seat up` recorded, and (containers: the profile may run in docker) every
    container of a `seat up` killed before it recorded one; also whether anything was still
    running (else only what was left of it goes)."""
    run = recorded(profile)
    left = [
        r
        for backend in (backends.RUNTIMES.values() if containers else ())
        for r in backend.unrecorded(profile)
        if run is None or r.ident != run.ident
    ]
    runs = ([run] if run else []) + left
    if not runs:
        raise NotRunning(
            f"{profile} is not running: nothing `seat up` started on this machine is recorded "
            "(stopped already, or never started here)",
            "nothing to stop",
        )
    if run is not None:  # before any signal: a `seat up` still waiting on it learns who stopped it
        _record(replace(run, stopping=True))
    return runs[0], any([stop(each, grace) for each in runs])


def status(profile: str) -> dict:
    run = recorded(profile)
    if run is None:
        return {"profile": profile, "state": "down"}
    info = {**asdict(run), "state": "running" if alive(run) else "exited"}
    info["unverified"] = what_runs.mark(run.conditions())  # the mark, from its provenance's differences
    info.pop("api_key_file")
    try:
        info["health"] = client.fetch("GET", f"{run.url}/health", 2).status_code
        answer = client.fetch("GET", f"{run.url}/v1/models", 5, headers=headers(run))
        info["models"] = (
            [m.get("id") for m in answer.json()["data"]] if answer.ok else f"HTTP {answer.status_code}"
        )
    except SeatError as exc:  # the key file went bad since `up`, or an answer outran its deadline
        info["models"] = exc.message
    except requests.RequestException as exc:
        info.setdefault("health", f"unreachable ({type(exc).__name__})")
    except (ValueError, KeyError, TypeError, AttributeError):  # AttributeError: data not objects
        info["models"] = "not an OpenAI model list"
    return info


def logs(run: Running, follow: bool = True) -> Iterator[bytes]:
    return backends.of(run.runtime).logs(run, follow)
