"""What `seat up` started, as its run record (SEAT_HOME/run/<profile>.json) holds it."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from seatkit.serve import keys

URL = re.compile(r"http://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):[0-9]{1,5}")


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
    since: str = ""  # native: the process's start time, which with the PID and boot names it uniquely
    nsys: dict | None = None  # the profiling knobs in force, when the seat runs under nsys
    boot: str = ""  # native: the boot the PID and start time belong to (they repeat across boots)
    token: str = ""  # this `seat up`'s own: cleanup removes only a record that still holds it
    stopping: bool = False  # set by `seat down` before it signals: the waiting `up` says who stopped it

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

    def check_values(self) -> None:
        """ValueError unless its URL, token and boot id are ones `up` writes."""
        if not URL.fullmatch(self.url):
            raise ValueError(f"url {self.url!r} is not a seat's http://host:port")
        if not re.fullmatch(r"([0-9a-f]{32})?", self.token) or not re.fullmatch(
            r"[0-9a-f-]{0,36}", self.boot
        ):
            raise ValueError("its token or boot id is not one `up` writes")
