"""The top-level Dockerfile's build arguments: what `seat build` passes, and the defaults a plain
`docker build` takes from the Dockerfile's rendered region (the default profile and the lock)."""

from __future__ import annotations

from seatkit import paths, regions
from seatkit.errors import SeatError
from seatkit.seat.overlay_lock import Lock
from seatkit.seat.profiles import Profile

DOCKERFILE = paths.REPO / "Dockerfile"
IMAGE_FILES = paths.REPO / "image"  # the scripts the image runs: checks, health
SCRIPTS = ("overlay-check.sh", "build-check.sh", "drop-bytecode.sh", "smoke.sh", "smoke.py", "health.sh")


def build_args(profile: Profile, lock: Lock) -> dict[str, str]:
    """The seat's build arguments, less the base reference and the kit's revision."""
    image = profile.image
    if image is None:
        raise SeatError(f"profile {profile.name} runs natively: it has no image to build")
    return {
        "BASE_TAG": f"{image.name}:{image.tag}",
        "VLLM_DIR": image.vllm_dir,
        "SMOKE_IMPORTS": " ".join(image.smoke_imports),
        "SEAT_PORT": str(profile.server.port),
        "SEAT_PROFILE": profile.name,
        "OVERLAY_SOURCE": lock.source,
        "OVERLAY_COMMIT": lock.commit,
        "OVERLAY_TREE": lock.tree,
        "OVERLAY_LOCK_SHA256": lock.sha256,
    }


def defaults(profile: Profile, lock: Lock) -> str:
    """The rendered region: one `ARG NAME="value"` line per build argument."""
    lines = []
    for name, value in build_args(profile, lock).items():
        if any(c in value for c in '"\\$\n'):
            raise SeatError(
                f"the build argument {name} holds a quote, backslash, $ or newline: {value!r}",
                "a Dockerfile default cannot carry it literally",
            )
        lines.append(f'ARG {name}="{value}"')
    return "\n".join(lines) + "\n"


def rendered(text: str, profile: Profile, lock: Lock) -> str:
    return regions.replace(text, defaults(profile, lock), "Dockerfile")
