"""One host change as a journaled transaction: every file write and command is recorded before it
happens, with a backup of what it replaces, so a transaction cut short anywhere leaves enough in the
journal to undo it (seatkit.host.undo) and recover to finish it (seatkit.host.change).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from seatkit import __version__
from seatkit.errors import SeatError
from seatkit.host.journal import STATE, Journal, new_txid, sha256
from seatkit.host.ops import CommandOp, FileOp
from seatkit.host.system import System

Progress = Callable[[str], None]
TAIL = 2000


class ToolFailed(SeatError):
    def __init__(self, argv: list[str], rc: int, output: str):
        super().__init__(f"`{' '.join(argv)}` failed (exit {rc}): {output.strip()[-500:]}")
        self.argv, self.output = argv, output


class Change:
    """One open transaction: every step is journaled before it happens."""

    def __init__(self, system: System, progress: Progress, begin: dict):
        self.system, self.progress = system, progress
        self.journal = Journal(system)
        self.txid = new_txid()
        self.record({"type": "begin", "time": time.time(), "version": __version__, **begin})

    def record(self, record: dict) -> None:
        self.journal.append({"tx": self.txid, **record})

    def save(self, kind: str, path: str) -> str | None:
        """Keep a copy of the file as it is now (before, or ours); None when it does not exist."""
        data = self.system.read_bytes(path)
        if data is None:
            return None
        where = f"{STATE}/backups/{self.txid}/{kind}{path}"
        self.system.write(where, data, mode=0o600)
        return where

    def keep(self, paths: Sequence[str]) -> None:
        """Back up files a tool will rewrite, so that undo puts them back byte for byte."""
        files = [
            {"path": p, "sha_before": sha256(self.system.read_bytes(p)), "backup": self.save("before", p)}
            for p in paths
        ]
        self.record({"type": "keep", "files": files})

    def write(self, op: FileOp) -> None:
        self.progress(f"{'remove' if op.new is None else 'write'} {op.path}")
        before = self.system.read_bytes(op.path)
        backup = self.save("before", op.path)
        self.system.fault(f"backed-up {op.path}")
        meta = self.system.path(op.path).stat() if before is not None else None
        self.record(
            {
                "type": "file",
                "path": op.path,
                "existed": before is not None,
                "sha_before": sha256(before),
                "sha_after": sha256(op.new),
                "backup": backup,
                "created": self.system.missing_dirs(op.path),
                "meta": [meta.st_mode & 0o7777, meta.st_uid, meta.st_gid] if meta else None,
            }
        )
        self.system.fault(f"journaled {op.path}")
        if op.new is None:
            self.system.remove(op.path)
        else:
            self.system.write(op.path, op.new)
        self.save("ours", op.path)
        self.system.fault(f"written {op.path}")

    def command(self, op: CommandOp) -> None:
        touched = [
            {"path": p, "sha_before": sha256(self.system.read_bytes(p)), "backup": self.save("before", p)}
            for p in op.touches
        ]
        self.record({"type": "command", "argv": op.argv, "undo": op.undo, "touches": touched})
        self.run(op.argv, record_type="result", touches=op.touches)

    def run(self, argv: list[str], record_type: str = "regen", touches: Sequence[str] = ()) -> None:
        self.progress("run " + " ".join(argv))
        self.system.fault(f"before {argv[0]}")
        rc, output = self.system.run(argv)
        self.system.settle()  # on disk before the journal says the step is done
        self.system.fault(f"ran {argv[0]}")
        for path in touches:
            self.save("ours", path)
        self.record(
            {
                "type": record_type,
                "argv": argv,
                "rc": rc,
                "output": output[-TAIL:],
                "after": {p: sha256(self.system.read_bytes(p)) for p in touches},
            }
        )
        self.system.fault(f"recorded {argv[0]}")
        if rc != 0:
            raise ToolFailed(argv, rc, output)

    def commit(self, **extra) -> None:
        self.system.fault("before commit")
        self.system.settle()  # every boot file it wrote or a tool rewrote is on disk before "done"
        self.record({"type": "commit", **extra})


def require_root(system: System) -> None:
    if system.euid != 0:
        raise SeatError("changing the host needs root", "run it with sudo; `seat host plan` works without")
