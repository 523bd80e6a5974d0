"""The host journal: append-only JSON lines, fsynced one by one, with per-transaction backups.

A transaction writes its intent first, then one record before each file write (with the backup
already made) and before each command, a result after it, and a commit last. A transaction without
a commit is what `seat host recover` finds and undoes.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import uuid
from dataclasses import dataclass

from seatkit.host.system import System

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
    def __init__(self, system: System):
        self.system = system

    def append(self, record: dict) -> None:
        path = self.system.path(JOURNAL)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a") as handle:
            handle.write(json.dumps(record, sort_keys=True) + "\n")
            handle.flush()
            os.fsync(handle.fileno())

    def transactions(self) -> list[Transaction]:
        grouped: dict[str, list[dict]] = {}
        for line in (self.system.read(JOURNAL) or "").splitlines():
            if line.strip():
                record = json.loads(line)
                grouped.setdefault(record["tx"], []).append(record)
        return [Transaction(txid, records) for txid, records in grouped.items()]

    def undone(self, transactions: list[Transaction] | None = None) -> set[str]:
        """Applies that a committed rollback (or recovery) has undone."""
        transactions = self.transactions() if transactions is None else transactions
        return {t.begin["of"] for t in transactions if t.action == "rollback" and t.committed}

    def active(self) -> list[Transaction]:
        """Committed applies that changed something and are not undone since, oldest first."""
        transactions = self.transactions()
        gone = self.undone(transactions)
        return [t for t in transactions
                if t.action == "apply" and t.committed and t.txid not in gone and t.begin["intent"]]

    def open(self) -> list[Transaction]:
        return [t for t in self.transactions() if not t.committed]
