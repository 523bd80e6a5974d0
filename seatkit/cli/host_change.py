"""`seat host plan | apply | rollback | recover | forget`: change the host in journaled transactions."""

from __future__ import annotations

import re

import click
from rich.markup import escape

from seatkit.cli import output
from seatkit.cli.app import out
from seatkit.errors import SeatError
from seatkit.host import change
from seatkit.host.ops import FileOp
from seatkit.host.plan import Choices, Plan, build, diff, to_json
from seatkit.host.system import System
from seatkit.seat import host_profiles
from seatkit.seat.host_profiles import HostProfile
from seatkit.text import counted


def _show(plan: Plan) -> None:
    facts = plan.facts
    # systemd-detect-virt names containers too (docker is no VM): "runs under" fits both.
    stack = f"boot stack {facts.stack} ({facts.stack_why})" if facts.stack else facts.stack_why
    out.print(
        f"host: {facts.os_id or 'unknown OS'}, {stack}, "
        f"initramfs: {facts.initramfs_why}, driver {facts.driver or 'unknown'}, CPU {facts.vendor or '?'}, "
        f"{facts.cpus or '?'} CPUs, {'runs under ' + facts.virt if facts.virt else 'bare metal'}",
        highlight=False,
    )
    if plan.snippet:
        out.print(escape(plan.snippet), highlight=False)
    if plan.edit and not plan.edit.empty and (plan.ops or plan.snippet):  # else the files have it already
        replaced = " ".join(t for _, t in plan.edit.replaced)
        out.print(
            f"kernel command line: adds {' '.join(plan.edit.added) or 'nothing'}"
            + (f", removes {replaced} (rollback puts it back)" if replaced else ""),
            highlight=False,
        )
    for op in plan.ops:
        if isinstance(op, FileOp):
            out.print(f"[bold]{op.path}[/]: {op.why}")
            out.print(escape(diff(System(), op)), highlight=False, soft_wrap=True)
        else:
            out.print(
                f"[bold]run[/] {escape(' '.join(op.argv))}  ({op.why}; undone by "
                f"{escape(' '.join(op.undo))})",
                highlight=False,
            )
    for argv in plan.regen:
        out.print(f"[bold]then run[/] {escape(' '.join(argv))}", highlight=False)
    if not plan.ops and not plan.snippet:
        out.print("nothing to do: the files already say what the profile asks")
    for warning in plan.warnings:
        out.print(f"[yellow]warning:[/] {escape(warning)}")
    for refusal in plan.refusals:
        out.print(f"[red]refused:[/] {escape(refusal)}")


def _show_with_tokens(plan: Plan, host: HostProfile) -> None:
    _show(plan)
    # Where the kit cannot edit the boot line (a cluster's nodes), provisioning sets these.
    tokens = "; ".join(f"{vendor}: {' '.join(t)}" for vendor, t in host.iommu.tokens.items())
    out.print(f"IOMMU tokens of {host.name}, for node provisioning: {tokens}", highlight=False)


def _would(plan: Plan, system: System) -> str:
    """The answer a dry run owes first: whether `--yes` would act, and if not, what stops it."""
    stops = [*plan.refusals]
    if plan.snippet:
        stops.append("NixOS is configured declaratively: the snippet below goes into configuration.nix")
    if system.euid != 0:
        stops.append("acting needs root (sudo)")
    if not stops:
        return f"--yes would apply this plan: {counted(len(plan.ops), 'change')}, then a reboot"
    heads = "\n".join(f"  - {escape(re.split(r'[:.] ', stop)[0])}" for stop in stops)  # the why follows below
    return f"[red]--yes would not act[/]: {counted(len(stops), 'thing')} {'blocks' if len(stops) == 1 else 'block'} it (each explained below):\n{heads}"


REPLACE = click.option(
    "--replace",
    is_flag=True,
    help="Replace IOMMU tokens that conflict (e.g. iommu=pt); rollback puts them back.",
)
ACKNOWLEDGE = click.option(
    "--acknowledge-iommu-off",
    "acknowledge",
    is_flag=True,
    help="Accept that IOMMU off removes DMA isolation (the paper profile needs it).",
)
HOST_PROFILE = click.argument("profile", metavar="PROFILE")


