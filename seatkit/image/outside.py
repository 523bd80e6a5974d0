"""Whether a seat's image runs the locked overlay, decided from outside the image.

Nothing the image says about itself counts (SEAT_OVERLAY_DIR, its labels, the lock built into it):
either the image is the one `seat build` made here (its id, recorded in SEAT_HOME), or its files are
read from a created, never-started container at the paths the profile names, and what the server
will run is resolved the way it will be resolved: the entrypoint, `env` and `vllm` found on the
image's PATH, the interpreter of the `vllm` script, the folders Python searches before
site-packages, and each locked file with what Python would load in its place. The start check
inside the image stays, as a second line of defence.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import re
import sys
import tarfile
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from posixpath import normpath

from seatkit import engine, safe_yaml
from seatkit.errors import SeatError
from seatkit.files import write_atomic
from seatkit.image.container import created
from seatkit.image.dockerfile import IMAGE_FILES
from seatkit.seat import layout, what_runs
from seatkit.seat.overlay_lock import Lock, load, parse
from seatkit.seat.profiles import Profile
from seatkit.serve import pins

ENTRYPOINT = ["/opt/seatkit/entrypoint.sh"]  # the Dockerfile's
HEALTHCHECK = ["CMD", "/opt/seatkit/health.sh"]  # the Dockerfile's: it runs inside the seat all along
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"  # docker's, when unset
SHEBANG = re.compile(rb"#!(/\S+)[ \t]*\n")  # the `vllm` script's interpreter (the script itself: the base's)
MAX_READ = 256 << 20  # one file read whole (an interpreter, a script); a bigger one is no base's


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


def record(tag: str, image_id: str, profile: Profile, lock: Lock) -> None:
    """What `seat build` made: the image id under its tag, and the lock and folder it verified."""
    write_atomic(
        _record_path(tag),
        json.dumps(
            {"tag": tag, "id": image_id, "vllm_dir": profile.image.vllm_dir, "lock": lock.dump()}, indent=2
        ),
    )


def recorded(tag: str) -> dict | None:
    try:
        data = safe_yaml.read_json(_record_path(tag), "build record")
        return data if isinstance(data, dict) and data.get("tag") == tag else None
    except (OSError, ValueError):
        return None


def _stat(container, path: str) -> dict | None:
    """The engine's stat of a path in the container (mode, linkTarget), None when there is none."""
    api = container.client.api
    answer = api.head(api._url("/containers/{0}/archive", container.id), params={"path": path})
    header = answer.headers.get("X-Docker-Container-Path-Stat")
    return json.loads(base64.b64decode(header)) if answer.ok and header else None


def _read(container, path: str, hops: int = 8) -> bytes | None:
    """One regular file's bytes, following symlinks as exec and open do (None when absent)."""
    from docker.errors import NotFound

    try:
        stream, _ = container.get_archive(path)
    except NotFound:
        return None
    data = bytearray()
    for chunk in stream:
        data += chunk
        if len(data) > MAX_READ:
            return None
    with tarfile.open(fileobj=io.BytesIO(bytes(data)), mode="r|") as tar:
        for member in tar:
            if member.issym() and hops:
                return _read(container, str(PurePosixPath(path).parent / member.linkname), hops - 1)
            return tar.extractfile(member).read() if member.isreg() else None
    return None


def _venv(vllm_dir: str) -> tuple[PurePosixPath, str]:
    """The venv around the profile's vllm package and its pythonX.Y (…/lib/pythonX.Y/site-packages/vllm)."""
    packages = PurePosixPath(vllm_dir).parent
    return packages.parent.parent.parent, packages.parent.name


def _which(container, name: str, search: str) -> str | None:
    """Where execvp finds name on PATH: the first folder holding it (an empty entry is the cwd)."""
    for folder in search.split(":"):
        stat = _stat(container, f"{folder or '.'}/{name}")
        if stat and not stat.get("mode", 0) & (1 << 31):  # not a folder (Go's os.ModeDir)
            return f"{folder}/{name}"
    return None


