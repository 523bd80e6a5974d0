"""`seat up | down | status | logs`: start a seat, wait until it serves, and stop exactly what started.

What `up` started (a PID or a container id) is recorded in SEAT_HOME/run/<profile>.json; `down`
stops that and nothing else.
"""

from __future__ import annotations

import json
import math
import os
import re
import secrets
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import requests

from seatkit import engine, flock, paths, safe_yaml
from seatkit.errors import SeatError
from seatkit.files import write_atomic
from seatkit.seat import layout, what_runs
from seatkit.seat.profiles import Profile
from seatkit.serve import identity, keys, nsys, preflight
from seatkit.serve.spec import PROFILE_LABEL, LaunchSpec, resolve


@dataclass
class Running:
    profile: str
    runtime: str
    ident: str  # PID (native) or container id (docker)
    url: str
    model: str
    log: str
    started: float
    api_key_file: str = ""
    since: str = ""  # native: the process's start time, which with the PID and boot names it uniquely
    nsys: dict | None = None  # the profiling knobs in force, when the seat runs under nsys
    boot: str = ""  # native: the boot the PID and start time belong to (they repeat across boots)
    token: str = ""  # this `seat up`'s own: cleanup removes only a record that still holds it
    stopping: bool = False  # set by `seat down` before it signals: the waiting `up` says who stopped it

    @property
    def api_key(self) -> str | None:
        return keys.read(self.api_key_file) if self.api_key_file else None


def _state_file(profile: str) -> Path:
    return layout.run_record(profile)


PID_MAX = 1 << 22  # the kernel's ceiling for pid_max: every PID is below it
URL = re.compile(r"http://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):[0-9]{1,5}")


def _checked(run: Running, profile: str) -> Running:
    """A record as `up` writes it: its own profile, a PID of a process `up` could start or a full
    container id (docker takes a prefix as any container's), a seat URL, a finite time."""
    texts = (
        run.profile,
        run.runtime,
        run.ident,
        run.url,
        run.model,
        run.log,
        run.api_key_file,
        run.since,
        run.boot,
        run.token,
    )
    if not all(isinstance(value, str) for value in texts):
        raise TypeError("a field that holds text holds something else")
    if (
        isinstance(run.started, bool)
        or not isinstance(run.started, (int, float))
        or not math.isfinite(run.started)
    ):
        raise TypeError("started is not a time")
    if not isinstance(run.stopping, bool):
        raise TypeError("stopping is not true or false")
    if run.nsys is not None and not isinstance(run.nsys, dict):
        raise TypeError("nsys is not a mapping")
    if run.profile != profile:
        raise ValueError(f"it names profile {run.profile!r}")
    if run.runtime == "native" and not (
        run.ident.isascii()
        and run.ident.isdigit()
        and run.ident == str(int(run.ident))
        and 1 < int(run.ident) < PID_MAX
        and (run.since == "" or run.since.isascii() and run.since.isdigit())
    ):
        raise ValueError(
            f"a native seat's ident {run.ident!r} (since {run.since!r}) is not a PID `up` started"
        )
    if not URL.fullmatch(run.url):
        raise ValueError(f"url {run.url!r} is not a seat's http://host:port")
    if run.runtime == "docker" and not (len(run.ident) == 64 and set(run.ident) <= set("0123456789abcdef")):
        raise ValueError(f"a docker seat's ident {run.ident!r} is not a full container id")
    if not re.fullmatch(r"([0-9a-f]{32})?", run.token) or not re.fullmatch(r"[0-9a-f-]{0,36}", run.boot):
        raise ValueError("its token or boot id is not one `up` writes")
    if run.runtime not in ("native", "docker"):
        raise ValueError(f"runtime {run.runtime!r} is neither native nor docker")
    return run


def recorded(profile: str) -> Running | None:
    path = _state_file(profile)
    if not path.exists():
        return None
    try:
        return _checked(Running(**safe_yaml.read_json(path, "run record")), profile)
    except (SeatError, ValueError, TypeError, OSError) as exc:  # torn or foreign: say so, never a traceback
        raise SeatError(
            f"the run record {path} is unreadable ({exc})",
            "check what runs (ps, docker ps), stop it by hand, then delete the file",
        ) from None


def _record(run: Running) -> None:
    write_atomic(_state_file(run.profile), json.dumps(asdict(run), indent=2))


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
        _state_file(run.profile).unlink(missing_ok=True)


def boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:  # no procfs: start times are all there is
        return ""


def _inherited() -> dict[str, str]:
    """This shell's environment less what changes what the seat runs (a PYTHONPATH or LD_PRELOAD
    left exported): the profile alone decides that, as in a container. PATH stays: the server is
    started by its full path, and the compilers its JIT runs are the host's."""
    return {k: v for k, v in os.environ.items() if k == "PATH" or not what_runs.env_reason(k)}


