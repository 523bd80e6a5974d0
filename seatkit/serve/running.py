"""What `seat up` started, as its run record (SEAT_HOME/run/<profile>.json) holds it."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from seatkit.serve import keys

URL = re.compile(r"http://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):[0-9]{1,5}")
# The mark of a record from before `up` recorded one: what that seat ran is not known, so never verified.
UNKNOWN = "unknown: recorded before the kit recorded it"


@dataclass
class Running:
    profile: str
    runtime: str
    ident: str  # PID (native) or container id (docker)
    url: str
    model: str
    log: str
    started: float
    api_key_file: str = ""
    since: str = ""  # native: the process's start time, which with the PID and boot names it uniquely;
    # docker: when `up` started the container (a start since is a restart, docker.restarted)
    nsys: dict | None = None  # the profiling knobs in force, when the seat runs under nsys
    boot: str = ""  # native: the boot the PID and start time belong to (they repeat across boots)
    token: str = ""  # this `seat up`'s own: cleanup removes only a record that still holds it
    stopping: bool = False  # set by `seat down` before it signals: the waiting `up` says who stopped it
    profile_sha256: str = ""  # the profile as launched (Profile.sha256, extends applied); "": unknown
    profile_source: str = ""  # the file it was launched from; "": recorded before the kit recorded it
    # Each model's lock hash when `up` started it (models.lock.hashes): a re-lock since changes the
    # file, not the weights loaded. None: no lock, or recorded before the kit recorded it.
    model_locks: dict[str, str] | None = None
    # What the seat runs, by the hashes of its records, and how it differs from them
    # (seatkit.serve.provenance); None: recorded before the kit recorded it.
    provenance: dict | None = None

    def conditions(self) -> dict:
        """What a result of this seat carries: its provenance record, as `up` wrote it, never as the
        profile reads now (an edit after `up` changes the file, not what runs)."""
        return {"provenance": self.provenance or {"differs": [UNKNOWN]}}

    @property
    def api_key(self) -> str | None:
        return keys.read(self.api_key_file) if self.api_key_file else None

    def check_types(self) -> None:
        """TypeError unless each field holds what `up` writes there (a record is only JSON)."""
        texts = (
            self.profile,
            self.runtime,
            self.ident,
            self.url,
            self.model,
            self.log,
            self.api_key_file,
            self.since,
            self.boot,
            self.token,
            self.profile_sha256,
            self.profile_source,
        )
        if not all(isinstance(value, str) for value in texts):
            raise TypeError("a field that holds text holds something else")
        started = self.started
        if isinstance(started, bool) or not isinstance(started, (int, float)) or not math.isfinite(started):
            raise TypeError("started is not a time")
        if not isinstance(self.stopping, bool):
            raise TypeError("stopping is not true or false")
        if self.nsys is not None and not isinstance(self.nsys, dict):
            raise TypeError("nsys is not a mapping")
        if self.provenance is not None:
            differs = self.provenance.get("differs") if isinstance(self.provenance, dict) else None
            if not (isinstance(differs, list) and all(isinstance(why, str) and why for why in differs)):
                raise TypeError("provenance is not a record whose differences are reasons")
        locks = self.model_locks
        if locks is not None and not (
            isinstance(locks, dict) and all(isinstance(v, str) for v in (*locks, *locks.values()))
        ):
            raise TypeError("model_locks is not a mapping of model to hash")

    def check_values(self) -> None:
        """ValueError unless its URL, token and boot id are ones `up` writes."""
        if not URL.fullmatch(self.url):
            raise ValueError(f"url {self.url!r} is not a seat's http://host:port")
        if not re.fullmatch(r"([0-9a-f]{32})?", self.token) or not re.fullmatch(
            r"[0-9a-f-]{0,36}", self.boot
        ):
            raise ValueError("its token or boot id is not one `up` writes")
        if not re.fullmatch(r"([0-9a-f]{64})?", self.profile_sha256):
            raise ValueError("its profile_sha256 is not a sha256")
