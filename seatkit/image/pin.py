"""`seat image pin`: the base image's tag resolved to its registry digest, kept in the profile's lock.

The lock sits beside the profile (profiles/NAME.lock). `seat build` builds FROM name@digest and
refuses a base without one unless told otherwise; a tag alone can move under the same name.
"""

from __future__ import annotations

import time
from pathlib import Path

import yaml

from seatkit.errors import SeatError
from seatkit.serve.profile import Profile


def lock_path(profile: Profile) -> Path:
    return Path(profile.source).with_suffix(".lock")


def read(profile: Profile) -> dict | None:
    path = lock_path(profile)
    if not path.exists():
        return None
    data = yaml.safe_load(path.read_text())
    if not isinstance(data, dict) or not {"name", "tag", "digest"} <= set(data):
        raise SeatError(f"{path}: expected name, tag and digest", f"run `seat image pin {profile.name}` again")
    return data


def resolve(name: str, tag: str) -> str:
    """The digest the registry serves for name:tag now (through the engine, with its credentials)."""
    import docker
    from docker.errors import APIError, DockerException

    try:
        return docker.from_env().images.get_registry_data(f"{name}:{tag}").id
    except APIError as exc:
        raise SeatError(f"cannot resolve {name}:{tag} through its registry: {exc.explanation or exc}",
                        "check the name and tag, and `docker login` if the registry needs it") from None
    except DockerException as exc:
        raise SeatError(f"no docker engine answers: {exc}", "start dockerd, or set DOCKER_HOST") from None


def pin(profile: Profile) -> dict:
    if profile.image is None:
        raise SeatError(f"profile {profile.name} has no image (runtime {profile.runtime})")
    image = profile.image
    digest = resolve(image.name, image.tag)
    record = {"name": image.name, "tag": image.tag, "digest": digest,
              "pinned_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    header = (f"# The base image of profile {profile.name}, pinned by `seat image pin`: the digest its tag\n"
              f"# had when pinned. `seat build {profile.name}` builds FROM name@digest.\n")
    lock_path(profile).write_text(header + yaml.safe_dump(record, sort_keys=False))
    return record


def base_reference(profile: Profile, allow_unpinned: bool = False) -> tuple[str, str | None]:
    """What to build FROM (name@digest) and the digest; name:tag only when unpinned is allowed."""
    image = profile.image
    locked = read(profile)
    if locked and (locked["name"], locked["tag"]) != (image.name, image.tag):
        raise SeatError(f"{lock_path(profile)} pins {locked['name']}:{locked['tag']}, the profile names "
                        f"{image.name}:{image.tag}", f"run `seat image pin {profile.name}` again")
    digest = image.digest or (locked or {}).get("digest")
    if image.digest and locked and locked["digest"] != image.digest:
        raise SeatError(f"the profile pins {image.digest} and {lock_path(profile)} pins {locked['digest']}",
                        "keep one: clear the profile's digest or pin again")
    if digest:
        return f"{image.name}@{digest}", digest
    if not allow_unpinned:
        raise SeatError(f"the base {image.name}:{image.tag} is not pinned by digest: a tag can move",
                        f"`seat image pin {profile.name}` resolves it; --allow-unpinned builds from the tag")
    return f"{image.name}:{image.tag}", None
