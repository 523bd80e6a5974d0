"""The campaign's steps: start, the per-boot step the unit runs, abort, status.

The step is idempotent and reads everything from the campaign's journal (fsynced JSON lines in the
campaign folder), so a reboot, a crash or a kill anywhere is followed by the same step again:

    for the next visit not yet measured or skipped:
      seat or live arm  -> bench it in this boot
      host arm, booted into its entry -> check it is live (else "not in force", skipped), bench it
      host arm, armed but this boot is not its entry -> a failed boot; re-arm until boot_attempts
      host arm, not armed -> grub-reboot its entry, reboot
    no visit left -> in an arm's boot, reboot into the normal entry; there, the start state
                     restored and the report written

An abort, a seat not ready within the cold-start time, or a boot counter running out stops the
campaign and restores the start state (the host transaction that installed the entries and unit).
Any other failure in an arm's boot (a GPU lost, /var read-only, the folder gone) is journaled where
it can be, and the step reboots into the normal entry whatever happens: the way back never depends
on it. The end's restore and report run in the normal boot, never in an arm's.
"""

from __future__ import annotations

import os
import time

from seatkit.campaign import analysis, boot, unit
from seatkit.campaign import plan as campaign_plan
from seatkit.campaign.finish import finish
from seatkit.campaign.folder import CURRENT, STATE, Log, Progress, Run, begun, current, held
from seatkit.campaign.visit import Driver, measure
from seatkit.errors import SeatError
from seatkit.host import state
from seatkit.host.journal import Journal
from seatkit.host.system import System


def start(
    plan: campaign_plan.Plan,
    system: System,
    seat_exe: str,
    root: str = "/",
    echo: Progress = lambda line: None,
) -> str:
    """Make the campaign folder and its journal, mark it current; the first step follows."""
    campaign_plan.require(plan)
    campaign = plan.campaign
    if any(a.kind == "host" for a in plan.visits):  # the unit runs it as root at every boot
        unit.require_safe_exe(system, seat_exe)
    with held(system, f"campaign {campaign.name}: start"):
        running = current(system)
        if running:
            raise SeatError(
                f"a campaign is already running: {running}",
                "one at a time: `seat campaign status`, then `seat campaign abort` or wait",
            )
        if Journal(system).open():
            raise SeatError("a host transaction was interrupted", "run `seat host recover` first")
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + f"-{campaign.name}"
        system.path(STATE).mkdir(parents=True, exist_ok=True)
        cid, n = stamp, 1
        while system.path(f"{STATE}/{cid}").exists():  # a rerun in the same second: a folder of its own
            n += 1
            cid = f"{stamp}-{n}"
        folder = f"{STATE}/{cid}"
        system.path(folder).mkdir()
        arms = {a.name: a for a in plan.visits}
        Journal(system, f"{folder}/journal.jsonl").append(
            {
                "tx": cid,
                "type": "begin",
                "time": time.time(),
                "campaign": campaign.model_dump(),
                "arms": [a.model_dump() for a in arms.values()],
                "visits": [a.name for a in plan.visits],
                "vendor": state.cpu_vendor(system),
                "boot_id": state.boot_id(system),
                "plan": plan.to_json(),
                "seat_exe": seat_exe,
                "root": root,
                "driver": state.driver_version(system),  # a change between visits is refused
                "launch_env": plan.launch_env,  # the operator's launch knobs: every visit's seat gets them
            }
        )
        system.write(CURRENT, f"{folder}\n".encode())
        Log(system, folder, echo)(
            f"campaign {cid}: {len(plan.visits)} visits, {plan.reboots} reboots, "
            f"about {campaign_plan.duration(plan.seconds)}"
        )
        return folder


def step(system: System, driver: Driver, echo: Progress = lambda line: None) -> str:
    """One pass after a boot (or a resume): returns 'rebooting', 'done', 'aborted' or 'failed'."""
    folder = current(system)
    if folder is None:
        if boot.booted_arm(system):  # an end killed before its reboot: the arm's kernel must not stay
            echo(
                f"no campaign is running, but this boot is the arm {boot.booted_arm(system)}'s: back to the normal entry"
            )
            boot.leave_arm(system)
            return "rebooting"
        raise SeatError("no campaign is running", "`seat campaign run NAME` starts one")
    try:
        if not begun(system, folder):  # the folder was removed: end it
            return _abort_without_journal(system, folder, echo, "the folder was removed or emptied")
        with held(system, f"campaign step ({folder})"):
            return _visits(system, folder, driver, Log(system, folder, echo))
    except Exception as exc:  # anything, expected or not: an arm's boot must not keep the host
        if not boot.booted_arm(system) or (
            isinstance(exc, SeatError) and "a campaign step is running" in exc.message
        ):  # the normal entry already; or another step runs, and it decides
            raise
        return _out_of_the_arm(system, folder, echo, exc)


