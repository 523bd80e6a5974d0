"""`seat host apply | rollback | recover`: change the host in journaled transactions, undo exactly.

Apply backs up each file before writing it and records each command before running it, so a
transaction cut short anywhere leaves enough in the journal for `recover` to undo it. Rollback
restores byte for byte and stops, changing nothing, when a file was edited since seatkit wrote it.
One change at a time: apply, rollback, recover and forget hold the host lock.

Generated boot files are not restored from backups: rollback regenerates them with the host's own
tools for every kernel installed at rollback time, from the sources it restored, so a kernel
installed or removed since apply is handled as the host is now. A loader entry the operator edited
since apply keeps the edit, without seatkit's tokens. Rollback then proves it: no entry carries a
token seatkit added, no initramfs holds its module file, or it exits non-zero naming what remains.

A regeneration tool that fails while undoing (a defaults file the user broke) does not keep the
transaction open: the files are restored, the failure is recorded once with the exact fix, and
recover terminates.
"""

from __future__ import annotations

import difflib
import os
import time
from collections.abc import Callable

from seatkit import __version__
from seatkit.errors import SeatError
from seatkit.host import cmdline, detect, grub_defaults, lock, readback
from seatkit.host import plan as host_plan
from seatkit.host.journal import STATE, Journal, Transaction, new_txid, sha256
from seatkit.host.plan import CommandOp, FileOp, Plan
from seatkit.host.system import System

Progress = Callable[[str], None]
TAIL = 2000
CAMPAIGN = "/var/lib/seatkit/campaign/current"  # `seat campaign run` owns the boot settings while it is there


class ToolFailed(SeatError):
    def __init__(self, argv: list[str], rc: int, output: str):
        super().__init__(f"`{' '.join(argv)}` failed (exit {rc}): {output.strip()[-500:]}")
        self.argv, self.output = argv, output


def fix_for(system: System, argv: list[str], output: str) -> str:
    """The exact way out after a regeneration tool failed: the file to fix, the tool's words, the command."""
    named = grub_defaults.syntax_errors(system) if argv[0] in ("update-grub", "grub-mkconfig") else []
    return (
        f"`{' '.join(argv)}` failed: {output.strip()[-800:]}\n"
        + (f"fix: {'; '.join(named)}\n" if named else "fix what its output names, ")
        + f"then run: {' '.join(argv)}"
    )


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

    def run(self, argv: list[str], record_type: str = "regen", touches: list[str] = ()) -> None:
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
        self.record({"type": "commit", **extra})


def _require_root(system: System) -> None:
    if system.euid != 0:
        raise SeatError("changing the host needs root", "run it with sudo; `seat host plan` works without")


def _clean_temp(system: System, journal: Journal, progress: Progress) -> None:
    """seatkit's own temp files in every folder it writes, left by a kill inside a write."""
    paths = {host_plan.MODPROBE_FILE, host_plan.GRUB_DROPIN, host_plan.KERNEL_CMDLINE}
    for t in journal.transactions():
        for r in t.records:
            paths.update(
                [r["path"]] if "path" in r else [x["path"] for x in r.get("touches", r.get("files", []))]
            )
    for folder in sorted({os.path.dirname(p) for p in paths}):
        for path in system.clean_temp(folder):
            progress(f"removed leftover temp file {path}")


def _no_campaign(system: System) -> None:
    if system.read(CAMPAIGN):
        raise SeatError(
            f"a campaign is running ({system.read(CAMPAIGN).strip()}): it owns the boot "
            "settings until it ends",
            "`seat campaign status`; `seat campaign abort` ends it and restores the start state",
        )


def _signature(plan: Plan) -> tuple:
    """What apply would do: two plans with one signature act the same."""
    return (
        plan.refusals,
        plan.regen,
        [(op.path, op.new) if isinstance(op, FileOp) else op.argv for op in plan.ops],
    )


