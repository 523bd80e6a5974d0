"""`seat build`: the seat's image from a pinned base and the verified overlay, reproducibly.

The build context is a tar the kit writes itself: sorted entries, one fixed timestamp, root
ownership and fixed modes, so two builds from the same inputs copy byte-identical layers.
Files the base already has byte for byte are left out of the copy (the lock still checks them).
"""

from __future__ import annotations

import io
import subprocess
import tarfile
import tempfile
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from seatkit import engine, paths
from seatkit.errors import SeatError
from seatkit.image import b12x, dockerfile, overlay, vouch
from seatkit.image.container import copy_out, created, symlinked_folders
from seatkit.image.dockerfile import DOCKERFILE, IMAGE_FILES, SCRIPTS
from seatkit.seat.overlay_lock import Lock, seat_tag
from seatkit.seat.profiles import DockerProfile, Profile
from seatkit.seat.sections import Image
from seatkit.serve.pins import base_reference

ROOTED = "overlay/root"  # the context's overlay, at its full path from /
EPOCH = 315532800  # 1980-01-01: every entry of the context gets this time
DEFAULT_VLLM_DIR = Image.model_fields["vllm_dir"].default


@dataclass
class Context:
    data: bytes
    copied: list[str]
    skipped: list[str] = field(default_factory=list)  # byte-identical in the base


def _add(tar: tarfile.TarFile, name: str, data: bytes | None, mode: int) -> None:
    info = tarfile.TarInfo(name)
    info.mtime, info.uid, info.gid, info.uname, info.gname = EPOCH, 0, 0, "", ""
    info.mode = mode
    if data is None:
        info.type = tarfile.DIRTYPE
        tar.addfile(info)
    else:
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))


def _place(entries: dict, names: list[str], source: Path, inside: str) -> None:
    """Each file at its full path under overlay/root/, every folder on the way an entry of its own."""
    for name in names:
        parts = [*ROOTED.strip("/").split("/"), *inside.strip("/").split("/"), *name.split("/")]
        for depth in range(1, len(parts)):
            entries["/".join(parts[:depth])] = (None, 0o755)
        entries["/".join(parts)] = ((source / name).read_bytes(), 0o644)


def context(
    lock: Lock,
    overlay_dir: Path,
    base: dict[str, str] | None = None,
    vllm_dir: str = DEFAULT_VLLM_DIR,
    b12x: tuple[Lock, Path, str] | None = None,
) -> Context:
    """The build context as a tar laid out like the repository (Dockerfile, image/, overlay/overlay.lock)
    with the overlay files to copy under overlay/root/ at their full path (OVERLAY_FILES and
    OVERLAY_INTO in the Dockerfile). Every folder is an entry with the fixed time.
    `b12x` (lock, its files, the b12x package in the image) adds the b12x overlay, copied whole.
    overlay/copied lists every file copied, at its path in the image: the build removes the base's
    bytecode of each (image/drop-bytecode.sh)."""
    base = base or {}
    copied = sorted(name for name, digest in lock.files.items() if base.get(name) != digest)
    entries: dict[str, tuple[bytes | None, int]] = {
        "Dockerfile": (DOCKERFILE.read_bytes(), 0o644),
        "image": (None, 0o755),
        "overlay": (None, 0o755),
        "overlay/overlay.lock": (lock.dump().encode(), 0o644),
    }
    for script in SCRIPTS:
        entries[f"image/{script}"] = ((IMAGE_FILES / script).read_bytes(), 0o755)
    _place(entries, copied, overlay_dir, vllm_dir)
    placed = [f"{vllm_dir}/{name}" for name in copied]
    if b12x:
        b12x_lock, b12x_files, b12x_dir = b12x
        entries["overlay/b12x.lock"] = (b12x_lock.dump().encode(), 0o644)
        _place(entries, sorted(b12x_lock.files), b12x_files, b12x_dir)
        placed += [f"{b12x_dir}/{name}" for name in sorted(b12x_lock.files)]
    entries["overlay/copied"] = ("".join(f"{path}\n" for path in placed).encode(), 0o644)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(entries):
            _add(tar, name, *entries[name])
    return Context(buffer.getvalue(), copied, sorted(set(lock.files) - set(copied)))