def _config(client, where: str, is_container: bool) -> tuple[str, dict]:
    """The image id, and the configuration that decides what runs (a container's own, when it is one)."""
    from docker.errors import NotFound

    try:
        if is_container:
            container = client.containers.get(where)
            return container.image.id, {**container.attrs["Config"], "Path": container.attrs.get("Path")}
        image = client.images.get(where)
    except NotFound:
        raise SeatError(
            f"no {'container' if is_container else 'image'} {where} on this machine",
            "build it with `seat build`, or name one that exists",
        ) from None
    return image.id, image.attrs["Config"]


def check(
    profile: Profile, where: str, lock: Lock, is_container: bool = False, trust_record: bool = True
) -> Verdict:
    """The verdict on an image (or a container) for the profile's seat against the lock."""
    client = engine.client()
    image_id, config = _config(client, where, is_container)
    built = None if is_container else recorded(where)
    if (
        trust_record
        and built
        and built["id"] == image_id
        and built["lock"] == lock.dump()
        and built["vllm_dir"] == profile.image.vllm_dir
    ):
        return Verdict(image_id, f"the image `seat build` made here ({image_id[7:19]})")
    verdict = Verdict(image_id, "read from outside the image")
    problems = verdict.problems
    env = _env(config)
    entry = config.get("Entrypoint")
    if entry != ENTRYPOINT:
        problems.append(f"its entrypoint is {entry}, not {ENTRYPOINT} (the kit's start check)")
    if is_container and config.get("Path") != ENTRYPOINT[0]:
        problems.append(f"the container runs {config.get('Path')}, not {ENTRYPOINT[0]}")
    venv, python = _venv(profile.image.vllm_dir)
    with ExitStack() as stack:
        inside = stack.enter_context(created(image_id)) if not is_container else client.containers.get(where)
        base_ref, _ = pins.base_reference(profile, allow_unpinned=True)
        try:
            base = stack.enter_context(created(base_ref))
        except SeatError:
            base = None
            problems.append(
                f"the pinned base {base_ref} is not on this machine: the package cannot be compared with it"
            )
        # The base's own (vllm-cpu preloads its OpenMP and allocator): kept, and its files the base's.
        theirs = _env(client.images.get(base_ref).attrs["Config"]) if base is not None else {}
        changed = [n for n in env if n != "PATH" and what_runs.env_reason(n) and env[n] != theirs.get(n)]
        if profile.experiment is None:
            problems += what_runs.refused_env("the image's env (not the base's)", changed)
        for library in filter(None, re.split(r"[: ]", env.get("LD_PRELOAD", ""))):
            if not _same_as_base(inside, base, library):
                problems.append(f"{library} (LD_PRELOAD, loaded into the server) is not the base's")
        if _read(inside, ENTRYPOINT[0]) != (IMAGE_FILES / "entrypoint.sh").read_bytes():
            problems.append(f"{ENTRYPOINT[0]} is not the kit's image/entrypoint.sh")
        problems += _healthcheck(inside, base, config, env.get("PATH", DEFAULT_PATH))
        if profile.experiment is None:
            problems += _mounts_land(inside, profile, config.get("WorkingDir") or "/")
        search = env.get("PATH", DEFAULT_PATH)
        problems += _resolved(inside, base, search, venv, python)
        problems += _package(inside, base, profile.image.vllm_dir, python, lock)
    return verdict


