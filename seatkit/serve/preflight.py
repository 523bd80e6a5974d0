"""The launch spec's preflight checks, in Python, for `seat up` (the script has them in bash)."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from seatkit import engine, nvml, safe_yaml
from seatkit.errors import SeatError
from seatkit.models import lock as locks
from seatkit.models import verify
from seatkit.seat import overlay_lock
from seatkit.seat.profiles import Profile
from seatkit.serve import keys
from seatkit.serve.backends import docker as docker_backend
from seatkit.serve.checks import Check, Kind
from seatkit.serve.spec import LaunchSpec, resolve

INDEX_BYTES = 64 * 1024 * 1024  # a weight map names every tensor of the model


def _fail(message: str, hint: str = "") -> NoReturn:
    raise SeatError(f"preflight: {message}", hint)


def _port_in_use(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=1.0).close()
        return True
    except socket.gaierror as exc:
        _fail(
            f"SEAT_HOST {host} is not an address this machine can resolve ({exc.strerror})",
            "set SEAT_HOST to an IP address or a known host name",
        )
    except OSError:
        return False


def visible_gpus() -> int:
    """GPUs the NVIDIA driver shows (NVML); 0 when there is no driver."""
    try:
        nvml.start()
    except nvml.NoDriver:
        return 0
    pynvml = nvml.api()
    try:
        return pynvml.nvmlDeviceGetCount()
    finally:
        pynvml.nvmlShutdown()


def _docker_has(kind: str, ref: str) -> bool:
    from docker.errors import APIError, NotFound

    client = engine.client()
    try:
        (client.images if kind == "image" else client.containers).get(ref)
        return True
    except NotFound:
        return False
    except APIError as exc:  # a name docker cannot parse (uppercase, a bad digest)
        _fail(
            f"docker cannot look up the {kind} {ref}: {exc.explanation or exc}",
            "give a valid reference (lowercase repository, name:tag or name@sha256:...)",
        )


def _venv(check: Check, spec: LaunchSpec, subject: str) -> None:
    """The server is there; whether the venv is as `seat setup` installed it is the run's mark
    (backends.native.venv_mark), as the weights' is."""
    if not (Path(subject) / "bin" / "vllm").exists():
        _fail(f"{check.label} is missing at {subject}", f"run: seat setup {spec.profile.name}")


def _reserved(check: Check, spec: LaunchSpec, subject: str) -> None:
    if subject in check.values:
        _fail(
            f"{check.label} {subject} is reserved by this profile",
            "choose another through SEAT_PORT or SEAT_CONTAINER",
        )


def _port_free(check: Check, spec: LaunchSpec, subject: str) -> None:
    host, port = subject.rsplit(":", 1)
    if _port_in_use(host, int(port)):
        _fail(f"something already listens on {subject}", "stop it, or set SEAT_PORT")


def _container_free(check: Check, spec: LaunchSpec, subject: str) -> None:
    taken = docker_backend.name_taken(subject) if _docker_has("container", subject) else None
    if taken is not None:
        _fail(taken.message, taken.hint)


def _image(check: Check, spec: LaunchSpec, subject: str) -> None:
    if not _docker_has("image", subject):
        local = subject.startswith(overlay_lock.REPOSITORY + "/")
        _fail(
            f"image {subject} is not on this machine (or its digest differs)",
            f"a local tag, nothing to pull: seat build {spec.profile.name} makes it"
            if local
            else "docker pull it",
        )


def _plain_path(check: Check, subject: str) -> None:
    if any(ord(c) < 32 or ord(c) == 127 for c in subject):
        _fail(
            f"{check.label} directory has a control character (a newline, a tab) in its path: {subject!r}",
            "name a plain path",
        )


def _dir(check: Check, spec: LaunchSpec, subject: str) -> None:
    _plain_path(check, subject)
    if not subject or not Path(subject).is_dir():  # Path("") is the working directory
        _fail(f"{check.label} directory not found: {subject}", check.hint)
    if not spec.native and set(subject) & {":", ","}:
        _fail(f"{check.label} directory has ':' or ',', which docker mounts cannot take: {subject}")
    if not spec.native and not subject.startswith("/"):  # docker reads a relative one as a volume name
        _fail(f"{check.label} directory must be an absolute path to be mounted: {subject}", check.hint)


def _pinned(check: Check, spec: LaunchSpec, subject: str) -> None:
    if subject in check.values:
        _fail(
            f"the profile's own {check.label} {subject} is not pinned by digest: a tag can move",
            f"seat image pin {spec.profile.name}, then seat render; or choose one with SEAT_IMAGE",
        )


def _cache(check: Check, spec: LaunchSpec, subject: str) -> None:
    """The seat's own folder: made when missing, as the script makes it."""
    _plain_path(check, subject)
    if not subject.startswith("/") or set(subject) & {":", ","}:
        _fail(
            f"{check.label} directory must be an absolute path without ':' or ',' (docker "
            f"mounts take no others): {subject!r}",
            "set SEAT_CACHE_DIR to one",
        )
    try:
        Path(subject).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        _fail(
            f"cannot make the {check.label} directory {subject}: {exc.strerror}",
            "make it by hand, or set SEAT_CACHE_DIR to a folder you can write",
        )


