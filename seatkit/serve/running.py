"""What `seat up` started, as its run record (SEAT_HOME/run/<profile>.json) holds it."""

from __future__ import annotations

from dataclasses import dataclass

from seatkit.serve import keys

# The mark of a record from before `up` recorded one: what that seat ran is not known, so never verified.
UNKNOWN = "unknown: recorded before the kit recorded it"
RETIRED = ("profile_sha256", "model_locks")


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
    profile_source: str = ""  # the file it was launched from; "": recorded before the kit recorded it
    # What the seat runs, by the hashes of its records (the profile's and each model lock's among
    # them), and how it differs from them (seatkit.serve.provenance); None: recorded before the kit
    # recorded it.
    provenance: dict | None = None

    def conditions(self) -> dict:
        """What a result of this seat carries: its provenance record, as `up` wrote it, never as the
        profile reads now (an edit after `up` changes the file, not what runs)."""
        return {"provenance": self.provenance or {"differs": [UNKNOWN]}}

    @classmethod
    def from_record(cls, record: dict) -> Running:
        """The record as read; the fields the kit before kept beside its provenance are left, so a
        seat it started can still be stopped (what they held is in the provenance record)."""
        return cls(**{k: v for k, v in record.items() if k not in RETIRED})

    @property
    def api_key(self) -> str | None:
        return keys.read(self.api_key_file) if self.api_key_file else None