def _lands(container, target: str, hops: int = 16) -> str:
    """Where docker puts a mount of target: each folder on the way resolved through the image's
    links, as docker resolves them inside the container's root."""
    at = PurePosixPath("/")
    rest = list(what_runs.where(target).parts[1:])
    while rest:
        step = at / rest.pop(0)
        link = (_stat(container, str(step)) or {}).get("linkTarget") if hops else None
        if link:
            hops -= 1
            rest = (
                list(PurePosixPath(link).parts[1:] if link.startswith("/") else PurePosixPath(link).parts)
                + rest
            )
            at = PurePosixPath("/") if link.startswith("/") else at
        else:
            at = PurePosixPath("/" + normpath(str(step)).lstrip("/"))
    return str(at)


def _mounts_land(inside, profile: Profile, cwd: str) -> list[str]:
    """A mount target the profile may name that the image links onto the import or exec path, or
    that puts a standard-library name in the working directory: a spawned worker (python -c)
    imports multiprocessing and its helpers with the working directory first on sys.path."""
    problems = []
    cwd = what_runs.where(cwd)
    for name, target in what_runs.mounts(profile).items():
        landed = _lands(inside, target)
        why = what_runs.refused_mount(
            f"{name} (at {landed} in this image)", landed, profile.image.vllm_dir, profile.image.b12x_dir
        )
        if landed != str(what_runs.where(target)) and why:
            problems.append(why)
        at = PurePosixPath(landed)
        if at in (cwd, *cwd.parents) or at.parent == cwd and at.name.split(".")[0] in sys.stdlib_module_names:
            problems.append(
                f"{name} {target}: it puts {at.name} in the working directory {cwd}, where a "
                "spawned worker imports the standard library from first"
            )
    return problems


def _healthcheck(inside, base, config: dict, search: str) -> list[str]:
    """What the engine runs inside the seat every interval, beside the server: the kit's script,
    and the curl or wget it runs the base's."""
    test = (config.get("Healthcheck") or {}).get("Test")
    if test in (None, ["NONE"]):
        return []
    if test != HEALTHCHECK:
        return [f"its healthcheck runs {test}, not {HEALTHCHECK} (it runs inside the seat all along)"]
    problems = []
    if _read(inside, HEALTHCHECK[1]) != (IMAGE_FILES / "health.sh").read_bytes():
        problems.append(f"{HEALTHCHECK[1]} (the healthcheck) is not the kit's image/health.sh")
    for tool in filter(None, (_which(inside, name, search) for name in ("curl", "wget"))):
        if not _same_as_base(inside, base, tool):
            problems.append(f"{tool} (what the healthcheck runs) is not the base's")
    return problems


def _env(config: dict) -> dict[str, str]:
    return dict(item.partition("=")[::2] for item in config.get("Env") or [])


def _same_as_base(inside, base, path: str) -> bool:
    return base is not None and _read(inside, path) == _read(base, path) is not None


