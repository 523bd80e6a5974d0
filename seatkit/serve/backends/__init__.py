"""One backend per runtime: how a seat of that runtime starts, runs, listens, stops and logs.

The lifecycle (records, the start lock, who owns a record) is seatkit.serve.launch's; it asks the
backend of the record's or the profile's runtime for the rest. A new runtime is one module here,
one entry in RUNTIMES and its profile variant (seatkit.seat.profiles).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Protocol

from seatkit.errors import SeatError
from seatkit.seat.profiles import Profile
from seatkit.serve.backends import docker, native
from seatkit.serve.running import Running
from seatkit.serve.spec import LaunchSpec

# (profile, image) -> the id to run and why its results are unverified (None: verified), or a refusal
ImageCheck = Callable[[Profile, str], tuple[str, str | None]]


class Backend(Protocol):
    # A container of the docker engine (seatkit.engine), whose labels, mounts and processes
    # can be read there; else a process of this machine.
    container: bool

    def prepared(
        self, spec: LaunchSpec, values: dict[str, str], image_check: ImageCheck | None
    ) -> tuple[dict[str, str], str | None]:
        """The knob values to start with (the checked image id among them, where the runtime has
        one), and why the image or venv is not the one its record names (None: it is)."""

    def start(
        self,
        spec: LaunchSpec,
        values: dict[str, str],
        env: dict[str, str],
        run: Running,
        record: Callable[[Running], None],
    ) -> None:
        """Start the seat, set run.ident and record it (as soon as there is something to stop)."""

    def alive(self, run: Running) -> bool:
        """Whether the recorded seat runs."""

    def listeners(self, run: Running) -> list[int]:
        """The PIDs of the seat's processes, whose sockets alone may listen on its port."""

    def stop(self, run: Running, grace: float) -> bool:
        """Stop the seat; True when it was still running."""

    def save_log(self, run: Running) -> None:
        """Keep the seat's log where `up` keeps it, where the runtime holds it elsewhere."""

    def logs(self, run: Running, follow: bool) -> Iterator[bytes]:
        """The seat's log, and what it writes next while it runs when following."""

    def unrecorded(self, profile: str) -> list[Running]:
        """Seats of the profile that no record names (a `seat up` killed before it recorded one)."""

    def describe(self, run: Running) -> str:
        """What the seat is to this runtime, for people: `process id 123`, `container 0123456789ab`."""


RUNTIMES: dict[str, Backend] = {"docker": docker.BACKEND, "native": native.BACKEND}


def of(runtime: str) -> Backend:
    """The backend of a runtime, as a profile or a run record names it."""
    try:
        return RUNTIMES[runtime]
    except KeyError:
        raise SeatError(f"runtime {runtime!r} is none of {', '.join(RUNTIMES)}") from None
