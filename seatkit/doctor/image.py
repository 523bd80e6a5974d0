"""Image rows: base pinned by digest, and whether the image the seat runs is the one `seat build`
recorded from the pins in force (its ID, never what the image says of itself in its labels).
"""

from __future__ import annotations

from seatkit import engine
from seatkit.doctor.rows import Row, cannot, fail, ok, warn
from seatkit.errors import SeatError
from seatkit.seat import layout, what_runs
from seatkit.seat.profiles import DockerProfile, NativeProfile, Profile
from seatkit.serve import launch, runtime

LAYER = "image"


def native(profile: NativeProfile) -> Row:
    """A native seat has no image: its venv is checked against the install plan, and every file
    of it against the kit's record of what `seat setup` installed, instead."""
    venv = layout.venv(profile.native.venv)
    problem = runtime.venv_problem(profile.native)
    if problem is not None:
        fatal, message = problem
        return (fail if fatal else warn)(LAYER, "venv", message, f"seat setup {profile.name}")
    return ok(LAYER, "venv", f"native runtime, no image; {venv.name} as planned and installed")


def base(profile: DockerProfile) -> Row:
    from seatkit.serve import pins

    try:
        ref, digest = pins.base_reference(profile)
    except SeatError as exc:
        return warn(LAYER, "base digest", exc.message, exc.hint)
    return ok(LAYER, "base digest", ref)


def overlay(profile: DockerProfile, image: str, running: launch.Running | None) -> Row:
    """Whether the image the seat runs (the running container's, else the one SEAT_IMAGE names)
    is the one `seat build` recorded from the pins in force (seatkit/image/vouch.py).
    running: the profile's running seat (server.seat), None when there is none to check."""
    from seatkit.image import vouch

    no_engine: tuple[type[BaseException], ...] = (engine.NoEngine, *engine.errors())
    try:
        ident = running.ident if running is not None and launch.in_container(running) else None
        runs = engine.client().containers.get(ident).image.id if ident else vouch.image_id(image)
        why = vouch.difference(profile, image, runs)
    except no_engine:
        return cannot(LAYER, "overlay", "no docker engine answers", engine.HINT)
    except SeatError as exc:
        return fail(LAYER, "overlay", exc.message, f"seat build {profile.name}")
    where = f"the running container {ident[:12]}: " if ident else ""
    if why is not None:
        name = profile.name
        fix = f"seat build {name}" + (f", then seat down {name} && seat up {name}" if ident else "")
        return fail(LAYER, "overlay", where + why, fix)
    said = f"image sha256:{runs[7:19]} ({image}) is the one `seat build` recorded from the pins in force"
    return ok(LAYER, "overlay", where + said)


def experiment(profile: Profile, running: launch.Running | None) -> list[Row]:
    """Why the seat's results are marked, before any figure: of a running seat, as `seat up`
    recorded it (its provenance, each difference saying what to do), never as the profile reads
    now; before one, the profile's own experiment and what it sets off the allowlist."""
    marks = what_runs.mark(running.conditions() if running else {"differs": what_runs.differs(profile)})
    if not marks:
        return []
    restart = f"seat down {profile.name} && seat up {profile.name}"
    if running is None:
        what, fix = "experiment:", "take what the mark names out of the profile for a verified seat"
    else:
        what, fix = "the running seat:", f"mend what each difference names, then {restart}"
    said = f"{what_runs.marked(what, marks)}: every result of this seat is marked"
    return [warn(LAYER, "verified", said, fix)]


def rows(profile: Profile, image: str | None, running: launch.Running | None) -> list[Row]:
    """running: the profile's running seat (server.seat), None when there is none to check."""
    marked = experiment(profile, running)
    if isinstance(profile, NativeProfile):
        return [*marked, native(profile)]
    assert image is not None  # a docker seat's spec has its SEAT_IMAGE knob
    if not profile.image.overlay:
        return [*marked, base(profile)]
    return [*marked, base(profile), overlay(profile, image, running)]
