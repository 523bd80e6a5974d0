"""`seat build` and `seat image pin | inspect`: the seat's image, pinned and provable."""

from __future__ import annotations

import time
from pathlib import Path

import click
from rich.markup import escape

from seatkit.cli import output
from seatkit.cli.app import err, out
from seatkit.cli.arguments import PROFILE
from seatkit.image import b12x, build, overlay, pin
from seatkit.seat import overlay_lock, profiles
from seatkit.serve import pins
from seatkit.text import one_line


@click.command("build")
@PROFILE
@click.option(
    "--allow-unpinned", is_flag=True, help="Build from the base's tag when it has no pinned digest."
)
@click.option(
    "--full", is_flag=True, help="Copy every overlay file, even those the base already has byte for byte."
)
@click.option("--no-cache", "nocache", is_flag=True, help="Rebuild every step.")
@click.option("--lock", "lock_path", default=str(overlay_lock.LOCK), show_default=True, type=click.Path())
@click.option("--overlay", "overlay_dir", default=str(overlay.FETCHED), show_default=True, type=click.Path())
@click.option(
    "--b12x-lock",
    type=click.Path(exists=True, dir_okay=False),
    help="A pinned b12x overlay's lock (default: overlay/b12x.lock, when it exists); its files "
    "(--b12x-overlay) are copied over the image's b12x package. Without one the seat runs the "
    "base's public kernels.",
)
@click.option("--b12x-overlay", default=str(b12x.FETCHED), show_default=True, type=click.Path())
@output.json_option("the result")
def build_cmd(
    profile: str,
    allow_unpinned: bool,
    full: bool,
    nocache: bool,
    lock_path: str,
    overlay_dir: str,
    b12x_lock: str,
    b12x_overlay: str,
    as_json: bool,
):
    """Build the seat's image: the pinned base, the verified overlay copied over its vllm package,
    a smoke import of the DSpark integration, provenance labels and an overlay check at build.

    The image is tagged seatkit/PROFILE:overlay-COMMIT-LOCK. The same Dockerfile also builds by hand
    from the repository, copying the whole overlay: `docker build --build-arg
    BASE_IMAGE=name@sha256:... -t NAME .` after `seat overlay fetch`."""
    started = time.monotonic()
    kernels = overlay_lock.load_b12x(
        Path(b12x_lock) if b12x_lock else overlay_lock.B12X_LOCK
    )  # a named lock must exist
    result = build.build(
        profiles.load(profile),
        overlay_lock.load(Path(lock_path)),
        Path(overlay_dir),
        allow_unpinned=allow_unpinned,
        delta=not full,
        nocache=nocache,
        b12x_overlay=(kernels, Path(b12x_overlay)) if kernels else None,
        progress=lambda line: err.print(escape(line), highlight=False),
    )
    result["seconds"] = round(time.monotonic() - started, 1)
    output.emit(result, as_json, _show_build)


def _show_build(result: dict) -> None:
    out.print(
        f"built {result['tag']} ({result['image'][:19]}) in {result['seconds']} s from {result['base']}\n"
        f"overlay layer {result['overlay_layer']}: {result['overlay_layer_bytes'] / 1e6:.2f} MB, "
        f"{result['copied']} files copied, {result['skipped']} already identical in the base",
        highlight=False,
    )
    out.print(
        f"b12x overlay: {result['b12x']['B12X_OVERLAY']}\n"
        f"b12x {b12x.DENSE} sha256 in the image: {result['b12x']['B12X_DENSE_SHA256']}",
        highlight=False,
    )


@click.group("image")
def image_group():
    """The base image's digest (pin) and a built image's provenance (inspect)."""


@image_group.command("pin")
@PROFILE
def pin_cmd(profile: str):
    """Resolve the profile's image tag to the digest its registry serves now and keep it in
    profiles/PROFILE.lock, so `seat build` builds FROM name@digest (or `seat up` runs a prebuilt
    image by it)."""
    loaded = profiles.load(profile)
    record = pin.pin(loaded)
    out.print(
        f"{record['name']}:{record['tag']} -> {record['digest']} (kept in {pins.lock_path(loaded)})",
        highlight=False,
    )


@image_group.command("inspect")
@click.argument("image")
@output.json_option("the provenance")
def inspect_cmd(image: str, as_json: bool):
    """Where an image came from: base and digest, overlay source, commit, tree and lock hash, profile."""
    found = build.labels(image)
    output.emit(found, as_json, lambda data: _show_provenance(data, image))


def _show_provenance(found: dict, image: str) -> None:
    out.print(f"{image}: {found['id']}  tags {', '.join(found['tags']) or '-'}", highlight=False)
    for key, value in sorted(found["labels"].items()):  # labels are anyone's text: no escapes
        out.print(f"  {escape(one_line(key))} = {escape(one_line(value))}", highlight=False)
    if not any(k.startswith("io.seatkit.") for k in found["labels"]):
        out.print("  (no io.seatkit labels: not built by `seat build`)")
    base = found["labels"].get("org.opencontainers.image.base.digest")
    if base is not None and "@sha256:" not in base:
        out.print(
            f"  (base not pinned by digest: built from {escape(one_line(base)) or 'an unnamed base'}"
            ", a tag that can move)",
            highlight=False,
        )