def apply(plan: Plan, system: System, progress: Progress = lambda line: None) -> str | None:
    """The transaction id, or None when the host already matches (nothing written, nothing run)."""
    _no_campaign(system)
    if plan.refusals:
        raise SeatError(
            "refused:\n  - " + "\n  - ".join(plan.refusals),
            "`seat host plan` shows what would be done and why it is refused",
        )
    if plan.snippet:
        raise SeatError(
            "NixOS is configured declaratively: seatkit changes nothing here",
            "put the snippet from `seat host plan` into configuration.nix",
        )
    _require_root(system)
    with lock.held(system, f"apply {plan.profile}"):
        fresh = host_plan.build(plan.source, system, plan.choices) if plan.source else plan
        if _signature(plan) != _signature(fresh):  # another change got in between: the plan shown is stale
            raise SeatError(
                "the host changed since this plan was made"
                + (":\n  - " + "\n  - ".join(fresh.refusals) if fresh.refusals else ""),
                "run `seat host plan` again",
            )
        _clean_temp(system, Journal(system), progress)
        return _apply(plan, system, progress)


def _apply(plan: Plan, system: System, progress: Progress) -> str | None:
    begin = {
        "action": "apply",
        "profile": plan.profile,
        "facts": plan.facts.to_json(),
        "regen": plan.regen,
        "edit": plan.edit.to_json() if plan.edit else None,
        "intent": [op.path if isinstance(op, FileOp) else op.argv for op in plan.ops],
        # boot lines that carry a token seatkit adds before it adds it: the operator's own
        "lines_before": [
            [path, tokens]
            for path, tokens in readback.boot_lines(system)
            if plan.edit and any(t in tokens for t in plan.edit.added)
        ],
    }
    change = Change(system, progress, begin)
    if not plan.ops:
        change.commit(noop=True)
        return None
    try:
        for op in plan.ops:
            change.write(op) if isinstance(op, FileOp) else change.command(op)
        if plan.keep:
            change.record(
                {
                    "type": "keep",
                    "files": [
                        {
                            "path": p,
                            "sha_before": sha256(system.read_bytes(p)),
                            "backup": change.save("before", p),
                        }
                        for p in plan.keep
                    ],
                }
            )
        for argv in plan.regen:
            change.run(argv)
        change.record(
            {
                "type": "generated",
                "files": [
                    {"path": e, "sha": sha256(system.read_bytes(e))} for e in detect.loader_entries(system)
                ],
            }
        )
    except (SeatError, OSError) as exc:
        raise SeatError(
            f"apply stopped half-way: {exc}",
            f"transaction {change.txid} is left open: `seat host recover` undoes it",
        ) from None
    lost = readback.lost(system, plan)
    if lost:  # written is not applied: what the boot tool produced does not carry the edit
        tx = next(t for t in Journal(system).transactions() if t.txid == change.txid)
        by = revert(tx, system, progress)
        change.record({"type": "commit", "recovered_by": by, "reason": lost})
        raise SeatError(
            f"the boot configuration the tool generated does not carry the change ({lost}); "
            f"transaction {change.txid} was rolled back by {by}",
            "make the file that wins append to the command line instead of setting it, then apply again",
        )
    change.commit()
    return change.txid


# --- undo ---------------------------------------------------------------------------------------


def _text(system: System, path: str | None) -> list[str]:
    data = system.read_bytes(path) if path else None
    return (data or b"").decode(errors="replace").splitlines(keepends=True)


def _three_way(system: System, tx: Transaction, path: str, backup: str | None) -> str:
    ours = f"{STATE}/backups/{tx.txid}/ours{path}"
    before, mine, now = _text(system, backup), _text(system, ours), _text(system, path)
    return (
        f"{path} was changed since seatkit wrote it:\n"
        + "".join(difflib.unified_diff(before, mine, "before", "ours"))
        + "".join(difflib.unified_diff(mine, now, "ours", "now"))
    )


def _steps(tx: Transaction) -> list[dict]:
    """File and command records in order, each command with its result (None if it never came)."""
    steps, results = [], iter(tx.of_type("result"))
    for record in tx.records:
        if record["type"] == "file":
            steps.append(record)
        elif record["type"] == "command":
            steps.append({**record, "result": next(results, None)})
    return steps


