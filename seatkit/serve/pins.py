"""profiles/NAME.lock, the digest `seat image pin` resolved for a profile's image, read as data.

The launch spec runs a prebuilt image by this digest, and `seat build` builds FROM it; resolving
a digest through a registry stays in seatkit/image/pin.py.
"""

from __future__ import annotations

from pathlib import Path

from seatkit import safe_yaml
from seatkit.errors import SeatError
from seatkit.seat.profiles import DockerProfile, Profile


def lock_path(profile: Profile) -> Path:
    return Path(profile.source).with_suffix(".lock")


def read(profile: Profile) -> dict | None:
    path = lock_path(profile)
    if not path.exists():
        return None
    data = safe_yaml.read(path, "pin of an image")
    if not isinstance(data, dict) or not {"name", "tag", "digest"} <= set(data):
        raise SeatError(
            f"{path}: expected name, tag and digest", f"run `seat image pin {profile.name}` again"
        )
    return data


def base_reference(profile: DockerProfile, allow_unpinned: bool = False) -> tuple[str, str | None]:
    """The image by name@digest, and the digest; name:tag only when unpinned is allowed."""
    image = profile.image
    locked = read(profile)
    if locked and (locked["name"], locked["tag"]) != (image.name, image.tag):
        raise SeatError(
            f"{lock_path(profile)} pins {locked['name']}:{locked['tag']}, the profile names "
            f"{image.name}:{image.tag}",
            f"run `seat image pin {profile.name}` again",
        )
    digest = image.digest or (locked or {}).get("digest")
    if image.digest and locked and locked["digest"] != image.digest:
        raise SeatError(
            f"the profile pins {image.digest} and {lock_path(profile)} pins {locked['digest']}",
            "keep one: clear the profile's digest or pin again",
        )
    if digest:
        return f"{image.name}@{digest}", digest
    if not allow_unpinned:
        raise SeatError(
            f"the image {image.name}:{image.tag} is not pinned by digest: a tag can move",
            f"`seat image pin {profile.name}` resolves it (`seat build --allow-unpinned` "
            "builds from the tag)",
        )
    return f"{image.name}:{image.tag}", None
