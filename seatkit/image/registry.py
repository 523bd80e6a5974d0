"""A registry on loopback (Debian's docker-registry) and pushing to it: real repository digests on a
machine that reaches no registry, so a locally made base is pinned exactly as a pulled one is.
The engine trusts 127.0.0.0/8 without TLS."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import requests

from seatkit import engine
from seatkit.errors import SeatError
from seatkit.ports import free_loopback_port
from seatkit.serve import identity
from seatkit.serve.client import fetch


@contextmanager
def loopback(folder: Path, timeout: float = 30) -> Iterator[str]:
    """Serve a registry from folder on 127.0.0.1; yields its address (host:port), stops it after."""
    if shutil.which("docker-registry") is None:
        raise SeatError("docker-registry is not installed", "apt-get install docker-registry")
    folder.mkdir(parents=True, exist_ok=True)
    port = free_loopback_port()
    address = f"127.0.0.1:{port}"
    (folder / "config.yml").write_text(
        f"version: 0.1\nlog: {{level: warn}}\nstorage: {{filesystem: {{rootdirectory: {folder / 'data'}}}}}\n"
        f"http: {{addr: {address}}}\n"
    )
    log = folder / "registry.log"
    server = subprocess.Popen(
        ["docker-registry", "serve", str(folder / "config.yml")],
        stdout=subprocess.DEVNULL,
        stderr=log.open("w"),
    )
    try:
        deadline = time.monotonic() + timeout
        # The port was free when chosen, not reserved: the answer counts only when every listener
        # on it is this registry (else it is a stranger's, and the push would go to it).
        while not (_answers(address) and identity.check(port, lambda: [server.pid]) != identity.NOT_YET):
            if server.poll() is not None or time.monotonic() > deadline:
                raise SeatError(
                    f"docker-registry did not start on {address}: {log.read_text()[-300:]}",
                    "its log is above; run again to take another free port",
                )
            time.sleep(0.2)
        yield address
    finally:
        server.terminate()
        server.wait(timeout=30)


def _answers(address: str) -> bool:
    try:
        return fetch("GET", f"http://{address}/v2/", 2).status_code == 200  # never through a proxy
    except (requests.RequestException, SeatError):
        return False


def push(image: str, repository: str, tag: str) -> str:
    """Tag image as repository:tag, push it, and return the digest the registry gave it."""
    client = engine.client()
    client.images.get(image).tag(repository, tag)
    for line in client.images.push(repository, tag=tag, stream=True, decode=True):
        if "error" in line:
            raise SeatError(f"pushing {repository}:{tag} failed: {line['error']}")
    digests = client.images.get(f"{repository}:{tag}").attrs.get("RepoDigests") or []
    found = [d.split("@", 1)[1] for d in digests if d.startswith(f"{repository}@")]
    if not found:
        raise SeatError(f"the registry gave {repository}:{tag} no digest")
    return found[0]


def untag(repository: str, tag: str) -> None:
    """Drop the local tag a push made; the image stays under its other names."""
    engine.client().images.remove(f"{repository}:{tag}", noprune=True)