def _edited(system: System, tx: Transaction) -> list[str]:
    """Files that are neither as before nor as seatkit left them: someone else changed them."""
    problems = []
    for step in _steps(tx):
        if step["type"] == "file":
            files = [(step["path"], step["sha_before"], step["sha_after"], step["backup"])]
        elif step["result"]:
            files = [
                (t["path"], t["sha_before"], step["result"]["after"][t["path"]], t["backup"])
                for t in step["touches"]
            ]
        else:  # the command never reported: its files may be anywhere between, undo takes them back
            files = []
        for path, before, after, backup in files:
            if step["type"] == "command" and _is_entry(path):  # regenerated, hand edits kept: see revert
                continue
            if sha256(system.read_bytes(path)) not in (before, after):
                problems.append(_three_way(system, tx, path, backup))
    return problems


def _is_entry(path: str) -> bool:
    return "/loader/entries/" in path


def _hand_edits(system: System, tx: Transaction) -> dict[str, bytes]:
    """Loader entries the operator changed since apply generated them, kept before rollback
    regenerates anything (in the apply's backups, so a rollback killed half-way still has them)."""
    out = {}
    for f in (f for r in tx.of_type("generated") for f in r["files"]):
        kept = f"{STATE}/backups/{tx.txid}/hand{f['path']}"
        data = system.read_bytes(kept)
        if data is None:
            data = system.read_bytes(f["path"])
            if data is None or sha256(data) == f["sha"]:  # removed with its kernel, or as apply left it
                continue
            system.write(kept, data, mode=0o600)
        out[f["path"]] = data
    return out


def without_ours(data: bytes, edit: cmdline.Edit) -> bytes:
    """An entry with seatkit's edit taken out of its options line, every other byte kept."""
    lines = data.split(b"\n")
    for i, line in enumerate(lines):
        if line.startswith(b"options"):
            rest = line[len(b"options") :]
            tokens = cmdline.split(rest)
            ours = [len(tokens) - 1 - tokens[::-1].index(t) for t in edit.added if t in tokens]
            back = cmdline.Edit(
                tuple(t for _, t in edit.replaced if t not in tokens),
                tuple(sorted((j, tokens[j]) for j in ours)),
            )
            lines[i] = b"options" + cmdline.edit_bytes(rest, back)
    return b"\n".join(lines)


def _regen_now(tx: Transaction, system: System) -> list[list[str]]:
    """The apply's regeneration, kernel-install run for every kernel installed now."""
    regen = [argv for argv in tx.begin["regen"] if argv[0] != "kernel-install"]
    if len(regen) < len(tx.begin["regen"]):
        regen += [["kernel-install", "add", version, image] for version, image in detect.kernels(system)]
    return regen


def _others_tokens(system: System, tx: Transaction) -> set[str]:
    return {
        t
        for other in Journal(system).active()
        if other.txid != tx.txid
        for t in (other.begin.get("edit") or {}).get("added", [])
    }


def _missing_backups(system: System, tx: Transaction) -> list[str]:
    """Restores that would need a backup which is gone or damaged (a deleted backups folder)."""
    out = []
    for step in _steps(tx) + [
        {"type": "keep", "touches": f} for r in tx.of_type("keep") for f in [r["files"]]
    ]:
        files = [step] if step["type"] == "file" else step["touches"]
        for f in files:
            if (
                f["backup"]
                and sha256(system.read_bytes(f["path"])) != f["sha_before"]
                and sha256(system.read_bytes(f["backup"])) != f["sha_before"]
            ):
                out.append(
                    f"{f['path']}: its backup {f['backup']} is missing or damaged (the original "
                    f"had SHA-256 {f['sha_before']})"
                )
    return out


def _restore(
    change: Change,
    path: str,
    before: str | None,
    backup: str | None,
    created: list[str] = (),
    meta: list[int] | None = None,
) -> None:
    system = change.system
    if sha256(system.read_bytes(path)) != before:
        change.progress(f"restore {path}")
        if backup is None:
            system.remove(path)
        else:
            system.write(path, system.read_bytes(backup))
        if sha256(system.read_bytes(path)) != before:
            raise SeatError(
                f"{path} does not match its backup after the restore",
                f"the backup is {backup}; transaction {change.txid} stays open",
            )
        change.record({"type": "restored", "path": path})
    if meta and system.exists(path):  # a tool may have recreated the file with its own mode
        os.chmod(system.path(path), meta[0])
        if system.euid == 0:
            os.chown(system.path(path), meta[1], meta[2])
    for folder in reversed(created):  # folders apply made go when they are empty again
        if system.entries(folder) == []:
            system.path(folder).rmdir()


