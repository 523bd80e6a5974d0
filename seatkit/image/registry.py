"""A registry on loopback (Debian's docker-registry) and pushing to it: real repository digests on a
machine that reaches no registry, so a locally made base is pinned exactly as a pulled one is.
The engine trusts 127.0.0.0/8 without TLS."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import requests

from seatkit.errors import SeatError


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def loopback(folder: Path, timeout: float = 30) -> Iterator[str]:
    """Serve a registry from folder on 127.0.0.1; yields its address (host:port), stops it after."""
    if shutil.which("docker-registry") is None:
        raise SeatError("docker-registry is not installed", "apt-get install docker-registry")
    folder.mkdir(parents=True, exist_ok=True)
    address = f"127.0.0.1:{_free_port()}"
    (folder / "config.yml").write_text(
        f"version: 0.1\nlog: {{level: warn}}\nstorage: {{filesystem: {{rootdirectory: {folder / 'data'}}}}}\n"
        f"http: {{addr: {address}}}\n")
    log = folder / "registry.log"
    server = subprocess.Popen(["docker-registry", "serve", str(folder / "config.yml")],
                              stdout=subprocess.DEVNULL, stderr=log.open("w"))
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                if requests.get(f"http://{address}/v2/", timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                raise SeatError(f"docker-registry did not start: {log.read_text()[-300:]}")
            time.sleep(0.2)
        yield address
    finally:
        server.terminate()
        server.wait(timeout=30)


def push(image: str, repository: str, tag: str) -> str:
    """Tag image as repository:tag, push it, and return the digest the registry gave it."""
    import docker

    client = docker.from_env()
    client.images.get(image).tag(repository, tag)
    for line in client.images.push(repository, tag=tag, stream=True, decode=True):
        if "error" in line:
            raise SeatError(f"pushing {repository}:{tag} failed: {line['error']}")
    digests = client.images.get(f"{repository}:{tag}").attrs.get("RepoDigests") or []
    found = [d.split("@", 1)[1] for d in digests if d.startswith(f"{repository}@")]
    if not found:
        raise SeatError(f"the registry gave {repository}:{tag} no digest")
    return found[0]
