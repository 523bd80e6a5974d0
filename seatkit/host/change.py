"""`seat host apply | rollback | recover | forget`: change the host in journaled transactions, undo exactly.

Apply backs up each file before writing it and records each command before running it
(seatkit.host.transaction), so a transaction cut short anywhere leaves enough in the journal for
`recover` to undo it (seatkit.host.undo). One change at a time: apply, rollback, recover and forget
hold the host lock.
"""

from __future__ import annotations

import os

from seatkit.errors import SeatError
from seatkit.host import detect, lock, readback
from seatkit.host import plan as host_plan
from seatkit.host.journal import Journal, sha256
from seatkit.host.ops import GRUB_DROPIN, KERNEL_CMDLINE, MODPROBE_FILE, FileOp
from seatkit.host.plan import Plan
from seatkit.host.system import System
from seatkit.host.transaction import Change, Progress, require_root
from seatkit.host.undo import RegenFailed, revert

CAMPAIGN = "/var/lib/seatkit/campaign/current"  # `seat campaign run` owns the boot settings while it is there


def _clean_temp(system: System, journal: Journal, progress: Progress) -> None:
    """seatkit's own temp files in every folder it writes, left by a kill inside a write."""
    paths = {MODPROBE_FILE, GRUB_DROPIN, KERNEL_CMDLINE}
    for t in journal.transactions():
        for r in t.records:
            paths.update(
                [r["path"]] if "path" in r else [x["path"] for x in r.get("touches", r.get("files", []))]
            )
    for folder in sorted({os.path.dirname(p) for p in paths}):
        for path in system.clean_temp(folder):
            progress(f"removed leftover temp file {path}")


def _no_campaign(system: System) -> None:
    running = system.read(CAMPAIGN)
    if running:
        raise SeatError(
            f"a campaign is running ({running.strip()}): it owns the boot settings until it ends",
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
    require_root(system)
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


def _begin(plan: Plan, system: System) -> dict:
    return {
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


def _run_plan(change: Change, plan: Plan) -> None:
    """The plan's writes and commands, the files kept, the regeneration, and what it generated."""
    system = change.system
    for op in plan.ops:
        change.write(op) if isinstance(op, FileOp) else change.command(op)
    if plan.keep:
        change.keep(plan.keep)
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


def _apply(plan: Plan, system: System, progress: Progress) -> str | None:
    change = Change(system, progress, _begin(plan, system))
    if not plan.ops:
        change.commit(noop=True)
        return None
    try:
        _run_plan(change, plan)
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


def rollback(system: System, txid: str | None = None, progress: Progress = lambda line: None) -> str:
    """Undo an applied transaction (the newest by default); returns its id, the one apply printed.
    The rollback's own transaction id stays in the journal."""
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
        revert(tx, system, progress)
        return tx.txid


def recover(system: System, progress: Progress = lambda line: None) -> list[str]:
    """Undo every transaction that was cut short; returns the ids it closed. A regeneration tool
    that fails is recorded once and its fix raised after everything is closed: recover terminates."""
    if not Journal(system).open():
        return []
    require_root(system)
    with lock.held(system, "recover"):
        journal = Journal(system)
        _clean_temp(system, journal, progress)
        closed: list[str] = []
        fixes: list[str] = []
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
    require_root(system)
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