def _out_of_the_arm(system: System, folder: str, echo: Progress, exc: Exception) -> str:
    """A step failed in an arm's boot: journal it where the folder still allows, and reboot into
    the normal entry, whose step ends the campaign (or, unjournaled, counts it as a failed boot)."""
    why = exc.message if isinstance(exc, SeatError) else f"{type(exc).__name__}: {exc}"
    progress = _said(Log(system, folder, echo), echo)
    progress(f"the step failed in an arm's boot: {why}; back to the normal entry")
    try:
        run = Run(system, folder)
        if not run.stopping:
            run.add({"type": "failed", "visit": run.next_visit(), "why": why})
    except Exception as again:  # the journal unwritable or gone: the boot counter decides next time
        progress(f"not journaled ({type(again).__name__}: {again})")
    boot.leave_arm(system)
    return "failed"


def _said(log: Log, echo: Progress) -> Progress:
    """The log, or only the echo where the folder cannot take a line (read-only, gone)."""

    def say(line: str) -> None:
        try:
            log(line)
        except OSError:
            echo(line)

    return say


def _visits(system: System, folder: str, driver: Driver, progress: Progress) -> str:
    os.environ.update(Run(system, folder).records[0].get("launch_env", {}))  # systemd's env has none
    while True:
        run = Run(system, folder)  # an abort from another process is read at each pass
        if run.ended:  # killed after the end record, before the marker went
            system.remove(CURRENT)
            if boot.booted_arm(system):  # ... and before its reboot out of the arm
                progress("reboot into the normal entry")
                boot.leave_arm(system)
            return run.of("end")[0]["outcome"]
        i = run.next_visit()
        if run.stopping or i is None:
            if boot.booted_arm(system):  # the end's restore runs in the normal boot, never in an arm's
                progress("reboot into the normal entry; the campaign ends there")
                boot.leave_arm(system)
                return "rebooting"
            return finish(run, progress, driver)
        arm = run.visits[i]
        try:
            if arm.kind != "host":
                measure(run, i, driver, progress)
                continue
            if boot.installed(system, run.id) is None:
                progress("install the one-shot entries and the unit")
                boot.uninstall(system, run.id, progress)  # a kill mid-install: undo it first
                _install(run, progress)
            armed = run.of("armed", i)
            here = state.boot_id(system)
            if armed and armed[-1]["boot_id"] != here:  # rebooted since it was armed
                if boot.booted_arm(system) == arm.name:
                    measure(run, i, driver, progress)
                    continue
                if len(armed) >= run.campaign.boot_attempts:
                    raise SeatError(
                        f"visit {i + 1} ({arm.name}): {len(armed)} boots, none into its "
                        "entry (the boot counter ran out)"
                    )
                progress(
                    f"visit {i + 1} ({arm.name}): this boot is not the arm's entry "
                    f"(attempt {len(armed)} of {run.campaign.boot_attempts} failed)"
                )
            if not armed or armed[-1]["boot_id"] != here:
                campaign_plan.require_arm(system, run.campaign, arm)  # the driver the next boot loads
                system.fault(f"campaign: before arming visit {i}")
                _arm(run, i, arm, here)
            progress(f"visit {i + 1}/{len(run.visits)} ({arm.name}): reboot into its one-shot entry")
            system.fault(f"campaign: before the reboot into visit {i}")
            if Run(system, folder).stopping:  # an abort came while it armed: the arm is not booted
                boot.disarm(system)
                continue
            boot.reboot(system)
            return "rebooting"
        except (SeatError, OSError) as exc:  # a seat that never got ready, a full disk: stop, restore
            why = exc.message if isinstance(exc, SeatError) else f"{type(exc).__name__}: {exc}"
            progress(f"visit {i + 1} ({arm.name}) failed: {why}")
            run.add({"type": "failed", "visit": i, "why": why})


def _arm(run: Run, i: int, arm, here: str | None) -> None:
    """grub-reboot the arm's entry and journal it; if the journal refuses (a full disk), the
    one-shot is taken back: the normal boot must not keep an arm armed for whoever reboots next."""
    boot.arm(run.system, arm)
    try:
        run.add({"type": "armed", "visit": i, "arm": arm.name, "boot_id": here})
    except BaseException:
        boot.disarm(run.system)
        raise