def revert(tx: Transaction, system: System, progress: Progress = lambda line: None) -> str:
    """Undo an apply (committed or cut short), newest step first; returns the rollback's id."""
    _require_root(system)
    problems = _edited(system, tx)
    if problems:
        raise SeatError(
            "\n".join(problems) + "\nnothing was changed",
            "merge the edits by hand (or move the files aside), then roll back again",
        )
    gone = _missing_backups(system, tx)
    if gone:
        raise SeatError(
            "cannot restore the original bytes:\n  - " + "\n  - ".join(gone) + "\nnothing was changed",
            f"put those files back by hand (or accept them as they are), then "
            f"`seat host forget {tx.txid}` closes the transaction",
        )
    try:
        hand = _hand_edits(system, tx)
    except OSError as exc:
        raise SeatError(
            f"cannot keep a copy of the loader entries edited since apply: {exc}\nnothing was changed",
            "free space in /var/lib/seatkit, then roll back again",
        ) from None
    edit = cmdline.Edit.from_json(tx.begin["edit"]) if tx.begin.get("edit") else cmdline.Edit()
    change = Change(system, progress, {"action": "rollback", "of": tx.txid, "profile": tx.begin["profile"]})

    def restore_entry(f: dict) -> None:  # a removed kernel's entry stays removed; hand edits come last
        if not (_is_entry(f["path"]) and (f["path"] in hand or not system.exists(f["path"]))):
            _restore(change, f["path"], f["sha_before"], f["backup"])

    try:
        for step in reversed(_steps(tx)):
            if step["type"] == "file":
                _restore(
                    change,
                    step["path"],
                    step["sha_before"],
                    step["backup"],
                    step.get("created", []),
                    step.get("meta"),
                )
                continue
            if step["result"] or any(
                sha256(system.read_bytes(t["path"])) != t["sha_before"] for t in step["touches"]
            ):  # on every entry there is now
                change.run(step["undo"], record_type="result")
            for t in step["touches"]:  # the tool's own undo may format differently: bytes decide
                restore_entry(t)
        failed = []
        for argv in _regen_now(tx, system):
            try:
                change.run(argv)
            except ToolFailed as exc:  # the files are back; a tool that cannot run is the user's to fix
                failed.append(fix_for(system, exc.argv, exc.output))
        for kept in (
            f for r in tx.of_type("keep") for f in r["files"]
        ):  # entries as they were, hand edits too
            restore_entry(kept)
        for path, data in hand.items():
            if system.exists(path):
                try:
                    data, said = without_ours(data, edit), "the edit is kept, seatkit's tokens taken out"
                except SeatError as exc:  # the proof below names the tokens left
                    said = f"the edit is kept as it is ({exc.message})"
                progress(f"{path} was edited since apply: {said}")
                system.write(path, data)
                change.record({"type": "kept", "path": path})
    except OSError as exc:  # a full disk, a read-only file system: the journal knows how far it got
        raise SeatError(
            f"rollback stopped half-way: {exc}",
            f"transaction {change.txid} is left open: fix the cause, then `seat host recover` finishes it",
        ) from None
    change.commit(**({"regen_failed": failed} if failed else {}))
    theirs = _others_tokens(system, tx) | readback.operators_tokens(system, tx.begin["facts"].get("stack"))
    left = readback.remains(
        system,
        [t for t in edit.added if t not in theirs],
        (tx.begin["facts"].get("initramfs") or [None])[0],
        not system.exists(host_plan.MODPROBE_FILE),
        tx.begin.get("lines_before", []),
    )
    if failed:  # the command to run, and what a boot gets until it has run
        raise RegenFailed(change.txid, failed + [f"still: {line}" for line in left])
    if left:
        raise NotProven(change.txid, left)
    return change.txid