def base_files(container, vllm_dir: str) -> dict[str, str]:
    """SHA-256 of every file the base has in its vllm package ({} when it has none)."""
    with tempfile.TemporaryDirectory() as tmp:
        root = copy_out(container, vllm_dir, Path(tmp))
        return overlay.tree_files(root) if root else {}


def revision() -> str:
    done = subprocess.run(
        ["git", "-C", str(paths.REPO), "describe", "--always", "--dirty", "--abbrev=40"],
        capture_output=True,
        text=True,
    )
    return done.stdout.strip() if done.returncode == 0 else "unknown"


def build_args(profile: Profile, lock: Lock, base_ref: str) -> dict[str, str]:
    """Every build argument `seat build` passes with the context() it writes."""
    return {
        "BASE_IMAGE": base_ref,
        "SEAT_REVISION": revision(),
        "OVERLAY_FILES": f"{ROOTED}/",
        "OVERLAY_INTO": "/",
        **dockerfile.build_args(profile, lock),
    }


def _require_buildable(profile: Profile) -> DockerProfile:
    """The profile, when it has an image to build."""
    if not isinstance(profile, DockerProfile):
        raise SeatError(f"profile {profile.name} runs natively: there is no image to build")
    if not profile.image.overlay:  # the seat runs this image as it is: a built one would go unused
        raise SeatError(
            f"profile {profile.name} runs {profile.image.name}:{profile.image.tag} as it is "
            "(image.overlay false): there is nothing to build",
            f"`seat image pin {profile.name}`, then docker pull it by that digest",
        )
    return profile


def _require_no_links(container, vllm_dir: str) -> None:
    links = symlinked_folders(container, vllm_dir)
    if links:
        raise SeatError(
            f"{vllm_dir} passes through symlinks in the base ({'; '.join(links)}): "
            "copying the overlay there would replace them with folders",
            "set image.vllm_dir in the profile to the real path",
        )


def _require_match(folder: Path, lock: Lock, which: str, fix: str) -> None:
    """Refuse to build from files that are missing or changed against their lock."""
    problems = overlay.verify(folder, lock)
    if problems["missing"] or problems["changed"]:
        raise SeatError(
            f"{folder} does not match {which}: "
            + overlay.summary({k: problems[k] for k in ("missing", "changed")}),
            f"{fix}; nothing was built",
        )


def build(
    profile: Profile,
    lock: Lock,
    overlay_dir: Path,
    *,
    allow_unpinned: bool = False,
    delta: bool = True,
    nocache: bool = False,
    b12x_overlay: tuple[Lock, Path] | None = None,
    progress: Callable[[str], None] = lambda line: None,
) -> dict:
    """Build and tag the seat's image; returns its id, tag, the overlay layer and what was copied."""
    profile = _require_buildable(profile)
    image = profile.image
    base_ref, digest = base_reference(profile, allow_unpinned)
    if not overlay_dir.is_dir():
        raise SeatError(f"no overlay at {overlay_dir}", "`seat overlay fetch` places it there")
    _require_match(overlay_dir, lock, "the lock", "`seat overlay fetch` restores it")
    if b12x_overlay:
        _require_match(
            b12x_overlay[1], b12x_overlay[0], "the b12x lock", "place the patched files the lock pins there"
        )
    client = engine.client()
    progress(f"base {base_ref}")
    base_image = client.images.get(base_ref)
    b12x_lock = b12x_overlay[0] if b12x_overlay else None
    with created(base_ref) as container:
        _require_no_links(container, image.vllm_dir)
        base = base_files(container, image.vllm_dir) if delta else {}
        kernels = b12x.provenance(container, base_image.labels or {}, image.b12x_dir, b12x_lock)
    ctx = context(
        lock,
        overlay_dir,
        base,
        image.vllm_dir,
        (*b12x_overlay, image.b12x_dir) if b12x_overlay else None,
    )
    progress(f"overlay: {len(ctx.copied)} files to copy, {len(ctx.skipped)} already identical in the base")
    progress(f"b12x overlay: {kernels['B12X_OVERLAY']}; {b12x.DENSE} sha256 {kernels['B12X_DENSE_SHA256']}")
    tag = seat_tag(profile, lock, b12x_lock)
    args = {**build_args(profile, lock, base_ref), **kernels}
    image_id = _engine_build(client, ctx.data, tag, args, nocache, progress)
    # The proof `seat up` checks: this id, built from these pins.
    vouch.record(tag, image_id, vouch.pins(profile, lock, b12x_lock, base_ref if digest else None))
    return {
        "image": image_id,
        "tag": tag,
        "base": base_ref,
        "base_digest": digest,
        "copied": len(ctx.copied),
        "skipped": len(ctx.skipped),
        "b12x": kernels,
        **overlay_layer(tag, base_ref),
    }


