"""A campaign's end: the start state restored (live knobs, boot entries, unit, grub), the report
written, the operator's grubenv edits kept, the end journaled, and a reboot out of an arm."""

from __future__ import annotations

from seatkit.campaign import analysis, boot, grub_edits, live
from seatkit.campaign.folder import CURRENT, Progress, Run
from seatkit.campaign.visit import Driver
from seatkit.host import undo


def finish(run: Run, progress: Progress, driver: Driver) -> str:
    """Restore the start state, report what was measured (marked incomplete when stopped), end.
    Nothing in the report, a knob that will not go back or a boot tool that fails keeps the host
    from its start state or the campaign from its end: those are said, with what to do, and the end
    comes. In an arm's boot the reboot into the normal entry comes whatever happens before it."""
    with boot.leaving_arm(run.system, progress):
        return _end(run, progress, driver)


def _end(run: Run, progress: Progress, driver: Driver) -> str:
    system = run.system
    stop = run.stopping
    try:
        for name in driver.stop(run.campaign):  # a step killed mid-bench left its seat serving
            progress(f"stopped the seat {name}, which a step left running")
        serving = []
    except Exception as exc:  # the host's restore comes first; the seat is said, with what to do
        serving = [f"a seat of the campaign may still run ({type(exc).__name__}: {exc}): `seat down PROFILE`"]
    system.fault("campaign: before the restore")
    regenerated, left = _restore(run, progress)
    if not run.of("reported"):
        _report(run, progress)
    _keep_grubenv_edits(run, progress)
    system.fault("campaign: before the end")
    run.add({"type": "end", "outcome": stop["type"] if stop else "done"})
    system.remove(CURRENT)
    measured, visits = len(run.of("measured")), len(run.visits)
    progress(
        f"campaign {run.id}: {stop['type'] + ': ' + stop['why'] if stop else 'done'}; "
        + (f"the report covers {measured} of {visits} visits (incomplete); " if stop else "")
        + (
            f"the host's files are as they were, but {boot.GRUB_CFG}, regenerated from today's configuration"
            if regenerated
            else "the host's files are as they were"
        )
        + "".join(f"; NOT PUT BACK: {why}" for r in run.of("live-restored") for why in r["left"])
        + "".join(f"; TO DO: {why}" for why in left + serving)
    )
    return stop["type"] if stop else "done"


def _restore(run: Run, progress: Progress) -> tuple[bool, list[str]]:
    """The live knobs, the boot entries and the unit put back; whether grub.cfg was regenerated
    meanwhile (then update-grub runs again), and what a boot tool left for the operator to do."""
    system = run.system
    if run.of("live-start") and not run.of("live-restored"):
        left = live.restore(system, run.of("live-start")[0]["values"])
        for why in left:
            progress(f"not put back: {why}")
        run.add({"type": "live-restored", "left": left})
    tx = boot.installed(system, run.id)
    if tx is not None and not run.of(
        "regenerated"
    ):  # journaled before the restore puts the start's grub.cfg back
        run.add(
            {
                "type": "regenerated",
                "changed": grub_edits.regenerated(system, tx),
                "grubenv": grub_edits.operator_env(system, tx),
            }
        )
    left = []
    try:
        by = boot.uninstall(system, run.id, progress)
    except undo.RegenFailed as exc:  # the files are back and the transaction closed; grub.cfg is the start's
        by, left = exc.txid, [f"{exc.message} ({exc.hint})"]
    if by:
        run.add({"type": "restored", "by": by})
    regenerated = any(r["changed"] for r in run.of("regenerated"))
    if regenerated:  # the start's grub.cfg would boot yesterday's kernels and command line
        progress(
            f"{boot.GRUB_CFG} was regenerated during the campaign (a kernel upgrade or an "
            "update-grub): run update-grub again, so the normal boot carries today's configuration"
        )
        rc, output = system.run(["update-grub"])
        system.settle()
        if rc:
            left.append(
                f"update-grub failed (exit {rc}): {output.strip()[-300:]}; fix what it names and "
                "run update-grub by hand before the next reboot"
            )
    return regenerated, left


def _report(run: Run, progress: Progress) -> None:
    try:
        analysis.write(run, run.system.path(run.folder))
        run.add({"type": "reported"})
    except Exception as exc:  # the measurements are in the journal and runs/; the host comes first
        progress(f"the report failed ({type(exc).__name__}: {exc}); the runs are in {run.folder}/runs")
        run.add({"type": "reported", "failed": f"{type(exc).__name__}: {exc}"})


def _keep_grubenv_edits(run: Run, progress: Progress) -> None:
    """After the restore: the operator's grubenv edits during the campaign stand."""
    for r in run.of("regenerated"):
        edits = r.get("grubenv") or {"set": {}, "unset": []}
        if edits["set"] or edits["unset"]:
            progress(
                f"{boot.GRUBENV}: keep what was changed during the campaign: "
                + " ".join(
                    [f"{k}={v}" for k, v in sorted(edits["set"].items())]
                    + [f"unset {k}" for k in edits["unset"]]
                )
            )
            grub_edits.reapply_env(run.system, edits)