def _install(run: Run, progress: Progress) -> None:
    system = run.system
    profile = campaign_plan.host_profile(run.campaign)
    assert profile is not None  # host arms need campaign.host (Campaign)
    body = boot.default_entry(system)
    keys = boot.operator_keys(system, body)
    hosts = [a for a in run.arms.values() if a.kind == "host"]
    entries = [
        boot.entry(a, body, boot.arm_tokens(a, profile, run.vendor, keys), run.campaign.name) for a in hosts
    ]
    begin = run.records[0]
    unit.require_safe_exe(system, begin["seat_exe"])  # when the unit is written; the unit checks at start
    plan = begin["plan"]  # a step bounded by every visit's worth of benches and cold starts, twice
    timeout = int(2 * (plan["estimate_s"] + plan["cold_start_max_s"] * len(plan["visits"]))) + 600
    home = begin.get("launch_env", {}).get("SEAT_HOME")  # root launches the runtime built there
    folders = unit.import_folders() + ([home] if home else [])
    boot.install(
        system,
        run.id,
        boot.script(run.campaign, entries),
        unit.unit_text(begin["seat_exe"], begin["root"], folders, timeout),
        unit.fallback_text(system),
        progress,
    )


def abort(system: System, driver: Driver, echo: Progress = lambda line: None) -> str:
    """Stop the campaign and restore the start state; a running step stops at its next check."""
    folder = current(system)
    if folder is None:
        raise SeatError("no campaign is running")
    try:
        run = Run(system, folder)
    except Exception as exc:  # removed, a line damaged, or written by another version of the kit
        why = exc.message if isinstance(exc, SeatError) else f"unreadable by this kit ({type(exc).__name__})"
        return _abort_without_journal(system, folder, echo, why)
    if not run.stopping:
        run.add({"type": "aborted", "why": "seat campaign abort"})
    try:
        with held(system, "campaign abort"):
            run = Run(system, folder)
            return finish(run, Log(system, folder, echo), driver)
    except SeatError as exc:
        if "a campaign step is running" in exc.message:
            raise SeatError(
                "the abort is recorded; a step is running now and restores the start "
                "state when its bench returns",
                exc.message,
            ) from None
        raise


def _abort_without_journal(system: System, folder: str, echo: Progress, why: str) -> str:
    """The journal cannot be read: the host transaction (named by the folder's campaign id) still
    says what to undo; what only the journal knew (the live knobs' start values) is lost. The
    report holds what the journal's readable lines record, marked incomplete."""
    with held(system, "campaign abort"), boot.leaving_arm(system, echo):
        by = boot.uninstall(system, folder.rstrip("/").rsplit("/", 1)[-1], echo)
        echo(
            f"the campaign's journal cannot be read ({why}): "
            + (f"the entries and the unit are removed ({by})" if by else "no entries or unit were installed")
        )
        echo(_salvaged_report(system, folder))
        system.remove(CURRENT)
    return "aborted"


def _salvaged_report(system: System, folder: str) -> str:
    """Write the report of what the journal's readable lines record; say what was written."""
    try:
        run = Run(system, folder, damaged_ok=True)
    except Exception:  # no beginning left to say what was planned: the runs are all there is
        return f"no report: what the campaign planned cannot be read; its runs are in {folder}/runs"
    try:
        analysis.write(run, system.path(folder))
    except Exception as exc:  # the host comes first, as at any end
        return f"the report failed ({type(exc).__name__}: {exc}); the runs are in {folder}/runs"
    return f"the report holds what its readable lines record (incomplete): {folder}/report.md"


def report(system: System, folder: str | None = None) -> dict:
    """Render the report of a campaign folder again (the running one's so far, by default), from its
    journal and runs: what was measured, whether it ended, and why not all of it was."""
    folder = folder or current(system) or _newest(system)
    if folder is None or not begun(system, folder):
        raise SeatError(
            f"no campaign journal in {folder or STATE}",
            f"name a campaign folder: `seat campaign report {STATE}/ID`",
        )
    run = Run(system, folder, damaged_ok=True)
    result = analysis.write(run, system.path(folder))
    stop = run.stopping
    return {
        **result,
        "folder": folder,
        "ended": run.ended,
        "complete": run.ended and not stop and not run.damaged,
        "measured": len(run.of("measured")),
        "visits": len(run.visits),
        "stopped": f"{stop['type']}: {stop['why']}" if stop else None,
    }


def _newest(system: System) -> str | None:
    found = sorted(p.name for p in system.path(STATE).glob("*/journal.jsonl") for p in [p.parent])
    return f"{STATE}/{found[-1]}" if found else None


def status(system: System) -> dict:
    folder = current(system)
    if folder is None:
        return {"running": False}
    run = Run(system, folder)
    i = run.next_visit()
    return {
        "running": True,
        "folder": folder,
        "id": run.id,
        "campaign": run.campaign.name,
        "visits": len(run.visits),
        "done": len(run.of("measured")),
        "skipped": len(run.of("skipped")),
        "next": None
        if i is None
        else {"visit": i + 1, "arm": run.visits[i].name, "armed_boots": len(run.of("armed", i))},
        "booted_arm": boot.booted_arm(system),
        "stopping": run.stopping,
        "log": f"{folder}/campaign.log",
    }
