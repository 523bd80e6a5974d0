"""The docker runtime: the seat is a container of its image, made through the engine's API.

A container is this home's seat of a profile only while its labels say so: never a stranger that
took over its name or id, nor a seat the script, compose or another home started.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from seatkit import engine, paths, text
from seatkit.errors import SeatError
from seatkit.seat import layout
from seatkit.serve import effective, identity
from seatkit.serve.running import Running
from seatkit.serve.spec import PROFILE_LABEL, LaunchSpec, resolve

CHECKED = "checked image id"  # where `prepared` keeps it among the knob values
# Of an image no check saw: a seat started without `seat up`'s image check.
UNCHECKED = "nothing checked the image it runs: it was started without `seat up`'s image check"
HOME_LABEL = "seatkit.home"


def labels(profile: str) -> dict[str, str]:
    """What marks a container as this SEAT_HOME's seat of this profile (the home's real path:
    a relative or linked SEAT_HOME names the same home from anywhere)."""
    return {PROFILE_LABEL: profile, HOME_LABEL: str(paths.seat_home().resolve())}


def container(run: Running):
    """The recorded container, when it exists and is this home's seat of this profile."""
    from docker.errors import NotFound

    try:
        found = engine.client().containers.get(run.ident)
    except NotFound:
        return None
    marks = found.labels or {}
    return found if all(marks.get(k) == v for k, v in labels(run.profile).items()) else None


def name_taken(name: str) -> SeatError | None:
    """Who holds the seat's container name, in what state, and how to free it; None when nothing
    does. Only this home's labels make it the kit's: `seat down` removes those alone."""
    from docker.errors import NotFound

    try:
        found = engine.client().containers.get(name)
    except NotFound:
        return None
    marks = found.labels or {}
    owner = text.one_line(marks.get(PROFILE_LABEL, ""))
    said = f"a container named {name} already exists ({found.status}, {found.short_id})"
    other = ", or set SEAT_CONTAINER to another name"
    if owner and marks.get(HOME_LABEL) == labels(owner)[HOME_LABEL]:
        return SeatError(f"{said}: this SEAT_HOME's seat of {owner}", f"seat down {owner}{other}")
    whose = (
        f"a seat of {owner} that no `seat up` of this SEAT_HOME started (the serve script, "
        "compose, or another SEAT_HOME)"
        if owner
        else "not the kit's"
    )
    stop = f"docker stop {name}, then " if found.status in ("running", "restarting", "paused") else ""
    return SeatError(f"{said}: {whose}", f"{stop}docker rm {name} if it is not wanted{other}")


def started(found) -> str:
    """When the container last started (docker inspect's State.StartedAt)."""
    return str((found.attrs.get("State") or {}).get("StartedAt") or "")


def restarted(found, run: Running) -> bool:
    """Whether the container started again since `seat up` started it (its restart policy, the
    engine's start after a reboot, a `docker restart`): it then loaded what was there, unchecked."""
    return bool(found.attrs.get("RestartCount")) or started(found) != run.since


def _running(found) -> bool:
    return found is not None and found.status in ("created", "running")


def _devices(gpus) -> list:
    from docker.types import DeviceRequest

    if gpus == "all":
        return [DeviceRequest(count=-1, capabilities=[["gpu"]])]
    return [DeviceRequest(device_ids=[str(i) for i in gpus], capabilities=[["gpu"]])] if gpus else []


def _refusal(text: str, devices: list) -> SeatError:
    if devices and "could not select device driver" in text:
        return SeatError(
            "no NVIDIA container runtime: docker cannot give this container GPUs",
            "install the NVIDIA container toolkit and restart dockerd",
        )
    if devices and "nvidia-container-cli" in text:
        return SeatError(
            f"the NVIDIA container runtime could not give this container GPUs: {text}",
            "check the driver (nvidia-smi) and the toolkit (nvidia-ctk --version)",
        )
    return SeatError(f"docker refused to start the seat: {text}")


