"""One campaign folder: where the running one is marked, the lock its steps hold, its journal
and what that journal says, and its log."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from seatkit import flock
from seatkit.campaign.spec import Arm, Campaign
from seatkit.errors import SeatError
from seatkit.host.journal import Journal
from seatkit.host.system import System

STATE = "/var/lib/seatkit/campaign"
CURRENT = f"{STATE}/current"  # the folder of the running campaign: one at a time
LOCK = f"{STATE}/lock"
Progress = Callable[[str], None]


def current(system: System) -> str | None:
    text = system.read(CURRENT)
    return text.strip() if text and text.strip() else None


def begun(system: System, folder: str) -> bool:
    """Whether the folder's journal still has its beginning (an operator may have removed it)."""
    records, _ = Journal(system, f"{folder}/journal.jsonl").readable()
    return bool(records) and records[0]["type"] == "begin"


def held(system: System, what: str):
    return flock.exclusive(
        system.path(LOCK),
        what,
        "a campaign step is running",
        "wait for it; `seat campaign status` works meanwhile",
    )


@dataclass
class Log:
    """A campaign's progress lines: to its folder's campaign.log, and echoed."""

    system: System
    folder: str
    echo: Progress

    def __call__(self, line: str) -> None:  # everything to the folder too: a host with no console
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        with open(self.system.path(f"{self.folder}/campaign.log"), "a") as handle:
            handle.write(f"{stamp} {line}\n")
        self.echo(line)


class Run:
    """One campaign folder: its journal and what the journal says."""

    def __init__(self, system: System, folder: str, *, damaged_ok: bool = False):
        """damaged_ok: read around damaged lines (their numbers in .damaged), to report what the
        rest records; a campaign is never run on such a reading."""
        self.system, self.folder = system, folder
        self.journal = Journal(system, f"{folder}/journal.jsonl")
        self.damaged: list[int] = []
        if damaged_ok:
            self.records, self.damaged = self.journal.readable()
        else:
            self.records = self.journal.records()
        if not self.records or self.records[0]["type"] != "begin":
            raise SeatError(
                f"{folder}/journal.jsonl has no campaign beginning (the folder was removed or emptied)",
                "`seat campaign abort` takes the kit's boot entries and unit out and ends it",
            )
        begin = self.records[0]
        self.id = begin["tx"]
        self.campaign = Campaign.model_validate(begin["campaign"])
        self.arms = {a["name"]: Arm.model_validate(a) for a in begin["arms"]}
        self.visits = [self.arms[name] for name in begin["visits"]]
        self.vendor = begin["vendor"]

    def add(self, record: dict) -> None:
        self.journal.append({"tx": self.id, "time": time.time(), **record})
        self.records.append({"tx": self.id, **record})

    def of(self, kind: str, visit: int | None = None) -> list[dict]:
        return [r for r in self.records if r["type"] == kind and (visit is None or r.get("visit") == visit)]

    def next_visit(self) -> int | None:
        done = {r["visit"] for r in self.records if r["type"] in ("measured", "skipped")}
        return next((i for i in range(len(self.visits)) if i not in done), None)

    @property
    def stopping(self) -> dict | None:
        return next((r for r in self.records if r["type"] in ("aborted", "failed")), None)

    @property
    def ended(self) -> bool:
        return bool(self.of("end"))
