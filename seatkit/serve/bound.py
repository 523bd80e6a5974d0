"""A running seat as the profile it was launched from: `seat up` records the profile's sha256, and a
seat is judged (its config checked, its results marked) only by that profile, never by the file
edited since."""

from __future__ import annotations

from seatkit.errors import SeatError
from seatkit.seat.profiles import Profile
from seatkit.serve import launch
from seatkit.serve.running import Running


def seat_of(profile: Profile) -> Running | None:
    """The seat `seat up` started for the profile and still running, or None; refused when the
    profile reads otherwise now than when it was launched (edited, or another file of that name
    whose fields differ): judged by it, a seat would be held to (and its results marked by) what
    it does not run."""
    run = launch.recorded(profile.name)
    if run is None or not launch.alive(run):
        return None
    launched = (run.provenance or {}).get("profile_sha256")  # none: an older kit's, marked unknown
    if launched and launched != profile.sha256:
        raise SeatError(
            f"{profile.name} runs the profile as it was at `seat up` (sha256 "
            f"{launched[:16]}); {profile.source} reads otherwise now (sha256 "
            f"{profile.sha256[:16]}), so nothing of the running seat can be judged by it",
            f"seat down {profile.name} && seat up {profile.name}",
        )
    return run
