"""Whether a seat's image runs the locked overlay, decided from outside the image.

Nothing the image says about itself counts (SEAT_OVERLAY_DIR, its labels, the lock built into it):
either the image is the one `seat build` made here (its id, recorded in SEAT_HOME), or its files are
read from a created, never-started container: what the server will run resolved the way it will be
resolved (what_loads), each locked file at the profile's vllm_dir against the lock, and every other
file of the image against the base the profile pins (tree). The start check inside the image stays,
as a second line of defence.
"""

from __future__ import annotations

import json
import re
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from seatkit import engine, safe_yaml
from seatkit.errors import SeatError
from seatkit.files import write_atomic
from seatkit.image import tree, what_loads
from seatkit.image.container import created
from seatkit.image.container_files import read, same_as_base
from seatkit.image.dockerfile import IMAGE_FILES
from seatkit.seat import layout, what_runs
from seatkit.seat.overlay_lock import Lock, load, load_b12x, parse
from seatkit.seat.profiles import DockerProfile, Profile
from seatkit.seat.sections import Image
from seatkit.serve import pins

ENTRYPOINT = ["/opt/seatkit/entrypoint.sh"]  # the Dockerfile's
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"  # docker's, when unset
KIT_ENV = ("SEAT_OVERLAY_DIR", "SEAT_B12X_DIR", "SEAT_PORT")  # what the Dockerfile adds to the base's env


@dataclass
class Verdict:
    image_id: str
    how: str  # how it was decided
    problems: list[str] = field(default_factory=list)

    @property
    def verified(self) -> bool:
        return not self.problems


def _records() -> Path:
    return layout.saved_images()


def _record_path(tag: str) -> Path:
    return _records() / (re.sub(r"[^A-Za-z0-9._-]", "_", tag) + ".json")


def _docker(profile: Profile) -> DockerProfile:
    if not isinstance(profile, DockerProfile):
        raise SeatError(f"profile {profile.name} runs natively: it has no image to check")
    return profile


def record(tag: str, image_id: str, profile: Profile, lock: Lock) -> None:
    """What `seat build` made: the image id under its tag, and the lock and folder it verified."""
    built = {"tag": tag, "id": image_id, "vllm_dir": _docker(profile).image.vllm_dir, "lock": lock.dump()}
    write_atomic(_record_path(tag), json.dumps(built, indent=2))


def recorded(tag: str) -> dict | None:
    try:
        data = safe_yaml.read_json(_record_path(tag), "build record")
        return data if isinstance(data, dict) and data.get("tag") == tag else None
    except (OSError, ValueError):
        return None


def _config(client, where: str, is_container: bool) -> tuple[str, dict]:
    """The image id, and the configuration that decides what runs (a container's own, when it is one)."""
    from docker.errors import NotFound

    try:
        if is_container:
            container = client.containers.get(where)
            attrs = container.attrs
            ran = {
                "Path": attrs.get("Path"),
                "Args": attrs.get("Args") or [],
                "Mounts": [m.get("Destination", "") for m in attrs.get("Mounts") or []],
            }  # what it was started with, whatever the profile says today
            return container.image.id, {**attrs["Config"], **ran}
        image = client.images.get(where)
    except NotFound:
        raise SeatError(
            f"no {'container' if is_container else 'image'} {where} on this machine",
            "build it with `seat build`, or name one that exists",
        ) from None
    return image.id, image.attrs["Config"]


def _env(config: dict) -> dict[str, str]:
    return dict(item.partition("=")[::2] for item in config.get("Env") or [])


def _venv(vllm_dir: str) -> tuple[PurePosixPath, str]:
    """The venv around the profile's vllm package and its pythonX.Y (…/lib/pythonX.Y/site-packages/vllm)."""
    packages = PurePosixPath(vllm_dir).parent
    return packages.parent.parent.parent, packages.parent.name


def check(
    profile: Profile, where: str, lock: Lock, is_container: bool = False, trust_record: bool = True
) -> Verdict:
    """The verdict on an image (or a container) for the profile's seat against the lock."""
    profile = _docker(profile)
    image = profile.image
    client = engine.client()
    image_id, config = _config(client, where, is_container)
    built = None if is_container else recorded(where)
    if (
        trust_record
        and built
        and built["id"] == image_id
        and built["lock"] == lock.dump()
        and built["vllm_dir"] == image.vllm_dir
    ):
        return Verdict(image_id, f"the image `seat build` made here ({image_id[7:19]})")
    verdict = Verdict(image_id, "read from outside the image")
    base_ref, digest = pins.base_reference(profile, allow_unpinned=True)
    if digest is None:  # a tag can be moved onto the image itself: nothing to compare with
        verdict.problems.append(
            f"the base {base_ref} is not pinned by digest, so the image cannot be compared with it "
            f"(`seat image pin {profile.name}` pins it)"
        )
    with ExitStack() as stack:
        inside = stack.enter_context(created(image_id)) if not is_container else client.containers.get(where)
        try:
            base = stack.enter_context(created(base_ref))
        except SeatError:
            base = None
            verdict.problems.append(
                f"the pinned base {base_ref} is not on this machine: the image cannot be compared with it"
            )
        base_image = client.images.get(base_ref) if base is not None else None
        theirs = base_image.attrs["Config"] if base_image else {}
        verdict.problems += _configured(profile, config, theirs, is_container)
        verdict.problems += _files(profile, image, inside, base, config, lock)
        if base_image is not None and digest is not None:
            verdict.problems += _tree(image, image_id, base_image.id, base_ref, lock)
    return verdict


