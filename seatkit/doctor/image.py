"""Image rows: base pinned by digest, provenance labels, the overlay checked where the seat runs.

The overlay row is the outside check of seatkit/image/outside.py: never what the image says.
"""

from __future__ import annotations

from seatkit import engine
from seatkit.doctor.rows import Row, cannot, fail, ok, warn
from seatkit.errors import SeatError
from seatkit.seat import layout, what_runs
from seatkit.seat.profiles import DockerProfile, NativeProfile, Profile
from seatkit.serve import launch, runtime

LAYER = "image"
LABELS = (
    "org.opencontainers.image.base.digest",
    "io.seatkit.profile",
    "io.seatkit.overlay.commit",
    "io.seatkit.overlay.lock.sha256",
)


def native(profile: NativeProfile) -> Row:
    """A native seat has no image: its venv is checked against the install plan instead."""
    venv = layout.venv(profile.native.venv)
    problem = runtime.venv_problem(profile.native)
    if problem is not None:
        fatal, message = problem
        return (fail if fatal else warn)(LAYER, "venv", message, f"seat setup {profile.name}")
    return ok(LAYER, "venv", f"native runtime, no image; {venv.name} as planned")


def base(profile: DockerProfile) -> Row:
    from seatkit.serve import pins

    try:
        ref, digest = pins.base_reference(profile)
    except SeatError as exc:
        return warn(LAYER, "base digest", exc.message, exc.hint)
    return ok(LAYER, "base digest", ref)


def labels(image: str, profile: DockerProfile) -> Row:
    from seatkit.image import build

    no_engine: tuple[type[BaseException], ...] = (engine.NoEngine, *engine.errors())
    try:
        found = build.labels(image)["labels"]
    except no_engine:
        return cannot(LAYER, "labels", "no docker engine answers", engine.HINT)
    except SeatError as exc:
        return fail(LAYER, "labels", exc.message, f"seat build {profile.name}")
    missing = [k for k in LABELS if not found.get(k)]
    if missing:
        return fail(LAYER, "labels", f"{image} lacks {', '.join(missing)}", "seat build (it sets them)")
    return ok(
        LAYER,
        "labels",
        f"overlay {found['io.seatkit.overlay.commit'][:12]}, lock "
        f"{found['io.seatkit.overlay.lock.sha256'][:12]}",
    )


def overlay(profile: DockerProfile, image: str) -> Row:
    """The outside check (seatkit/image/outside.py) on the running container, else the image."""
    from seatkit.image import outside
    from seatkit.seat import overlay_lock

    running = launch.recorded(profile.name)
    where, is_container = image, False
    no_engine: tuple[type[BaseException], ...] = (engine.NoEngine, *engine.errors())
    try:
        if running and launch.in_container(running) and launch.alive(running):
            where, is_container = running.ident, True
        verdict = outside.check(profile, where, outside.lock_for(image, overlay_lock.load()), is_container)
    except no_engine:
        return cannot(LAYER, "overlay", "no docker engine answers", engine.HINT)
    except SeatError as exc:
        return fail(LAYER, "overlay", exc.message, f"seat build {profile.name}")
    what = f"container {where[:12]}" if is_container else f"image {where}"
    if not verdict.verified:
        return fail(
            LAYER,
            "overlay",
            f"{what} ({verdict.how}): {'; '.join(verdict.problems)}",
            f"seat build {profile.name}",
        )
    return ok(LAYER, "overlay", f"{what}: runs the locked overlay ({verdict.how})")


def experiment(profile: Profile) -> list[Row]:
    """An experiment may run other code than the lock: the doctor says so before any figure."""
    if profile.experiment is None:
        return []
    return [
        warn(
            LAYER,
            "verified",
            what_runs.marked("experiment:", what_runs.conditions(profile))
            + ": env or mounts may change what runs, every result of this seat is marked",
            "take `experiment` out of the profile (and what it allowed) for a verified seat",
        )
    ]


def rows(profile: Profile, image: str | None) -> list[Row]:
    if isinstance(profile, NativeProfile):
        return [*experiment(profile), native(profile)]
    assert image is not None  # a docker seat's spec has its SEAT_IMAGE knob
    if not profile.image.overlay:
        return [*experiment(profile), base(profile), labels(image, profile)]
    return [*experiment(profile), base(profile), labels(image, profile), overlay(profile, image)]