def _exists(check: Check, spec: LaunchSpec, subject: str) -> None:
    if not Path(subject).exists():
        _fail(f"{check.label} not found: {subject}", "create it, or take it out of docker.extra_mounts")


def _api_key(check: Check, spec: LaunchSpec, subject: str) -> None:
    keys.read(subject)


def _file(check: Check, spec: LaunchSpec, subject: str) -> None:
    path = Path(subject)
    if not path.is_file() or path.stat().st_size == 0:
        _fail(f"{check.label} is missing or empty: {subject}")


def _shards(check: Check, spec: LaunchSpec, subject: str) -> None:
    folder, label = Path(subject), check.label
    index = folder / "model.safetensors.index.json"
    try:
        shards = sorted(
            set(safe_yaml.read_json(index, "safetensors index", INDEX_BYTES)["weight_map"].values())
        )
    except (SeatError, OSError, ValueError, KeyError, AttributeError) as exc:
        _fail(f"{label} index unreadable: {index} ({exc})")
    if not shards:
        _fail(f"{label} index lists no shards: {index}")
    for shard in shards:
        path = folder / shard
        if not path.is_file() or path.stat().st_size == 0:
            _fail(f"{label} shard missing or empty: {shard}", "the index lists it; finish the download")


def _sizes(check: Check, spec: LaunchSpec, subject: str) -> None:
    folder, name = Path(subject), spec.profile.name
    wrong = [
        p for p, size in check.values if not (folder / p).is_file() or (folder / p).stat().st_size != size
    ]
    if wrong:
        _fail(
            f"{check.label}: {len(wrong)} file(s) missing or not the size the models lock records "
            f"(e.g. {', '.join(wrong[:3])}) in {folder}",
            f"seat model verify {name} lists them; seat model fetch {name} (or seat setup) restores them",
        )


def _gpus(check: Check, spec: LaunchSpec, subject: str) -> None:
    need, seen = int(check.values[0]), visible_gpus()
    if seen < need:
        _fail(
            f"{seen} GPUs visible, tensor parallelism needs {need}",
            "check nvidia-smi, the driver and CUDA_VISIBLE_DEVICES",
        )


# Each kind's check, for every kind: a kind without one is a bug the unit tests catch.
CHECKS: dict[Kind, Callable[[Check, LaunchSpec, str], None]] = {
    Kind.VENV: _venv,
    Kind.RESERVED_PORT: _reserved,
    Kind.PORT_FREE: _port_free,
    Kind.RESERVED_NAME: _reserved,
    Kind.CONTAINER_FREE: _container_free,
    Kind.IMAGE: _image,
    Kind.PINNED: _pinned,
    Kind.CACHE: _cache,
    Kind.EXISTS: _exists,
    Kind.DIR: _dir,
    Kind.FILE: _file,
    Kind.SHARDS: _shards,
    Kind.SIZES: _sizes,
    Kind.GPUS: _gpus,
    Kind.API_KEY: _api_key,
}


def _check(check: Check, spec: LaunchSpec, values: dict[str, str]) -> None:
    run = CHECKS.get(check.kind)
    if run is None:
        raise SeatError(f"preflight: no check of kind {check.kind!r}", "this is a bug in seatkit: report it")
    run(check, spec, resolve(check.subject, values) if check.subject else "")


def warnings(spec: LaunchSpec, values: dict[str, str]) -> list[str]:
    """What `seat up` should say before it starts: an image by a tag (the script warns too), and a
    locked model file changed since its last full verify (the script compares sizes only)."""
    subjects = (resolve(c.subject, values) for c in spec.checks if c.kind == Kind.PINNED)
    return [
        f"{image} is not pinned by digest: a tag can move" for image in subjects if "@sha256:" not in image
    ] + _changed_models(spec.profile, values)


def _changed_models(profile: Profile, values: dict[str, str]) -> list[str]:
    try:
        record = verify.last_full(profile.name)
        if record is None or locks.read(profile) is None:
            return []
        changed = verify.changed_since(profile, record["time"], record["models"], values)
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(record["time"]))
    except (SeatError, OSError, ValueError, KeyError, TypeError, AttributeError):
        return []  # a torn record, an unreadable folder: the checks and `seat doctor` name them
    if not changed:
        return []
    if len(changed) == 1:
        what = f"model file {changed[0]} changed since its last full verify ({when})"
    else:
        what = f"{len(changed)} model files changed since their last full verify ({when}), e.g. {', '.join(changed[:3])}"
    return [f"{what}; preflight compares sizes only: seat model verify {profile.name} hashes again"]


def run(spec: LaunchSpec, values: dict[str, str]) -> None:
    """Every check in order; the first failure raises with what to do about it."""
    for check in spec.checks:
        _check(check, spec, values)
