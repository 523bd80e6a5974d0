"""The host journal: append-only JSON lines, fsynced one by one, with per-transaction backups.

A transaction writes its intent first, then one record before each file write (with the backup
already made) and before each command, a result after it, and a commit last. A transaction without
a commit is what `seat host recover` finds and undoes.

A crash or a full disk can cut the last line short. That record was never acknowledged (its
fsync never returned), so a torn tail is read as "this step did not happen": its transaction
stays open for recover, and the next append cuts the torn bytes off first. A damaged line
anywhere else is an error naming the line.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

from seatkit.errors import SeatError
from seatkit.host.system import System, fsync_dir

STATE = "/var/lib/seatkit/host"
JOURNAL = f"{STATE}/journal.jsonl"


def sha256(data: bytes | None) -> str | None:
    return hashlib.sha256(data).hexdigest() if data is not None else None


def new_txid() -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + uuid.uuid4().hex[:6]


@dataclass
class Transaction:
    txid: str
    records: list[dict]

    @property
    def begin(self) -> dict:
        return self.records[0]

    @property
    def action(self) -> str:
        return self.begin["action"]

    @property
    def committed(self) -> bool:
        return any(r["type"] == "commit" for r in self.records)

    def of_type(self, kind: str) -> list[dict]:
        return [r for r in self.records if r["type"] == kind]


class Journal:
    def __init__(self, system: System, file: str = JOURNAL):  # a campaign keeps its own
        self.system, self.file = system, file

    def append(self, record: dict) -> None:
        try:
            self._append(record)
        except OSError as exc:  # a full disk, a folder in its place: the record did not happen
            raise SeatError(
                f"cannot write {self.file}: {exc.strerror}",
                "free space or move what is in its place aside; then `seat host recover` "
                "if it says a transaction is open",
            ) from None

    def _append(self, record: dict) -> None:
        path = self.system.path(self.file)
        made = [] if path.exists() else [*self.system.missing_dirs(self.file), self.file]
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "ab") as handle:
            # Writers queue on the file itself: a campaign's abort appends while its step holds the
            # campaign lock, and meeting a half-written record it would cut that record off.
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            data = self._read()
            if data and not data.endswith(b"\n"):  # a torn tail: never acknowledged, cut it off
                handle.truncate(data.rfind(b"\n") + 1)
            line = json.dumps(record, sort_keys=True).encode() + b"\n"
            handle.write(line[: len(line) // 2])
            handle.flush()
            self.system.fault(f"inside the journal record {record['type']}")  # a kill leaves it torn
            handle.write(line[len(line) // 2 :])
            handle.flush()
            os.fsync(handle.fileno())
        for name in made:  # a new file or folder is durable once its parent's entry for it is
            fsync_dir(self.system.path(name).parent)

    def _read(self) -> bytes:
        try:
            return self.system.path(self.file).read_bytes()
        except FileNotFoundError:
            return b""
        except OSError as exc:  # never read as "no journal": that would hide open transactions
            raise SeatError(
                f"cannot read {self.file}: {exc.strerror}",
                "it must be the regular file seatkit keeps; put it back",
            ) from None

    def records(self) -> list[dict]:
        out = []
        for number, line, record in self._parsed():
            if record is None:
                raise SeatError(
                    f"{self.file} line {number} is damaged (not a journal record): "
                    f"{line[:120].decode(errors='replace')!r}",
                    "a line in the middle was changed by something other than seatkit; "
                    f"keep a copy, then repair or remove line {number} by hand",
                )
            out.append(record)
        return out

    def readable(self) -> tuple[list[dict], list[int]]:
        """The records that can be read, and the numbers of the damaged lines between them."""
        parsed = list(self._parsed())
        return [r for _, _, r in parsed if r is not None], [n for n, _, r in parsed if r is None]

    def _parsed(self) -> Iterator[tuple[int, bytes, dict | None]]:
        """(line number, line, record or None when damaged) for each line."""
        data = self._read()
        # The piece after the last newline is b"", or a record cut short: that step did not happen.
        for number, line in enumerate(data.split(b"\n")[:-1], 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                record["tx"], record["type"]
            except (ValueError, KeyError, TypeError):
                record = None
            yield number, line, record

    def transactions(self) -> list[Transaction]:
        grouped: dict[str, list[dict]] = {}
        for record in self.records():
            grouped.setdefault(record["tx"], []).append(record)
        return [
            Transaction(txid, records) for txid, records in grouped.items() if records[0]["type"] == "begin"
        ]

    def undone(self, transactions: list[Transaction] | None = None) -> set[str]:
        """Applies that a committed rollback (or recovery) has undone."""
        transactions = self.transactions() if transactions is None else transactions
        return {t.begin["of"] for t in transactions if t.action == "rollback" and t.committed}

    def active(self) -> list[Transaction]:
        """Committed applies that changed something and are not undone since, oldest first."""
        transactions = self.transactions()
        gone = self.undone(transactions)
        return [
            t
            for t in transactions
            if t.action == "apply" and t.committed and t.txid not in gone and t.begin["intent"]
        ]

    def open(self) -> list[Transaction]:
        return [t for t in self.transactions() if not t.committed]