@click.command("plan")
@HOST_PROFILE
@REPLACE
@ACKNOWLEDGE
@output.json_option("the plan")
def plan_cmd(profile: str, replace: bool, acknowledge: bool, as_json: bool):
    """What `apply PROFILE` would do: each file's diff, each command, and any refusal. Changes nothing.

    Exits 2 when apply would refuse."""
    host = host_profiles.load(profile)
    plan = build(host, choices=Choices(replace, acknowledge))
    found = {**to_json(plan, System()), "iommu_tokens": host.iommu.tokens}
    output.emit(found, as_json, lambda data: _show_with_tokens(plan, host))
    if plan.refusals:
        raise SystemExit(2)


@click.command("apply")
@HOST_PROFILE
@REPLACE
@ACKNOWLEDGE
@click.option("--yes", is_flag=True, help="Act. Without it apply is a dry run that only shows the plan.")
def apply_cmd(profile: str, replace: bool, acknowledge: bool, yes: bool):
    """Apply a host profile in one journaled transaction (dry run unless --yes; acting needs root).

    Files are backed up before they are written; `seat host rollback` undoes the transaction
    byte for byte and `seat host recover` undoes one that was cut short. A reboot follows."""
    plan = build(host_profiles.load(profile), choices=Choices(replace, acknowledge))
    if not yes:
        out.print(_would(plan, System()), highlight=False)
    _show(plan)
    if not yes:
        n = len(plan.refusals)
        why = (
            f"{counted(n, 'refusal')} above {'blocks' if n == 1 else 'block'} --yes"
            if n
            else "add --yes to apply"
        )
        out.print(f"dry run: nothing was changed ({why})")
        if plan.refusals:
            raise SystemExit(2)
        return
    if plan.refusals:  # each one is printed above, with what lets it through
        raise SeatError(
            f"apply refused: {counted(len(plan.refusals), 'refusal')} above; nothing was changed",
            "each refusal above says what lets it through",
            code=2,
        )
    if System().euid != 0:
        raise SeatError(
            "changing the host needs root: nothing was changed",
            "run it again with sudo (`sudo seat host apply ...`)",
            code=2,
        )
    txid = change.apply(plan, System(), progress=lambda line: out.print(escape(line)))
    if txid is None:
        out.print("nothing changed, nothing run")
        return
    status = "seat host status" + ("" if profile == "paper" else f" --profile {profile}")
    out.print(
        f"applied as transaction {txid}.\nIt takes effect at the next boot:\n"
        f"  sudo reboot\n  {status}\nTo undo it (before or after the reboot):\n  sudo seat host rollback",
        highlight=False,
        soft_wrap=True,
    )


@click.command("rollback")
@click.option("--tx", "txid", help="The transaction to undo (default: the latest in force).")
def rollback_cmd(txid: str | None):
    """Undo an applied transaction: restore the files seatkit wrote byte for byte, regenerate the
    boot files for every kernel installed now, then prove no entry or initramfs keeps the change.

    A file edited since seatkit wrote it stops the rollback before anything changes, showing
    before / ours / now; a loader entry edited since apply keeps the edit, without seatkit's tokens."""
    undone = change.rollback(System(), txid, progress=lambda line: out.print(escape(line)))
    out.print(f"rolled back transaction {undone}; reboot to return to the previous command line")


@click.command("recover")
def recover_cmd():
    """Undo every transaction that was cut short (a crash, a failed command), from the journal.

    It always ends with nothing open: when a regeneration tool keeps failing, the files are
    restored, the failure is recorded once, and the exact fix (file, output, command) is printed."""
    closed = change.recover(System(), progress=lambda line: out.print(escape(line)))
    out.print(f"recovered: {', '.join(closed)}" if closed else "nothing to recover: no open transaction")


@click.command("forget")
@click.argument("txid", metavar="TX")
def forget_cmd(txid: str):
    """Close a transaction without touching any file: the way out when its backups are gone.

    Put the files rollback names back by hand first (or accept them as they are); the journal
    then records the transaction as undone, so plan and apply work again."""
    change.forget(System(), txid)
    out.print(f"forgot transaction {txid}: the journal records it as undone by hand")
