"""Undo one apply: `seat host rollback`'s work, and recover's for a transaction cut short.

Rollback restores byte for byte and stops, changing nothing, when a file was edited since seatkit
wrote it. Generated boot files are not restored from backups: rollback regenerates them with the
host's own tools for every kernel installed at rollback time, from the sources it restored, so a
kernel installed or removed since apply is handled as the host is now. A loader entry the operator
edited since apply keeps the edit, without seatkit's tokens. Rollback then proves it: no entry
carries a token seatkit added, no initramfs holds its module file, or it exits non-zero naming
what remains.

A regeneration tool that fails while undoing (a defaults file the user broke) does not keep the
transaction open: the files are restored, the failure is recorded once with the exact fix, and
recover terminates.
"""

from __future__ import annotations

import difflib
import os

from seatkit.errors import SeatError
from seatkit.host import cmdline, detect, grub_defaults, ops, readback
from seatkit.host.journal import STATE, Journal, Transaction, sha256
from seatkit.host.system import System
from seatkit.host.transaction import Change, Progress, ToolFailed, require_root


def fix_for(system: System, argv: list[str], output: str) -> str:
    """The exact way out after a regeneration tool failed: the file to fix, the tool's words, the command."""
    named = grub_defaults.syntax_errors(system) if argv[0] in ("update-grub", "grub-mkconfig") else []
    return (
        f"`{' '.join(argv)}` failed: {output.strip()[-800:]}\n"
        + (f"fix: {'; '.join(named)}\n" if named else "fix what its output names, ")
        + f"then run: {' '.join(argv)}"
    )


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


def _restore(change: Change, f: dict) -> None:
    """A file (a journal record's path, sha_before, backup; created and meta where it has them)
    put back as it was before."""
    system, path, before, backup = change.system, f["path"], f["sha_before"], f["backup"]
    meta = f.get("meta")
    if sha256(system.read_bytes(path)) != before:
        change.progress(f"restore {path}")
        if backup is None:
            system.remove(path)
        else:
            data = system.read_bytes(backup)
            if data is None:  # gone since _missing_backups looked
                raise SeatError(
                    f"{path}: its backup {backup} is gone", f"transaction {change.txid} stays open"
                )
            system.write(path, data)
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
    for folder in reversed(f.get("created", [])):  # folders apply made go when they are empty again
        if system.entries(folder) == []:
            system.path(folder).rmdir()


def _refuse_unsafe(system: System, tx: Transaction) -> dict[str, bytes]:
    """Refuse, changing nothing, an undo that would lose an edit or a byte; else the hand edits kept."""
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
        return _hand_edits(system, tx)
    except OSError as exc:
        raise SeatError(
            f"cannot keep a copy of the loader entries edited since apply: {exc}\nnothing was changed",
            "free space in /var/lib/seatkit, then roll back again",
        ) from None


def _undo(change: Change, tx: Transaction, hand: dict[str, bytes], edit: cmdline.Edit) -> list[str]:
    """Every step undone, newest first, the boot files regenerated; the fixes for tools that failed."""
    system, progress = change.system, change.progress

    def restore_entry(f: dict) -> None:  # a removed kernel's entry stays removed; hand edits come last
        if not (_is_entry(f["path"]) and (f["path"] in hand or not system.exists(f["path"]))):
            _restore(change, f)

    for step in reversed(_steps(tx)):
        if step["type"] == "file":
            _restore(change, step)
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
    for kept in (f for r in tx.of_type("keep") for f in r["files"]):  # entries as they were, hand edits too
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
    return failed


def revert(tx: Transaction, system: System, progress: Progress = lambda line: None) -> str:
    """Undo an apply (committed or cut short), newest step first; returns the rollback's id."""
    require_root(system)
    hand = _refuse_unsafe(system, tx)
    edit = cmdline.Edit.from_json(tx.begin["edit"]) if tx.begin.get("edit") else cmdline.Edit()
    change = Change(system, progress, {"action": "rollback", "of": tx.txid, "profile": tx.begin["profile"]})
    try:
        failed = _undo(change, tx, hand, edit)
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
        not system.exists(ops.MODPROBE_FILE),
        tx.begin.get("lines_before", []),
    )
    if failed:  # the command to run, and what a boot gets until it has run
        raise RegenFailed(change.txid, tx.txid, failed + [f"still: {line}" for line in left])
    if left:
        raise NotProven(change.txid, tx.txid, left)
    return change.txid


class RegenFailed(SeatError):
    """txid: the rollback's own transaction (the journal's); of: the apply it undid (the user's)."""

    def __init__(self, txid: str, of: str, fixes: list[str]):
        super().__init__(
            f"transaction {of} is rolled back and its files are restored, but regenerating "
            "the boot files failed:\n" + "\n".join(fixes),
            "until that command succeeds the generated boot files may still carry seatkit's change",
        )
        self.txid, self.fixes = txid, fixes


class NotProven(RegenFailed):
    def __init__(self, txid: str, of: str, left: list[str]):
        SeatError.__init__(
            self,
            f"transaction {of} is rolled back, but a boot could still get "
            "seatkit's change:\n  - " + "\n  - ".join(left),
            "remove the tokens or rebuild the image named, with the host's own tool "
            "(update-grub, kernel-install add, update-initramfs -u -k all, dracut)",
        )
        self.txid, self.fixes = txid, [f"still: {line}" for line in left]
