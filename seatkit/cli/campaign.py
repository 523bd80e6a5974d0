"""`seat campaign …`: an unattended, reboot-spanning ablation: plan, run, status, abort, resume."""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.markup import escape

from seatkit.campaign import runner, spec
from seatkit.campaign.plan import Plan, build, duration
from seatkit.campaign.seat import ConfinedDriver, SeatDriver
from seatkit.cli import output
from seatkit.cli.app import err, out
from seatkit.cli.progress import progress
from seatkit.errors import SeatError
from seatkit.host.system import System, confined

ROOT = click.option(
    "--root",
    default="/",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Root of the host's file system (a throwaway root in tests).",
)
ACK = click.option(
    "--acknowledge-iommu-off",
    "ack",
    is_flag=True,
    help="Host arms turn the IOMMU off: DMA isolation goes while they run.",
)


@click.group("campaign")
def campaign_group():
    """Host arms booted once each (the normal boot never touched), seat and live arms: one answer."""


def _system(root: str) -> System:
    if Path(root).resolve() == Path("/"):
        return System()
    return System(root=Path(root), runner=confined(Path(root)))


def _print_plan(plan: Plan) -> None:
    c = plan.campaign
    out.print(
        f"campaign {c.name}: {len(plan.visits)} benches of {len(set(a.name for a in plan.visits))} "
        f"arms, ABBA order",
        highlight=False,
    )
    out.print(
        f"  reboots: {plan.reboots}; roughly {duration(plan.seconds)} "
        f"(each cold start may take up to {plan.cold_start_s:.0f} s)",
        highlight=False,
    )
    out.print("  order: " + escape(" ".join(a.name for a in plan.visits)), highlight=False, soft_wrap=True)
    for note in plan.notes:
        out.print(f"  note: {escape(note)}", highlight=False, soft_wrap=True)
    for refusal in plan.refusals:
        out.print(f"  [red]refused:[/] {escape(refusal)}", highlight=False, soft_wrap=True)


@campaign_group.command("plan")
@click.argument("name")
@ACK
@ROOT
@output.json_option("the plan")
def plan_cmd(name, ack, root, as_json):
    """How many reboots, roughly how long, in what order, and every reason to refuse.
    Exits 2 when `seat campaign run` would refuse."""
    plan = build(spec.load(name), _system(root), ack)
    output.emit(plan.to_json(), as_json, lambda data: _print_plan(plan))
    if plan.refusals:
        raise SystemExit(2)


def _seat_exe() -> str:
    """The `seat` of this interpreter: the kit that runs now, whose package unsafe_exe vets."""
    return str(Path(sys.executable).with_name("seat"))


def _driver(root: str) -> SeatDriver | ConfinedDriver:
    """Seats start and stop on this machine: under a throwaway root, none does."""
    return SeatDriver() if Path(root).resolve() == Path("/") else ConfinedDriver()


def _step(root: str) -> None:
    with progress(err, "campaign") as update:
        outcome = runner.step(_system(root), _driver(root), update)
    out.print(f"campaign: {outcome}", highlight=False)


@campaign_group.command("run")
@click.argument("name")
@ACK
@ROOT
def run_cmd(name, ack, root):
    """Start the campaign: the first step runs now; the unit resumes it after each reboot."""
    plan = build(spec.load(name), _system(root), ack)
    _print_plan(plan)
    if Path(root).resolve() != Path("/"):
        raise SeatError(
            f"a campaign starts seats, and host arms run update-grub, grub-reboot and systemctl "
            f"reboot: all of it acts on this machine, not on {root}: not started",
            "--root serves `seat campaign plan`, `status` and `report`; run the campaign on the host itself",
        )
    folder = runner.start(plan, _system(root), _seat_exe(), root)
    out.print(f"campaign folder: {escape(folder)} (log: campaign.log)", highlight=False, soft_wrap=True)
    _step(root)


@campaign_group.command("step", hidden=True)
@ROOT
def step_cmd(root):
    """The unit's ExecStart after each boot."""
    _step(root)


@campaign_group.command("resume")
@ROOT
def resume_cmd(root):
    """Carry on after a kill or a crash in this boot (what the unit does after a boot)."""
    _step(root)


@campaign_group.command("abort")
@ROOT
def abort_cmd(root):
    """Stop the campaign and restore the start state (reboots into the normal entry if needed)."""
    with progress(err, "campaign abort") as update:  # the end's own line says what was put back
        outcome = runner.abort(_system(root), _driver(root), update)
    out.print(f"campaign: {outcome}", highlight=False)


@campaign_group.command("report")
@click.argument("folder", required=False)
@ROOT
@output.json_option("the report")
def report_cmd(folder, root, as_json):
    """Render a campaign's report again from its journal (the running or newest one by default)."""
    result = runner.report(_system(root), folder)
    output.emit(result, as_json, _show_report)


def _show_report(result: dict) -> None:
    out.print(
        f"campaign {escape(result['campaign'])} ({escape(result['id'])}): {result['measured']} of "
        f"{result['visits']} visits measured"
        + ("" if result["complete"] else " [bold]INCOMPLETE[/]")
        + (f"; stopped: {escape(result['stopped'])}" if result["stopped"] else "")
        + ("" if result["ended"] else "; still running"),
        highlight=False,
        soft_wrap=True,
    )
    out.print(escape(result["table"]), highlight=False, end="")
    out.print(escape(result["verdict"]), highlight=False, soft_wrap=True)
    out.print(f"written: {escape(result['folder'])}/report.md", highlight=False, soft_wrap=True)


@campaign_group.command("status")
@ROOT
@output.json_option("the status")
def status_cmd(root, as_json):
    """Where the running campaign stands."""
    result = runner.status(_system(root))
    output.emit(result, as_json, _show_status)


def _show_status(result: dict) -> None:
    if not result["running"]:
        out.print("no campaign is running")
        return
    nxt = result["next"]
    out.print(
        f"campaign {escape(result['id'])}: {result['done']} of {result['visits']} benches done, "
        f"{result['skipped']} skipped",
        highlight=False,
    )
    if nxt:
        out.print(
            f"  next: visit {nxt['visit']} ({escape(nxt['arm'])}), {nxt['armed_boots']} boot(s) armed for it",
            highlight=False,
        )
    out.print(
        f"  running kernel booted for: {escape(result['booted_arm'] or 'the normal entry')}", highlight=False
    )
    if result["stopping"]:
        out.print(
            f"  stopping: {escape(result['stopping']['type'])}: {escape(result['stopping']['why'])}",
            highlight=False,
            soft_wrap=True,
        )
    out.print(f"  log: {escape(result['log'])}", highlight=False, soft_wrap=True)