class RegenFailed(SeatError):
    def __init__(self, txid: str, fixes: list[str]):
        super().__init__(
            f"the files are restored (transaction {txid} is closed), but regenerating "
            "the boot files failed:\n" + "\n".join(fixes),
            "until that command succeeds the generated boot files may still carry seatkit's change",
        )
        self.txid, self.fixes = txid, fixes


class NotProven(RegenFailed):
    def __init__(self, txid: str, left: list[str]):
        SeatError.__init__(
            self,
            f"rolled back (transaction {txid} is closed), but a boot could still get "
            "seatkit's change:\n  - " + "\n  - ".join(left),
            "remove the tokens or rebuild the image named, with the host's own tool "
            "(update-grub, kernel-install add, update-initramfs -u -k all, dracut)",
        )
        self.txid, self.fixes = txid, [f"still: {line}" for line in left]


def rollback(system: System, txid: str | None = None, progress: Progress = lambda line: None) -> str:
    _no_campaign(system)  # the newest transaction is the campaign's own entries and unit
    with lock.held(system, "rollback"):
        journal = Journal(system)
        if journal.open():
            raise SeatError(
                f"transaction {journal.open()[0].txid} was interrupted", "run `seat host recover` first"
            )
        active = journal.active()
        if not active:
            raise SeatError("nothing to roll back: no applied transaction in the journal")
        tx = next((t for t in active if t.txid == txid), None) if txid else active[-1]
        if tx is None:
            raise SeatError(
                f"no applied transaction {txid}", "in force: " + ", ".join(t.txid for t in active)
            )
        return revert(tx, system, progress)


def recover(system: System, progress: Progress = lambda line: None) -> list[str]:
    """Undo every transaction that was cut short; returns the ids it closed. A regeneration tool
    that fails is recorded once and its fix raised after everything is closed: recover terminates."""
    if not Journal(system).open():
        return []
    _require_root(system)
    with lock.held(system, "recover"):
        journal = Journal(system)
        _clean_temp(system, journal, progress)
        closed, fixes = [], []
        by_id = {t.txid: t for t in journal.transactions()}
        forgets = {t.begin["of"]: t.txid for t in journal.open() if t.begin.get("forgotten")}
        undone = journal.undone()
        for tx in journal.open():
            of = tx.begin["of"] if tx.action == "rollback" else tx.txid
            if tx.begin.get("forgotten") or of in forgets or of in undone:  # forgotten or undone since:
                progress(f"transaction {tx.txid} ({tx.action}) was forgotten or undone since: closing it")
                journal.append({"tx": tx.txid, "type": "commit", "recovered_by": forgets.get(of, tx.txid)})
                closed.append(tx.txid)
                continue
            target = by_id[tx.begin["of"]] if tx.action == "rollback" else tx
            progress(
                f"transaction {tx.txid} ({tx.action}, {tx.begin['profile']}) was cut short: undoing "
                f"{target.txid}"
            )
            try:
                by = revert(target, system, progress)
            except RegenFailed as exc:
                by, fixes = exc.txid, fixes + exc.fixes
            journal.append({"tx": tx.txid, "type": "commit", "recovered_by": by})
            closed.append(tx.txid)
        if fixes:
            raise SeatError(
                f"recovered {', '.join(closed)}: every file is restored, but the boot "
                "files are not yet clean:\n" + "\n".join(fixes),
                "nothing is left open: after the fix, run the command shown; "
                "`seat host recover` has nothing more to do",
            )
        return closed


def forget(system: System, txid: str) -> None:
    """Close a transaction without touching files: the way out when its backups are gone and the
    user has put the files back (or accepted them) by hand."""
    _no_campaign(system)  # forgetting its entries' transaction would leave them installed for good
    _require_root(system)
    with lock.held(system, f"forget {txid}"):
        journal = Journal(system)
        tx = next((t for t in journal.transactions() if t.txid == txid and t.action == "apply"), None)
        if tx is None or txid in journal.undone():
            raise SeatError(f"no open or applied transaction {txid}")
        change = Change(
            system,
            lambda line: None,
            {"action": "rollback", "of": txid, "profile": tx.begin["profile"], "forgotten": True},
        )
        change.commit()
        if not tx.committed:
            journal.append({"tx": txid, "type": "commit", "recovered_by": change.txid})