def _resolved(inside, base, search: str, venv: PurePosixPath, python: str) -> list[str]:
    """`env` and `vllm` as execvp finds them on the image's PATH, the script's interpreter, and
    what Python finds before site-packages."""
    problems = []
    found_env = _which(inside, "env", search)
    if found_env is None:
        problems.append(f"PATH {search} finds no env, which runs the server")
    for name in filter(None, ("/bin/sh", found_env)):
        if not _same_as_base(inside, base, name):
            problems.append(f"{name} (what runs the entrypoint and the server) is not the base's")
    found = _which(inside, "vllm", search)
    want = f"{venv}/bin/vllm"
    if found != want:
        return problems + [f"PATH {search} finds vllm at {found}, not the venv's {want}"]
    shebang = SHEBANG.match(_read(inside, want) or b"")
    interpreter = shebang[1].decode(errors="replace") if shebang else ""
    if not interpreter.startswith(f"{venv}/bin/python"):
        return problems + [f"{want} is not a script run by {venv}/bin/python"]
    if not _same_as_base(inside, base, want):
        problems.append(f"{want} is not the base's")
    cfg = (_read(inside, f"{venv}/pyvenv.cfg") or b"").decode(errors="replace")
    home = re.search(r"^home\s*=\s*(\S+)", cfg, re.M)
    if not home or not _same_as_base(inside, base, f"{venv}/pyvenv.cfg"):
        return problems + [f"{venv}/pyvenv.cfg is missing or not the base's"]
    prefix = PurePosixPath(home[1]).parent
    # sys.path before site-packages: the script's folder, the standard library and its extensions.
    before = [
        f"{venv}/bin",
        f"{prefix}/lib/{python.replace('.', '')}.zip",
        f"{prefix}/lib/{python}",
        f"{prefix}/lib/{python}/lib-dynload",
    ]
    abi = python.replace("python", "").replace(".", "")
    for folder in before:
        for name in (
            "vllm",
            "vllm.py",
            "vllm.pyc",
            "vllm.so",
            "vllm.abi3.so",
            f"vllm.cpython-{abi}-x86_64-linux-gnu.so",
            f"vllm.cpython-{abi}-aarch64-linux-gnu.so",
        ):
            stat = _stat(inside, f"{folder}/{name}")
            # a folder named vllm is a package; a file named vllm (the script itself) is no module
            if stat and (name != "vllm" or stat.get("mode", 0) & (1 << 31)):
                problems.append(f"{folder}/{name} is imported as vllm before site-packages")
    # Run by `site` at every start, wherever on sys.path they are (.pth files are not read: listing
    # site-packages means copying all of it out).
    for folder in [*before, f"{venv}/lib/{python}/site-packages"]:
        for name in ("sitecustomize.py", "usercustomize.py"):
            if _stat(inside, f"{folder}/{name}") and not _same_as_base(inside, base, f"{folder}/{name}"):
                problems.append(f"{folder}/{name} runs at every start and is not the base's")
    if not _same_as_base(inside, base, interpreter):
        problems.append(f"{interpreter} (the interpreter) is not the base's")
    return problems


def _package(inside, base, vllm_dir: str, python: str, lock: Lock) -> list[str]:
    """Each locked file at the profile's vllm_dir, read one by one, and anything Python would load
    in its place: a package or an extension module of the same name, or compiled bytecode the
    base did not ship (a planted .pyc with the source's size and time runs instead of it)."""
    if not _stat(inside, f"{vllm_dir}/__init__.py"):
        return [f"no vllm package at {vllm_dir} (image.vllm_dir)"]
    abi = python.replace("python", "").replace(".", "")
    missing, changed, hidden = [], [], []
    for name, digest in sorted(lock.files.items()):
        path = f"{vllm_dir}/{name}"
        if _stat(inside, path) is None:
            missing.append(name)
        elif (data := _read(inside, path, hops=0)) is None or hashlib.sha256(data).hexdigest() != digest:
            changed.append(name)  # a link is no locked file, wherever it points
        if not name.endswith(".py"):
            continue
        folder, stem = str(PurePosixPath(path).parent), PurePosixPath(name).stem
        instead = [
            f"{folder}/{stem}/__init__.py",
            *(
                f"{folder}/{stem}{suffix}"
                for suffix in (
                    ".so",
                    ".abi3.so",
                    f".cpython-{abi}-x86_64-linux-gnu.so",
                    f".cpython-{abi}-aarch64-linux-gnu.so",
                )
            ),
        ]
        cached = [f"{folder}/__pycache__/{stem}.cpython-{abi}{opt}.pyc" for opt in ("", ".opt-1", ".opt-2")]
        hidden += [p for p in instead if _stat(inside, p)]
        hidden += [p for p in cached if _stat(inside, p) and not _same_as_base(inside, base, p)]
    problems = []
    for kind, names in (
        ("missing", missing),
        ("changed", changed),
        ("loaded instead of a locked file", hidden),
    ):
        if names:
            shown = ", ".join(names[:5]) + (f", +{len(names) - 5} more" if len(names) > 5 else "")
            problems.append(f"{len(names)} file(s) of {vllm_dir} {kind}: {shown}")
    return problems


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
