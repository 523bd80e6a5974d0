"""Whether a seat's image runs the locked overlay, decided from outside the image.

Nothing the image says about itself counts (SEAT_OVERLAY_DIR, its labels, the lock built into it):
either the image is the one `seat build` made here (its id, recorded in SEAT_HOME), or its files are
read from a created, never-started container: what the server will run resolved the way it will be
resolved (what_loads), each locked file at the profile's vllm_dir against the lock, and every other
file of the image against the base the profile pins (tree); a container's own layer, besides, as
the engine lists what was written into it since it was made (tree.layer). The start check inside the image stays,
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
from seatkit.image import container_command, tree, what_loads, what_mounts
from seatkit.image.container import created
from seatkit.image.container_files import read, same_as_base
from seatkit.image.dockerfile import IMAGE_FILES
from seatkit.seat import layout, what_runs
from seatkit.seat.overlay_lock import Lock, load_b12x, parse
from seatkit.seat.profiles import DockerProfile, Profile
from seatkit.seat.sections import Image
from seatkit.serve import pins

ENTRYPOINT = ["/opt/seatkit/entrypoint.sh"]  # the Dockerfile's
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"  # docker's, when unset
# What the Dockerfile adds to the base's env.
KIT_ENV = ("SEAT_OVERLAY_DIR", "SEAT_B12X_DIR", "SEAT_PORT", "PYTHONDONTWRITEBYTECODE")
API_KEY = "VLLM_API_KEY"  # a keyed seat's secret, from its key file: any text, never a path


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


def record(
    tag: str,
    image_id: str,
    profile: Profile,
    lock: Lock,
    base: tuple[str, str | None, str],
    b12x: Lock | None = None,
) -> None:
    """What `seat build` made: the image id under its tag, the lock and folder it verified, the
    base it was built on (reference, digest or None for a tag, image id) and the b12x overlay's
    lock (None: the base's own kernels)."""
    built = {
        "tag": tag,
        "id": image_id,
        "vllm_dir": _docker(profile).image.vllm_dir,
        "lock": lock.dump(),
        "base": dict(zip(("reference", "digest", "id"), base, strict=True)),
        "b12x": b12x.dump() if b12x else None,
    }
    write_atomic(_record_path(tag), json.dumps(built, indent=2))


def recorded(tag: str) -> dict | None:
    try:
        data = safe_yaml.read_json(_record_path(tag), "build record")
        return data if isinstance(data, dict) and data.get("tag") == tag else None
    except (OSError, ValueError):
        return None


def _built_from(built: dict, digest: str | None) -> bool:
    """Whether a build record's base is the one the profile pins now, and its b12x overlay the one
    the kit's b12x lock pins now: an image built from a tag, an earlier pin, other kernels, or
    recorded before the kit recorded its base and kernels is read from outside instead."""
    base, kernels = built.get("base"), load_b12x()
    return (
        isinstance(base, dict)
        and bool(base.get("id"))
        and base.get("digest") == digest
        and "b12x" in built
        and built["b12x"] == (kernels.dump() if kernels else None)
    )


def by_record(profile: DockerProfile, where: str, lock: Lock) -> tuple[str, Verdict | None]:
    """The image's id, and its verdict when the record `seat build` wrote here vouches for it (the
    id under its tag, built with the lock into the profile's vllm_dir from the pins in force now);
    None: no record vouches for it, and what it runs is known only by reading it."""
    image_id, config = _config(engine.client(), where, False)
    base_ref, digest = pins.base_reference(profile, allow_unpinned=True)
    built = recorded(where)
    if not (
        built
        and built["id"] == image_id
        and built["lock"] == lock.dump()
        and built["vllm_dir"] == profile.image.vllm_dir
        and _built_from(built, digest)
    ):
        return image_id, None
    how = f"the image `seat build` made here ({image_id[7:19]})"
    if digest is None:  # built with --allow-unpinned: the overlay is the lock's, the base a tag's
        how += f", from the unpinned tag {base_ref} ({built['base']['id'][7:19]})"
    with created(image_id) as inside:  # the record vouches for the image, not the profile's mounts
        return image_id, Verdict(image_id, how, _mounts(profile, profile.image, inside, config))


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
    if trust_record and not is_container and (vouched := by_record(profile, where, lock)[1]):
        return vouched
    client = engine.client()
    image_id, config = _config(client, where, is_container)
    base_ref, digest = pins.base_reference(profile, allow_unpinned=True)
    verdict = Verdict(image_id, "read from outside the image")
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
        if is_container:  # written into since it was made: what the server imports or loads next
            verdict.problems += tree.written(inside, image.vllm_dir)
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
        problems += container_command.judged(config["Args"], profile)
    env, base_env = _env(config), _env(theirs)
    # The base's own (vllm-cpu preloads its OpenMP and allocator): kept, and its files the base's.
    changed = [n for n in env if n not in KIT_ENV and env[n] != base_env.get(n)]
    if profile.experiment is None:
        problems += what_runs.refused_env(
            "the image's env (not the base's)", [n for n in changed if n != "PATH"]
        )
        if "PATH" in changed or "PATH" in base_env and "PATH" not in env:
            problems.append(
                f"its PATH {env.get('PATH')!r} is not the base's {base_env.get('PATH')!r}: a new "
                "folder there can supply env and vllm at run time (the kit's Dockerfile sets none)"
            )
        if is_container:  # the launch's env: as the profile would be refused it (it may have changed)
            launched = {n: env[n] for n in changed if not what_runs.env_reason(n) and n != API_KEY}
            cache = _docker(profile).docker.cache
            mount = cache.mount if cache else None
            problems += what_runs.refused_caches("the container's env", launched, mount)
            problems += what_runs.refused_values("the container's env", launched)
            if env.get("SEAT_SKIP_OVERLAY_CHECK", "0") != "0":
                problems.append("the container's env.SEAT_SKIP_OVERLAY_CHECK: its start check was skipped")
        others = [n for n in changed if not what_runs.env_reason(n) and not is_container]
        problems += [
            f"the image's env.{n} is not the base's (the kit's Dockerfile sets none)" for n in others
        ]
        problems += [f"the image's env.{n} is gone (the base sets it)" for n in base_env if n not in env]
    problems += _triggers(config, theirs)
    for key, what in (("User", "user"), ("WorkingDir", "working directory"), ("Volumes", "volumes")):
        if (config.get(key) or "") != (theirs.get(key) or ""):
            problems.append(f"its {what} {config.get(key)!r} is not the base's {theirs.get(key)!r}")
    return problems


def _triggers(config: dict, theirs: dict) -> list[str]:
    """ONBUILD triggers: the kit's Dockerfile sets none, and a base's would have run inside the
    build of any image FROM it (`seat build` refuses such a base)."""
    problems = []
    if config.get("OnBuild"):
        problems.append(
            f"its ONBUILD triggers {config['OnBuild']} are not the kit's (its Dockerfile sets none)"
        )
    if theirs.get("OnBuild"):
        problems.append(
            f"the base has ONBUILD triggers {theirs['OnBuild']}, which ran in the build of this image "
            "(the kit never runs a base's triggers)"
        )
    return problems


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
    problems += _mounts(profile, image, inside, config)
    venv, python = _venv(image.vllm_dir)
    problems += what_loads.resolved(inside, base, search, venv, python)
    problems += what_loads.package(inside, base, image.vllm_dir, python, lock)
    if kernels := load_b12x():
        problems += what_loads.kernels(inside, base, image.b12x_dir, python, kernels)
    return problems


def _mounts(profile: Profile, image: Image, inside, config: dict) -> list[str]:
    """Where the profile's mounts (a container's own, whatever the profile says today) land in this
    image: on the import or exec path through its links, over what of the image decides what runs
    (its PATH's folders, its interpreter's prefix, its loader's folders, the caches under its
    user's HOME: what_mounts), or beside the working directory."""
    if profile.experiment is not None:
        return []
    mounts = what_runs.mounts(profile)
    if "Mounts" in config:
        mounts = {f"the container's mount {t}": t for t in config["Mounts"]}
    env, cache = _env(config), _docker(profile).docker.cache
    search = env.get("PATH", DEFAULT_PATH)
    user, cwd = config.get("User") or "", config.get("WorkingDir") or "/"
    own = what_mounts.derived(inside, env, search, user, cwd, image, cache.mount if cache else None)
    problems = what_mounts.mounts_land(inside, mounts, image.vllm_dir, image.b12x_dir, own, cwd)
    return problems + what_mounts.from_cwd(search)


def _tree(image: Image, image_id: str, base_id: str, base_ref: str, lock: Lock) -> list[str]:
    """Every other file of the image against the base's: the locked files are judged one by one."""
    vllm_dir, kernels = image.vllm_dir, load_b12x()
    allowed = tree.additions(vllm_dir, lock, image.b12x_dir, kernels)
    judged = [f"{vllm_dir}/{name}" for name in lock.files]
    base = tree.manifest(base_id)
    removed = tree.bytecode(vllm_dir, lock, base) | tree.bytecode(image.b12x_dir, kernels, base)
    found = tree.differences(tree.manifest(image_id), base, allowed, judged, removed)
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


def lock_for(image: str, default: Lock) -> Lock:
    """The lock an image was built with, as `seat build` recorded it here, when the image under
    that tag is still the one recorded; else the kit's (a stale or copied record chooses nothing)."""
    built = recorded(image)
    if not built or _config(engine.client(), image, False)[0] != built["id"]:
        return default
    return parse(built["lock"], f"the build record of {image}")
