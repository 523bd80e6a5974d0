"""Whether a docker seat's image is the locked stack: equality with the record `seat build` wrote.

An image id is the hash of the image's configuration, which names every layer by the hash of its
content: an image whose id is the one `seat build` recorded here holds exactly what that build
made. So the record is the proof, with no look inside the image. A seat is verified when the
image it runs has the recorded id AND the pins that build was made from equal the pins in force
now (the base's digest, the overlay and b12x locks, where the profile puts them, the kit's build
recipe and version). Anything else is started too, and every result of it is marked with the
difference: a retagged or rebuilt image, one built from an older lock, a prebuilt one.
What a running container mounts, sets and runs is the launch's record, not the image's.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import seatkit
from seatkit import engine, regions, safe_yaml
from seatkit.errors import SeatError
from seatkit.files import write_atomic
from seatkit.image.dockerfile import DOCKERFILE, IMAGE_FILES, SCRIPTS
from seatkit.seat import layout
from seatkit.seat.overlay_lock import Lock, load, load_b12x
from seatkit.seat.profiles import DockerProfile, Profile
from seatkit.serve import pins as base_pins


def _record_path(tag: str) -> Path:
    return layout.build_records() / (re.sub(r"[^A-Za-z0-9._-]", "_", tag) + ".json")


def _docker(profile: Profile) -> DockerProfile:
    if not isinstance(profile, DockerProfile):
        raise SeatError(f"profile {profile.name} runs natively: it has no image to check")
    return profile


def recipe() -> str:
    """SHA-256 of what the kit builds with: the Dockerfile (less its rendered defaults, which
    `seat build` overrides) and the scripts it copies into the image."""
    digest = hashlib.sha256(regions.replace(DOCKERFILE.read_text(), "", "Dockerfile").encode())
    for script in SCRIPTS:
        digest.update((IMAGE_FILES / script).read_bytes())
    return digest.hexdigest()


def pins(profile: Profile, lock: Lock, b12x: Lock | None, base: str | None) -> dict[str, str]:
    """What an image of the profile is built from. base: the base by name@digest (None: unpinned)."""
    image = _docker(profile).image
    return {
        "base": base or f"{image.name}:{image.tag} (a tag, not pinned by digest)",
        "overlay lock": lock.sha256,
        "b12x lock": b12x.sha256 if b12x else "none",
        "vllm_dir": image.vllm_dir,
        "b12x_dir": image.b12x_dir,
        "build recipe": recipe(),
        "kit version": seatkit.__version__,
    }


def pins_now(profile: Profile) -> dict[str, str]:
    """The pins in force: the profile's base pin, the kit's locks, this kit."""
    base, digest = base_pins.base_reference(_docker(profile), allow_unpinned=True)
    return pins(profile, load(), load_b12x(), base if digest else None)


def record(tag: str, image_id: str, built_from: dict[str, str]) -> None:
    """What `seat build` made: the image id under its tag, and the pins it was built from."""
    write_atomic(_record_path(tag), json.dumps({"tag": tag, "id": image_id, "pins": built_from}, indent=2))


def recorded(tag: str) -> dict | None:
    """The build record of a tag; None when there is none (or it is torn, or of another kit)."""
    data = _read(_record_path(tag))
    return data if data and data.get("tag") == tag else None


def _recorded_as(image_id: str) -> dict | None:
    """The build record of the image, whatever tag it was built under: run by its id or a second
    tag, it is still the image that build made."""
    found = (_read(path) for path in sorted(layout.build_records().glob("*.json")))
    return next((data for data in found if data and data.get("id") == image_id), None)


def _read(path: Path) -> dict | None:
    try:
        data = safe_yaml.read_json(path, "build record")
    except (OSError, SeatError):  # none, or torn
        return None
    return data if isinstance(data, dict) and isinstance(data.get("pins"), dict) else None


def _short(digest: str) -> str:
    return digest.removeprefix("sha256:")[:12]


def difference(profile: Profile, tag: str, image_id: str) -> str | None:
    """Why the image under tag (image_id: the one that runs) is not the locked stack; None: it is."""
    built, now = recorded(tag), pins_now(profile)
    if built is None or built["id"] != image_id:
        built = _recorded_as(image_id) or built
    fix = (
        f"run seat build {profile.name}" if _docker(profile).image.overlay else "nothing checked what it runs"
    )
    said = f"image sha256:{_short(image_id)} ({tag})"
    if built is None:
        return f"{said} is not one `seat build` recorded on this machine: {fix}"
    if built["id"] != image_id:
        return (
            f"{said} is not the one `seat build` recorded under that tag (sha256:{_short(built['id'])}): "
            f"it was retagged or rebuilt since; {fix}"
        )
    changed = [
        f"{name} {_pin(built['pins'].get(name))}, pins now {_pin(value)}"
        for name, value in now.items()
        if built["pins"].get(name) != value
    ]
    if changed:
        return f"{said} was built from other pins than those in force ({'; '.join(changed)}): {fix}"
    if "not pinned" in now["base"]:
        return f"{said} was built from {now['base']}: pin it with seat image pin {profile.name}"
    return None


def _pin(value: str | None) -> str:
    """A pin as people compare it: a hash by its first 12 digits."""
    if value is None:
        return "unrecorded"
    return re.sub(r"\b([0-9a-f]{12})[0-9a-f]{52}\b", r"\1..", value)


def image_id(image: str) -> str:
    from docker.errors import APIError, ImageNotFound

    try:
        return engine.client().images.get(image).id
    except ImageNotFound:
        raise SeatError(
            f"no image {image} on this machine", "build it with `seat build`, or pull it"
        ) from None
    except APIError as exc:
        if not exc.is_client_error():
            raise
        # a stray SEAT_IMAGE (a capital, a pasted space): the engine's grammar is the one that counts
        raise SeatError(
            f"docker takes {image} for no image name ({exc.explanation or exc}): fix or unset SEAT_IMAGE",
            "an image name is name[:tag][@sha256:digest], in lower case",
        ) from None


def image_check(profile: Profile, image: str) -> tuple[str, str | None]:
    """launch.up's image check: the image id to run (a tag can move meanwhile), and why the seat's
    results are unverified (None: verified)."""
    found = image_id(image)
    return found, difference(profile, image, found)
