"""Files read out of an image: a container made from it (never started) and the archive the engine
serves of a path inside it."""

from __future__ import annotations

import tempfile
from contextlib import contextmanager
from pathlib import Path

from seatkit import engine
from seatkit.errors import SeatError
from seatkit.image import overlay


@contextmanager
def created(image: str):
    """A container made (never started) from an image, removed afterwards: a way to read its files."""
    from docker.errors import ImageNotFound

    try:
        container = engine.client().containers.create(
            image, entrypoint=["/bin/true"], network_mode="none", labels={engine.HELPER_LABEL: "read files"}
        )
    except ImageNotFound:
        raise SeatError(f"no image {image} on this machine", "build or pull it first") from None
    try:
        yield container
    finally:
        container.remove(force=True)


def copy_out(container, path: str, dest: Path, links: list[str] | None = None) -> Path | None:
    """Copy a folder out of a container into dest; None when it has no such folder. Its links are
    not made: each is named in links ("name -> target", name inside the folder), when given."""
    from docker.errors import NotFound

    try:
        stream, _ = container.get_archive(path)
    except NotFound:
        return None
    seen: list[str] = []
    with tempfile.TemporaryFile() as spool:
        for chunk in stream:
            spool.write(chunk)
        spool.seek(0)
        overlay.extract(spool, dest, f"{path} copied out of {container.short_id}", seen)
    top = Path(path).name + "/"
    if links is not None:
        links += [link[len(top) :] if link.startswith(top) else link for link in seen]
    return dest / Path(path).name


def symlinked_folders(container, path: str) -> list[str]:
    """Folders on the way to path that are symlinks in the container: COPY would replace each with
    a real folder and cut the base's own link (the engine's path-stat answer, nothing downloaded)."""
    import base64
    import json

    api = container.client.api
    found = []
    parts = path.strip("/").split("/")
    for depth in range(1, len(parts) + 1):
        folder = "/" + "/".join(parts[:depth])
        answer = api.head(api._url("/containers/{0}/archive", container.id), params={"path": folder})
        stat = answer.headers.get("X-Docker-Container-Path-Stat")
        target = json.loads(base64.b64decode(stat)).get("linkTarget") if stat else ""
        if target:
            found.append(f"{folder} -> {target}")
    return found