def _native_start(spec: LaunchSpec, values: dict[str, str], log: Path, env: dict) -> str:
    run_env = {**_inherited(), **spec.env, **env}
    venv = resolve(spec.venv, values)
    iomp = Path(venv) / "lib" / "libiomp5.so"
    if spec.profile.native.preload_iomp and iomp.exists():
        run_env["LD_PRELOAD"] = ":".join(
            filter(None, [str(iomp), spec.env.get("LD_PRELOAD")])
        )  # as the script
    argv = [resolve(w, values) for w in spec.command]
    with log.open("ab") as fh:
        try:
            # Its own session, so `down` can stop the server and every worker it forked.
            proc = subprocess.Popen(
                argv,
                env=run_env,
                stdout=fh,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError as exc:  # ENOENT here also means a script whose interpreter is gone
            raise SeatError(
                f"could not start {argv[0]}: {exc.strerror}",
                f"run `seat setup {spec.profile.name}` to make its runtime again",
            ) from None
    return str(proc.pid)


def _docker_start(spec: LaunchSpec, values: dict[str, str], env: dict, run: Running) -> None:
    """Create the container, record it, then start it: from its first instant, `down` can find it."""
    from docker.errors import APIError
    from docker.types import DeviceRequest, Mount, Ulimit

    p = spec.profile
    gpus = p.docker.gpus
    devices = (
        [DeviceRequest(count=-1, capabilities=[["gpu"]])]
        if gpus == "all"
        else [DeviceRequest(device_ids=[str(i) for i in gpus], capabilities=[["gpu"]])]
        if gpus
        else []
    )
    command = spec.container_argv(values)
    client = engine.client()
    try:
        container = client.containers.create(
            values.get(VERIFIED, values["SEAT_IMAGE"]),
            command,
            name=values["SEAT_CONTAINER"],
            device_requests=devices,
            ipc_mode=p.docker.ipc,
            network_mode=p.docker.network,
            init=p.docker.init,
            stop_signal="SIGTERM",
            ulimits=[Ulimit(name=k, soft=v, hard=v) for k, v in p.docker.ulimits.items()],
            mounts=[
                Mount(m.target, resolve(m.source, values), type="bind", read_only=m.read_only)
                for m in spec.mounts
            ],
            environment={**spec.env, **spec.container_knobs(values), **spec.passed_env(), **env},
            labels=_labels(p.name),
        )
        run.ident = container.id
        _record(run)
        container.start()
    except APIError as exc:
        text = str(exc.explanation or exc)
        if devices and "could not select device driver" in text:
            raise SeatError(
                "no NVIDIA container runtime: docker cannot give this container GPUs",
                "install the NVIDIA container toolkit and restart dockerd",
            ) from None
        if devices and "nvidia-container-cli" in text:
            raise SeatError(
                f"the NVIDIA container runtime could not give this container GPUs: {text}",
                "check the driver (nvidia-smi) and the toolkit (nvidia-ctk --version)",
            ) from None
        raise SeatError(f"docker refused to start the seat: {text}") from None


def _labels(profile: str) -> dict[str, str]:
    """What marks a container as this SEAT_HOME's seat of this profile (the home's real path:
    a relative or linked SEAT_HOME names the same home from anywhere)."""
    return {PROFILE_LABEL: profile, "seatkit.home": str(paths.seat_home().resolve())}


def log_path(profile: str) -> Path:
    """Where `up` keeps the seat's log (a container's is saved there when it stops)."""
    return layout.seat_log(profile)


def _container(run: Running):
    """The recorded container, when it exists and is this home's seat of this profile (never a
    stranger that took over its name or id, nor a seat the script, compose or another home started)."""
    from docker.errors import NotFound

    try:
        container = engine.client().containers.get(run.ident)
    except NotFound:
        return None
    labels = container.labels or {}
    return container if all(labels.get(k) == v for k, v in _labels(run.profile).items()) else None


def unrecorded(profile: str) -> list[Running]:
    """Containers of this profile and SEAT_HOME that no record names: a `seat up` killed between
    creating the container and recording it. Nothing when no engine answers."""
    try:
        found = engine.client().containers.list(
            all=True, filters={"label": [f"{k}={v}" for k, v in _labels(profile).items()]}
        )
    except engine.NoEngine:
        return []
    return [Running(profile, "docker", c.id, "", "", str(log_path(profile)), 0.0) for c in found]


def alive(run: Running) -> bool:
    """Whether the recorded seat runs. A native seat is its PID with its start time in its boot: a
    PID recorded before a reboot and reused since names a stranger, never signalled."""
    if run.runtime == "native":
        return (
            bool(run.since)
            and (not run.boot or run.boot == boot_id())
            and process_start(int(run.ident)) == run.since
        )
    return _running(_container(run))


def _running(container) -> bool:
    return container is not None and container.status in ("created", "running")


def process_start(pid: int) -> str | None:
    """When a live (not zombie) process started, in clock ticks since boot; None when gone.

    A recycled PID gets another start time, so the pair names exactly the process `up` started.
    Unlike its command line, this is readable at every instant, even in the middle of an exec.
    """
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if fields[0] == "Z" else fields[19]


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
    if run.runtime == "native":
        return identity.check(port, lambda: identity.session_pids(int(run.ident)))
    return identity.check(port, lambda: identity.container_pids(run.ident))


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
            _save_docker_log(run)  # a container's log lives in the engine until saved
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
        try:
            if stage == "health" and requests.get(f"{run.url}/health", timeout=2).ok:
                stage = "models"
            if stage == "models":
                answer = requests.get(f"{run.url}/v1/models", headers=headers(run), timeout=5)
                if (
                    answer.ok
                    and any(m["id"] == run.model for m in answer.json()["data"])
                    and proof != identity.NOT_YET
                ):
                    return waited
        except (requests.RequestException, ValueError, KeyError, TypeError):  # TypeError: odd JSON
            pass
        tick(stage, waited)
        time.sleep(0.5)


ImageCheck = Callable[[Profile, str], str]  # (profile, image) -> the id verified, or a refusal
VERIFIED = "verified image id"  # where _start keeps it among the knob values


def up(
    spec: LaunchSpec,
    tick: Callable[[str, float], None] = lambda s, t: None,
    environ: dict[str, str] | None = None,
    image_check: ImageCheck | None = None,
) -> tuple[Running, float]:
    """Preflight, start, wait until served; on any failure stop what was started.
    Knobs come from environ (default: this process's environment). A seat of an overlay image
    needs image_check (seatkit.image.outside.require, from the layer above): the image is checked
    from outside, then run by the id it checked, since a tag can move meanwhile."""
    p = spec.profile
    # One start of a profile at a time, from the check that it is down to the record of what started.
    with flock.exclusive(
        _state_file(p.name).with_suffix(".lock"),
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
    try:
        stop(run, grace=10)
        return True
    except (SeatError, *engine.errors()):
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
    keys.refuse_exposure(values["SEAT_HOST"], bool(spec.api_key_file))
    spec.container_argv(values)  # refuses a bad knob before anything starts
    if not spec.wraps:
        nsys.refuse_unwrapped(environ if environ is not None else os.environ)
    env = {}
    key_file = ""
    if spec.api_key_file:  # made before preflight, which checks it
        key_file = str(keys.ensure(Path(resolve(spec.api_key_file, values))))
        env["VLLM_API_KEY"] = keys.read(key_file)
    preflight.run(spec, values)
    if not spec.native and p.image.overlay:
        if image_check is None:
            raise SeatError(
                f"{p.name} runs an overlay image and nothing checked it from outside",
                "start it with `seat up`, which does",
            )
        values = {**values, VERIFIED: image_check(p, values["SEAT_IMAGE"])}
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
        boot=boot_id(),
        token=secrets.token_hex(16),
    )
    log.write_bytes(b"")  # this run's log alone: a container's is saved into it when it stops
    try:
        if spec.native:  # the token in its environment proves, before any signal, that the PID is ours
            run.ident = _native_start(spec, values, log, {**env, TOKEN_ENV: run.token})
            run.since = process_start(int(run.ident)) or ""
            _record(run)
        else:
            _docker_start(spec, values, env, run)
    except BaseException as exc:  # Ctrl-C, SIGTERM, a refusal or a lost engine after a start began
        stopped = bool(run.ident) and _stop_quietly(run)
        if not stopped and not spec.native and isinstance(exc, engine.errors()):
            raise _maybe_left(run, exc) from None  # a create whose answer was lost may have made one
        raise
    return run


def _maybe_left(run: Running, exc: Exception) -> SeatError:
    """The failure, and that the seat may still be there: the engine did not answer to stop it."""
    said = (
        exc.message
        if isinstance(exc, SeatError)
        else f"the docker engine failed ({type(exc).__name__}: {exc})"
    )
    return SeatError(
        f"{said}\n{run.profile} may still be there: the docker engine did not answer to stop it",
        f"seat down {run.profile} once the engine answers (it finds the container by its "
        "record or its labels)",
    )


def _nsys_values(values: dict[str, str]) -> dict | None:
    if values.get(nsys.MODE, nsys.OFF) == nsys.OFF:
        return None
    return {k: values[k] for k in (nsys.MODE, nsys.SESSION, nsys.OUTPUT)}


def _save_docker_log(run: Running) -> None:
    """Keep a container's log where `up` keeps the seat's (never where a record says: a record is
    only text); nothing to keep once someone removed the container (or the engine went away)."""
    if run.runtime == "docker":
        try:
            log_path(run.profile).write_bytes(b"".join(logs(run, follow=False)))
        except (SeatError, OSError, *engine.errors()):
            pass


TOKEN_ENV = "SEATKIT_RUN_TOKEN"


def holds_token(run: Running) -> bool:
    """Whether the recorded PID's environment holds the record's token, which only the `seat up`
    that started it knew. A start time can be copied from /proc/PID/stat into a record edited by
    hand; this cannot (another user's environment is not even readable)."""
    try:
        environ = safe_yaml.read_bytes(
            Path(f"/proc/{int(run.ident)}/environ"), "process environment", 4 << 20
        )
    except (SeatError, OSError):
        return False
    return bool(run.token) and f"{TOKEN_ENV}={run.token}".encode() in environ.split(b"\0")


def stop(run: Running, grace: float) -> bool:
    """Stop the recorded process group or container; True when something was running."""
    if run.runtime == "native":
        was_alive = alive(run)
        pid = int(run.ident)
        if was_alive and not holds_token(run):
            raise SeatError(
                f"PID {pid} has the recorded start time, but not {run.profile}'s run token: "
                "it cannot be proven to be the seat, so nothing was signalled",
                f"check it with `ps -p {pid} -o pid,lstart,args`; stop it by hand if it is "
                f"the seat, then delete {_state_file(run.profile)}",
            )
        if was_alive:
            _signal_group(pid, signal.SIGTERM)
            deadline = time.monotonic() + grace
            while alive(run) and time.monotonic() < deadline:
                time.sleep(0.2)
            # The workers share the server's process group: end any that outlived it. Only
            # while the group was ours: a recycled PID may lead someone else's group.
            _signal_group(pid, signal.SIGKILL)
        _reap(pid)
    else:
        from docker.errors import NotFound

        container = _container(run)  # looked up once: whether it runs, and what to stop
        was_alive = _running(container)
        try:
            if container is not None:
                container.stop(timeout=int(grace))
                _save_docker_log(run)  # the engine drops it with the container
                container.remove(force=True)
        except NotFound:
            pass
    _forget(run)
    return was_alive


def _reap(pid: int) -> None:
    """Collect the exit status when this process started the server (no zombie left behind)."""
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def down(profile: str, grace: float = 30.0, containers: bool = True) -> tuple[Running, bool]:
    """Stop what `seat up` recorded, and (containers: the profile may run in docker) every
    container of a `seat up` killed before it recorded one; also whether anything was still
    running (else only what was left of it goes)."""
    run = recorded(profile)
    left = [r for r in unrecorded(profile) if run is None or r.ident != run.ident] if containers else []
    runs = ([run] if run else []) + left
    if not runs:
        raise SeatError(
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
    info.pop("api_key_file")
    try:
        info["health"] = requests.get(f"{run.url}/health", timeout=2).status_code
        answer = requests.get(f"{run.url}/v1/models", headers=headers(run), timeout=5)
        info["models"] = (
            [m.get("id") for m in answer.json()["data"]] if answer.ok else f"HTTP {answer.status_code}"
        )
    except SeatError as exc:  # the key file went bad since `up`
        info["models"] = exc.message
    except requests.RequestException as exc:
        info.setdefault("health", f"unreachable ({type(exc).__name__})")
    except (ValueError, KeyError, TypeError, AttributeError):  # AttributeError: data not objects
        info["models"] = "not an OpenAI model list"
    return info


def logs(run: Running, follow: bool = True) -> Iterator[bytes]:
    if run.runtime == "docker":
        container = _container(run)
        if container is None:
            raise SeatError(
                f"the container of {run.profile} ({run.ident[:12]}) is gone",
                f"what `seat up` saved of its log, if anything: {run.log}",
            )
        yield from container.logs(stream=True, follow=follow)
        if follow:
            engine.client()  # a stream that ended because the engine went away says so
        return
    try:
        fh = open(run.log, "rb")
    except OSError as exc:
        raise SeatError(
            f"the log of {run.profile} cannot be read: {run.log} ({exc.strerror})",
            f"seat status {run.profile}; `seat up` starts a new log",
        ) from None
    with fh:
        while True:
            chunk = fh.read(65536)
            if chunk:
                yield chunk
            elif not follow or not alive(run):
                return
            else:
                time.sleep(0.3)
