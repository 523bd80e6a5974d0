"""The docker engine: one way to reach it, and one message when it does not answer or goes away."""

from __future__ import annotations

import traceback
from pathlib import Path

from seatkit.errors import SeatError

HINT = "start dockerd (or the docker service), or set DOCKER_HOST to the engine's socket; then retry"
HELPER_LABEL = "io.seatkit.helper"  # containers the kit makes only to read an image's files


class NoEngine(SeatError):
    """No docker engine answers: what needs one cannot be checked (rather than failed)."""


def client():
    """A client of the engine that answers now; a SeatError when none does."""
    import docker

    try:
        engine = docker.from_env()
        engine.ping()
    except Exception as exc:  # a bad DOCKER_HOST is a ValueError, an odd answer a bare Exception
        raise NoEngine(f"no docker engine answers ({type(exc).__name__}: {exc})", HINT) from None
    return engine


def errors() -> tuple[type[BaseException], ...]:
    """What a call to the engine raises when it refuses, hangs or goes away in the middle."""
    import requests
    from docker.errors import DockerException

    return DockerException, requests.RequestException


def as_seat_error(exc: BaseException) -> SeatError | None:
    """The message for a failure of the engine that reached the top; None when it is not one.
    Besides docker's own errors, anything raised inside the docker package counts: a connection
    lost or timed out on the way, or an answer it could not read ("Can't create Container")."""
    import docker
    from docker.errors import APIError, DockerException

    if isinstance(exc, APIError):
        return SeatError(
            f"the docker engine refused: {exc.explanation or exc}",
            "check the names and references given (docker accepts lowercase repository names only)",
        )
    package = str(Path(docker.__file__).parent)
    if isinstance(exc, DockerException) or any(
        frame.filename.startswith(package) for frame in traceback.extract_tb(exc.__traceback__)
    ):
        return SeatError(f"the docker engine failed or did not answer ({type(exc).__name__}: {exc})", HINT)
    return None