def create_and_start(
    spec: LaunchSpec, values: dict[str, str], env: dict, run: Running, record: Callable[[Running], None]
) -> None:
    """Create the container of the effective launch (the one the script, compose and k8s render;
    env: the key, when the seat takes one), record it, then start it: from its first instant,
    `down` can find it; then record when it started."""
    from docker.errors import APIError, NotFound
    from docker.types import Mount, Ulimit

    p = spec.profile
    settings = p.docker
    assert settings is not None  # a docker profile always has one
    devices = _devices(settings.gpus)
    launch = effective.container(spec)
    try:
        made = engine.client().containers.create(
            values.get(CHECKED, values["SEAT_IMAGE"]),
            effective.argv(spec, values),
            name=values["SEAT_CONTAINER"],
            device_requests=devices,
            ipc_mode=settings.ipc,
            network_mode=settings.network,
            init=settings.init,
            # Always said, "no" too: left unset, the engine's default decides whether a stopped seat
            # comes back behind the kit's back.
            restart_policy={"Name": settings.restart},
            stop_signal="SIGTERM",
            ulimits=[Ulimit(name=k, soft=v, hard=v) for k, v in settings.ulimits.items()],
            mounts=[
                Mount(m.target, resolve(m.source, values), type="bind", read_only=m.read_only)
                for m in launch.mounts
            ],
            environment=launch.environment(values, spec.passed_env(), env.get(effective.API_KEY_ENV, "")),
            labels=labels(p.name),
        )
        run.ident = made.id
        record(run)
        made.start()
    except APIError as exc:
        # The name taken since preflight looked.
        taken = name_taken(values["SEAT_CONTAINER"]) if exc.status_code == 409 and not run.ident else None
        raise taken or _refusal(str(exc.explanation or exc), devices) from None
    try:
        run.since = started(engine.client().containers.get(made.id))  # a start after this one shows
        record(run)
    except NotFound:  # removed as soon as it started: `up` finds it gone while it waits
        pass


class Docker:
    container = True

    def prepared(self, spec: LaunchSpec, values: dict[str, str], image_check) -> tuple[dict, str | None]:
        """The image is checked (verified when it is the one `seat build` recorded from the pins
        in force), then run by the id checked, since a tag can move meanwhile."""
        if image_check is None:
            return values, UNCHECKED
        image_id, why = image_check(spec.profile, values["SEAT_IMAGE"])
        return {**values, CHECKED: image_id}, why

    def start(
        self,
        spec: LaunchSpec,
        values: dict[str, str],
        env: dict[str, str],
        run: Running,
        record: Callable[[Running], None],
    ) -> None:
        create_and_start(spec, values, env, run, record)

    def alive(self, run: Running) -> bool:
        return _running(container(run))

    def listeners(self, run: Running) -> list[int]:
        return identity.container_pids(run.ident)

    def stop(self, run: Running, grace: float) -> bool:
        from docker.errors import NotFound

        found = container(run)  # looked up once: whether it runs, and what to stop
        was_alive = _running(found)
        try:
            if found is not None:
                found.stop(timeout=int(grace))
                self.save_log(run)  # the engine drops it with the container
                found.remove(force=True)
        except NotFound:
            pass
        return was_alive

    def save_log(self, run: Running) -> None:
        """Keep the container's log where `up` keeps the seat's (never where a record says: a
        record is only text); nothing to keep once someone removed the container (or the engine
        went away)."""
        gone: tuple[type[BaseException], ...] = (SeatError, OSError, *engine.errors())
        try:
            layout.seat_log(run.profile).write_bytes(b"".join(self.logs(run, follow=False)))
        except gone:
            pass

    def logs(self, run: Running, follow: bool) -> Iterator[bytes]:
        found = container(run)
        if found is None:
            raise SeatError(
                f"the container of {run.profile} ({run.ident[:12]}) is gone",
                f"what `seat up` saved of its log, if anything: {run.log}",
            )
        yield from found.logs(stream=True, follow=follow)
        if follow:
            engine.client()  # a stream that ended because the engine went away says so

    def unrecorded(self, profile: str) -> list[Running]:
        """Containers of this profile and SEAT_HOME that no record names: a `seat up` killed
        between creating the container and recording it. Nothing when no engine answers."""
        try:
            found = engine.client().containers.list(
                all=True, filters={"label": [f"{k}={v}" for k, v in labels(profile).items()]}
            )
        except engine.NoEngine:
            return []
        log = str(layout.seat_log(profile))
        return [Running(profile, "docker", c.id, "", "", log, 0.0) for c in found]

    def describe(self, run: Running) -> str:
        return f"container {run.ident[:12]}"


BACKEND = Docker()
