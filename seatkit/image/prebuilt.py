"""An image built elsewhere (the original author's prebuilt seat) against the overlay lock.

The kit does not build it, so a difference from the lock is a fact about the image, not a fault:
the pushed image was probably made from a working tree that still had folders the overlay
repository's .gitignore dropped. `seat up` prints these facts; `seat doctor` can call compare().
"""

from __future__ import annotations

from seatkit.image import build
from seatkit.seat.overlay_lock import Lock, load
from seatkit.seat.profiles import DockerProfile, Profile
from seatkit.serve import pins


def compare(profile: Profile, lock: Lock | None = None, image: str | None = None) -> dict:
    """The profile's image, taken by its pinned digest (or image, the one the seat will run when
    SEAT_IMAGE names another), against the lock: what matches, and the missing, changed and extra
    files of its vllm package."""
    lock = lock or load()
    assert isinstance(profile, DockerProfile)  # `seat up` compares a prebuilt image's seat alone
    seat_image = profile.image
    if image is None or image == f"{seat_image.name}:{seat_image.tag}":
        image, digest = pins.base_reference(profile)  # the profile's own, by its pinned digest
    else:  # another image chosen with SEAT_IMAGE: the profile's pin says nothing of it
        digest = image.partition("@")[2] or None
    try:
        found = build.verify_installed(image, seat_image.vllm_dir, is_container=False, lock=lock)
        package = True
    except build.NoPackage:  # a fact like the others (the image keeps vllm elsewhere), not a failure
        found, package = {"missing": sorted(lock.files), "changed": [], "extra": []}, False
    return {
        "image": image,
        "digest": digest,
        "vllm_dir": seat_image.vllm_dir,
        "package": package,
        "overlay_commit": lock.commit,
        "locked": len(lock.files),
        "matching": len(lock.files) - len(found["missing"]) - len(found["changed"]),
        "same": not (found["missing"] or found["changed"]),
        **found,
    }


def facts(result: dict, shown: int = 5) -> list[str]:
    """compare()'s result as lines for people: counts, then a few names of each kind."""
    lines = [
        f"{result['image']}: {result['matching']} of {result['locked']} locked files as locked "
        f"(overlay {result['overlay_commit'][:12]})"
    ]
    if not result["package"]:
        lines.append(f"no folder at {result['vllm_dir']}: set image.vllm_dir to where its vllm package is")
    for kind, meaning in (
        ("missing", "locked but absent"),
        ("changed", "present with other content"),
        ("extra", "present, not in the lock"),
    ):
        names = result[kind]
        if names:
            more = f", +{len(names) - shown} more" if len(names) > shown else ""
            lines.append(f"{len(names)} {kind} ({meaning}): {', '.join(names[:shown])}{more}")
    return lines
