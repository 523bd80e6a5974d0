"""`seat up`'s word on the image it starts: the id to run, and why its results are unverified.

An overlay image is checked from outside and refused unless it runs the lock (outside.require):
the one `seat build` recorded for it, else the kit's; one built from another lock than the kit's
(`seat build --lock`) runs what it was built from, and is marked so.
An image a profile runs as it is (image.overlay false: a prebuilt one, one named by SEAT_IMAGE, or
another retagged under the profile's tag) is started either way, since nothing says it should run
the lock; it is verified only when something the image cannot steer vouches for it: the record of
the build `seat build` made here, under that tag, from the pins in force now. Else every result
of the seat is marked with why.
"""

from __future__ import annotations

from seatkit.errors import SeatError
from seatkit.image import outside
from seatkit.seat.overlay_lock import Lock, load
from seatkit.seat.profiles import DockerProfile, Profile


def not_built(image: str) -> str:
    """The mark of an image no build record vouches for."""
    return (
        f"the image {image} is not one `seat build` recorded here from the pins in force now; "
        "nothing checked what it runs"
    )


def image_check(profile: Profile, image: str) -> tuple[str, str | None]:
    """launch.up's image check: the image id to run (a tag can move meanwhile), and why the seat's
    results are unverified (None: verified); a refusal for an overlay image that is not verified."""
    if not isinstance(profile, DockerProfile):
        raise SeatError(f"profile {profile.name} runs natively: it has no image to check")
    kit = load()
    lock = outside.lock_for(image, kit)
    other = None if lock.sha256 == kit.sha256 else other_lock(lock)
    if profile.image.overlay:
        return outside.require(profile, image, lock), other
    image_id, verdict = outside.by_record(profile, image, lock)
    if verdict is None:
        return image_id, not_built(image)
    if verdict.problems:  # the build vouches for the image, not for where today's mounts land
        mounts = f"{verdict.how}, but: " + "; ".join(verdict.problems)
        return image_id, mounts if other is None else f"{other}; {mounts}"
    return image_id, other


def other_lock(lock: Lock) -> str:
    """The mark of an image built from another overlay lock than the kit's (`seat build --lock`):
    it runs that lock's files, checked as such, but not the overlay the kit pins."""
    return (
        f"built from an overlay lock other than the kit's (sha256 {lock.sha256[:16]}, commit "
        f"{lock.commit[:12]}), so it runs that lock's files, not the pinned overlay"
    )
