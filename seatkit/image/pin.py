"""`seat image pin`: the image's tag resolved to its registry digest, kept in the profile's lock.

The lock sits beside the profile (profiles/NAME.lock; read by seatkit/serve/pins.py). `seat build`
builds FROM name@digest and refuses a base without one unless told otherwise; a prebuilt image runs
by it. A tag alone can move under the same name.
"""

from __future__ import annotations

import time

import yaml

from seatkit import engine
from seatkit.errors import SeatError
from seatkit.files import write_atomic
from seatkit.seat.profiles import Profile
from seatkit.serve.pins import lock_path


def resolve(name: str, tag: str) -> str:
    """The digest the registry serves for name:tag now (through the engine, with its credentials)."""
    from docker.errors import APIError

    try:
        return engine.client().images.get_registry_data(f"{name}:{tag}").id
    except APIError as exc:
        raise SeatError(
            f"cannot resolve {name}:{tag} through its registry: {exc.explanation or exc}",
            "check the name and tag, and `docker login` if the registry needs it",
        ) from None


def pin(profile: Profile) -> dict:
    if profile.image is None:
        raise SeatError(f"profile {profile.name} has no image (runtime {profile.runtime})")
    image = profile.image
    digest = resolve(image.name, image.tag)
    record = {
        "name": image.name,
        "tag": image.tag,
        "digest": digest,
        "pinned_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    use = (
        f"`seat build {profile.name}` builds FROM name@digest"
        if image.overlay
        else f"`seat up {profile.name}` runs name@digest"
    )
    header = (
        f"# The image of profile {profile.name}, pinned by `seat image pin`: the digest its tag\n"
        f"# had when pinned. {use}.\n"
    )
    write_atomic(lock_path(profile), header + yaml.safe_dump(record, sort_keys=False))
    return record