def _configured(profile: Profile, config: dict, theirs: dict, is_container: bool) -> list[str]:
    """The image's configuration against the kit's Dockerfile over the base: its entrypoint, and the
    base's env (the Dockerfile adds KIT_ENV; a container's holds the launch's too), user, working
    directory (a spawned worker imports the standard library from there first) and volumes."""
    problems = []
    entry = config.get("Entrypoint")
    if entry != ENTRYPOINT:
        problems.append(f"its entrypoint is {entry}, not {ENTRYPOINT} (the kit's start check)")
    if "Path" in config and config["Path"] != ENTRYPOINT[0]:
        problems.append(f"the container runs {config['Path']}, not {ENTRYPOINT[0]}")
    if "Args" in config and profile.experiment is None:
        problems += _command(config["Args"])
    env, base_env = _env(config), _env(theirs)
    # The base's own (vllm-cpu preloads its OpenMP and allocator): kept, and its files the base's.
    changed = [n for n in env if n not in KIT_ENV and env[n] != base_env.get(n)]
    if profile.experiment is None:
        problems += what_runs.refused_env(
            "the image's env (not the base's)", [n for n in changed if n != "PATH"]
        )
        others = [n for n in changed if not what_runs.env_reason(n) and not is_container]
        problems += [
            f"the image's env.{n} is not the base's (the kit's Dockerfile sets none)" for n in others
        ]
        problems += [f"the image's env.{n} is gone (the base sets it)" for n in base_env if n not in env]
    for key, what in (("User", "user"), ("WorkingDir", "working directory"), ("Volumes", "volumes")):
        if (config.get(key) or "") != (theirs.get(key) or ""):
            problems.append(f"its {what} {config.get(key)!r} is not the base's {theirs.get(key)!r}")
    return problems


def _command(args: list[str]) -> list[str]:
    """A container's own command (`env -u NAME ... vllm serve ...`): what it unsets and the server
    flags that load code, as the profile would be refused them (it may have changed since)."""
    server = args.index("serve") + 1 if "serve" in args else len(args)  # past a profiler's own flags
    unset = [args[i + 1] for i in range(server - 1) if args[i] == "-u"]
    words = [*args[server:], "--"]
    pairs = zip(words, words[1:], strict=False)
    flags = {a[2:]: b if b[:2] != "--" else True for a, b in pairs if a[:2] == "--" and a[2:]}
    refused = what_runs.refused_env("env -u", unset) + what_runs.refused_args(flags)
    return [f"the container's command: {line}" for line in refused]


def _files(profile: Profile, image: Image, inside, base, config: dict, lock: Lock) -> list[str]:
    """What the server will execute and import, as the image resolves it (what_loads)."""
    problems = []
    env = _env(config)
    search = env.get("PATH", DEFAULT_PATH)
    for library in filter(None, re.split(r"[: ]", env.get("LD_PRELOAD", ""))):
        if not same_as_base(inside, base, library):
            problems.append(f"{library} (LD_PRELOAD, loaded into the server) is not the base's")
    if read(inside, ENTRYPOINT[0]) != (IMAGE_FILES / "entrypoint.sh").read_bytes():
        problems.append(f"{ENTRYPOINT[0]} is not the kit's image/entrypoint.sh")
    problems += what_loads.healthcheck(inside, base, config, search)
    if profile.experiment is None:
        mounts = what_runs.mounts(profile)
        if "Mounts" in config:  # a container's own mounts, whatever the profile says today
            mounts = {f"the container's mount {t}": t for t in config["Mounts"]}
            problems += filter(
                None,
                (what_runs.refused_mount(f, t, image.vllm_dir, image.b12x_dir) for f, t in mounts.items()),
            )
        problems += what_loads.mounts_land(
            inside, mounts, image.vllm_dir, image.b12x_dir, config.get("WorkingDir") or "/"
        )
    venv, python = _venv(image.vllm_dir)
    problems += what_loads.resolved(inside, base, search, venv, python)
    problems += what_loads.package(inside, base, image.vllm_dir, python, lock)
    return problems


def _tree(image: Image, image_id: str, base_id: str, base_ref: str, lock: Lock) -> list[str]:
    """Every other file of the image against the base's: the locked files are judged one by one."""
    vllm_dir = image.vllm_dir
    allowed = tree.additions(vllm_dir, lock, image.b12x_dir, load_b12x())
    judged = [f"{vllm_dir}/{name}" for name in lock.files]
    found = tree.differences(tree.manifest(image_id), tree.manifest(base_id), allowed, judged)
    return tree.problems(found, base_ref, vllm_dir)


def require(profile: Profile, image: str, lock: Lock) -> str:
    """The image id when the verdict is verified; else a refusal naming what differs."""
    verdict = check(profile, image, lock)
    if not verdict.verified:
        raise SeatError(
            f"{image} does not run the locked overlay ({verdict.how}):\n  " + "\n  ".join(verdict.problems),
            f"seat build {profile.name} makes the image it should be; nothing was started",
        )
    return verdict.image_id


def require_for(profile: Profile, image: str) -> str:
    """launch.up's image_check: the lock `seat build` recorded for the image, else the kit's."""
    return require(profile, image, lock_for(image, load()))


def lock_for(image: str, default: Lock) -> Lock:
    """The lock an image was built with, as `seat build` recorded it here; else the kit's."""
    built = recorded(image)
    return parse(built["lock"], f"the build record of {image}") if built else default
