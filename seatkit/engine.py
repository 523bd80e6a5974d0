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
    from docker.errors import DockerException

    try:
        engine = docker.from_env()
        engine.ping()
    except DockerException as exc:
        raise NoEngine(f"no docker engine answers ({exc})", HINT) from None
    return engine


def errors() -> tuple[type[BaseException], ...]:
    """What a call to the engine raises when it refuses or goes away in the middle of the call."""
    import requests
    from docker.errors import DockerException

    return DockerException, requests.ConnectionError


def as_seat_error(exc: BaseException) -> SeatError | None:
    """The message for a failure of the engine that reached the top; None when it is not one."""
    import docker
    import requests
    from docker.errors import APIError, DockerException

    if isinstance(exc, APIError):
        return SeatError(f"the docker engine refused: {exc.explanation or exc}",
                         "check the names and references given (docker accepts lowercase "
                         "repository names only)")
    if isinstance(exc, DockerException):
        return SeatError(f"the docker engine failed: {exc}", HINT)
    package = str(Path(docker.__file__).parent)
    if isinstance(exc, requests.ConnectionError) and any(
            frame.filename.startswith(package) for frame in traceback.extract_tb(exc.__traceback__)):
        return SeatError(f"the docker engine went away: {exc}", HINT)
    return None