def _engine_build(
    client, data: bytes, tag: str, args: dict[str, str], nocache: bool, progress: Callable[[str], None]
) -> str:
    """The engine's build of the context, its output lines passed to progress; the image id."""
    log: list[str] = []
    image_id = None
    for chunk in client.api.build(
        fileobj=io.BytesIO(data),
        custom_context=True,
        tag=tag,
        buildargs=args,
        nocache=nocache,
        rm=True,
        forcerm=True,
        decode=True,
        network_mode="none",
    ):  # a build that needs no network gets none
        if "stream" in chunk and chunk["stream"].strip():
            log.append(chunk["stream"].rstrip())
            progress(log[-1])
        if "aux" in chunk and "ID" in chunk["aux"]:
            image_id = chunk["aux"]["ID"]
        if "error" in chunk:
            raise SeatError(
                "the build failed: " + chunk["error"].strip() + "\n" + "\n".join(log[-25:]),
                "the lines above are the build's last output",
            )
    if image_id is None:
        raise SeatError("the build finished without an image id:\n" + "\n".join(log[-25:]))
    return image_id


def overlay_layer(image: str, base_ref: str) -> dict:
    """The layer the overlay COPY made (the first one above the base's): diff id and size."""
    client = engine.client()
    base_layers = len(client.images.get(base_ref).attrs["RootFS"]["Layers"])
    entry = next(
        (
            h
            for h in client.api.history(image)
            if "COPY" in h.get("CreatedBy", "") and "/opt/seatkit" not in h["CreatedBy"]
        ),
        None,
    )
    if entry is None:
        raise SeatError(f"{image} has no overlay COPY in its history")
    return {
        "overlay_layer": client.images.get(image).attrs["RootFS"]["Layers"][base_layers],
        "overlay_layer_bytes": entry["Size"],
    }


def labels(image: str) -> dict:
    from docker.errors import ImageNotFound

    try:
        attrs = engine.client().images.get(image).attrs
    except ImageNotFound:
        raise SeatError(f"no image {image} on this machine") from None
    config = attrs["Config"]
    return {
        "id": attrs["Id"],
        "tags": attrs.get("RepoTags") or [],
        "digests": attrs.get("RepoDigests") or [],
        "labels": config.get("Labels") or {},
        "entrypoint": config.get("Entrypoint"),
        "healthcheck": config.get("Healthcheck"),
    }


class NoPackage(SeatError):
    """The image or container has no folder where its vllm package should be."""


def verify_installed(name: str, inside: str | None, is_container: bool, lock: Lock) -> dict[str, list[str]]:
    """The lock against the vllm package inside an image or a container."""
    from docker.errors import NotFound

    client = engine.client()
    try:
        container = client.containers.get(name) if is_container else None
        if container is None:
            client.images.get(name)  # only to say, up front, that there is no such image
    except NotFound:
        raise SeatError(f"no {'container' if is_container else 'image'} {name} on this machine") from None
    # Never where the image says (its label, SEAT_OVERLAY_DIR): where `seat build` put the overlay.
    built = vouch.recorded(name)
    inside = inside or (built["pins"].get("vllm_dir") if built else None) or DEFAULT_VLLM_DIR
    with ExitStack() as stack, tempfile.TemporaryDirectory() as tmp:
        links: list[str] = []
        root = copy_out(container or stack.enter_context(created(name)), inside, Path(tmp), links)
        if root is None:
            raise NoPackage(f"{name} has no {inside}", "pass --dir with the vllm package's path inside it")
        return overlay.verify(root, lock, links)
