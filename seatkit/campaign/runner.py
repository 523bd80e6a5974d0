"""The campaign's steps: start, the per-boot step the unit runs, abort, status.

The step is idempotent and reads everything from the campaign's journal (fsynced JSON lines in the
campaign folder), so a reboot, a crash or a kill anywhere is followed by the same step again:

    for the next visit not yet measured or skipped:
      seat or live arm  -> bench it in this boot
      host arm, booted into its entry -> check it is live (else "not in force", skipped), bench it
      host arm, armed but this boot is not its entry -> a failed boot; re-arm until boot_attempts
      host arm, not armed -> grub-reboot its entry, reboot
    no visit left -> the report, then the start state restored, then a reboot to the normal entry

An abort, a seat not ready within the cold-start time, or a boot counter running out stops the
campaign and restores the start state (the host transaction that installed the entries and unit).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from seatkit import flock, safe_yaml
from seatkit.bench.compare import SUMMARY_BYTES
from seatkit.campaign import analysis, boot, live
from seatkit.campaign import plan as campaign_plan
from seatkit.campaign.spec import Arm, Campaign
from seatkit.errors import SeatError
from seatkit.host import gpus, state
from seatkit.host.journal import Journal
from seatkit.host.system import System
from seatkit.seat import host_profiles

STATE = "/var/lib/seatkit/campaign"
CURRENT = f"{STATE}/current"  # the folder of the running campaign: one at a time
LOCK = f"{STATE}/lock"
Progress = Callable[[str], None]


class Driver(Protocol):
    def bench(self, campaign: Campaign, arm: Arm, runs: Path, progress: Progress) -> Path:
        """Start the arm's seat, wait ready (SeatError past the cold-start time), bench it into a
        new run folder under `runs`, stop the seat; returns the run folder."""


def current(system: System) -> str | None:
    text = system.read(CURRENT)
    return text.strip() if text and text.strip() else None


def held(system: System, what: str):
    return flock.exclusive(
        system.path(LOCK),
        what,
        "a campaign step is running",
        "wait for it; `seat campaign status` works meanwhile",
    )


@dataclass
class Progress_:
    system: System
    folder: str
    echo: Progress

    def __call__(self, line: str) -> None:  # everything to the folder too: a host with no console
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        with open(self.system.path(f"{self.folder}/campaign.log"), "a") as handle:
            handle.write(f"{stamp} {line}\n")
        self.echo(line)


class Run:
    """One campaign folder: its journal and what the journal says."""

    def __init__(self, system: System, folder: str):
        self.system, self.folder = system, folder
        self.journal = Journal(system, f"{folder}/journal.jsonl")
        self.records = self.journal.records()
        if not self.records or self.records[0]["type"] != "begin":
            raise SeatError(
                f"{folder}/journal.jsonl has no campaign beginning (the folder was removed or emptied)",
                "`seat campaign abort` takes the kit's boot entries and unit out and ends it",
            )
        begin = self.records[0]
        self.id = begin["tx"]
        self.campaign = Campaign.model_validate(begin["campaign"])
        self.arms = {a["name"]: Arm.model_validate(a) for a in begin["arms"]}
        self.visits = [self.arms[name] for name in begin["visits"]]
        self.vendor = begin["vendor"]

    def add(self, record: dict) -> None:
        self.journal.append({"tx": self.id, "time": time.time(), **record})
        self.records.append({"tx": self.id, **record})

    def of(self, kind: str, visit: int | None = None) -> list[dict]:
        return [r for r in self.records if r["type"] == kind and (visit is None or r.get("visit") == visit)]

    def next_visit(self) -> int | None:
        done = {r["visit"] for r in self.records if r["type"] in ("measured", "skipped")}
        return next((i for i in range(len(self.visits)) if i not in done), None)

    @property
    def stopping(self) -> dict | None:
        return next((r for r in self.records if r["type"] in ("aborted", "failed")), None)

    @property
    def ended(self) -> bool:
        return bool(self.of("end"))


# --- start ---------------------------------------------------------------------------------------


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
        for n in range(1, 1000):  # a rerun in the second the last one ended gets a folder of its own
            cid = stamp if n == 1 else f"{stamp}-{n}"
            folder = f"{STATE}/{cid}"
            try:
                system.path(folder).mkdir()
                break
            except FileExistsError:
                continue
        else:
            raise SeatError(f"{STATE} has 999 folders named {stamp}*", "move old campaign folders aside")
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
            }
        )
        system.write(CURRENT, f"{folder}\n".encode())
        Progress_(system, folder, echo)(
            f"campaign {cid}: {len(plan.visits)} visits, {plan.reboots} reboots, "
            f"about {campaign_plan.duration(plan.seconds)}"
        )
        return folder


# --- the step --------------------------------------------------------------------------------------


def in_force(arm: Arm, profile: host_profiles.HostProfile, vendor: str, system: System) -> list[str]:
    """What of the arm is not live: its settings must be live, the others must not."""
    problems = []
    tokens = set(profile.iommu.tokens[vendor])
    live = state.live_cmdline(system).value or set()
    units = system.entries("/sys/class/iommu") or []
    iommu = tokens <= live and not (profile.iommu.mode == "off" and units)
    dwords = host_profiles.parse_dwords(host_profiles.registry_keys().forms[profile.registry].dwords)
    found = state.live_dwords(system)
    hmm = state.live_hmm_disabled(system)
    for name, value, why in (
        (
            "iommu",
            iommu,
            f"/proc/cmdline has {' '.join(sorted(live)) or 'no IOMMU tokens'}"
            + (f", IOMMU units {' '.join(units)}" if units else ""),
        ),
        ("p2p", found.value == dwords if found.known else None, found.source),
        ("hmm", hmm.value, hmm.source),
    ):
        wanted = name in arm.host
        if value is None:
            problems.append(f"{name}: unreadable ({why})")
        elif value != wanted:
            problems.append(
                f"{name} {'wanted live but is not' if wanted else 'is live but the arm leaves it out'} ({why})"
            )
    return problems


def _figures(run_folder: Path) -> dict:
    summary = safe_yaml.read_json(run_folder / "summary.json", "bench summary", SUMMARY_BYTES)
    return {
        suite: {
            "ms_per_step": (s.get("ms_per_step") or {}).get("median"),
            "tokens_per_step": (s.get("tokens_per_step") or {}).get("median"),
        }
        for suite, s in summary["suites"].items()
    }


def _measure(run: Run, i: int, driver: Driver, progress: Progress) -> None:
    arm, system = run.visits[i], run.system
    if arm.kind == "host":
        profile = campaign_plan.host_profile(run.campaign)
        problems = in_force(arm, profile, run.vendor, system)
        if problems:
            progress(f"visit {i + 1} ({arm.name}): not in force: {'; '.join(problems)}; skipped")
            run.add(
                {
                    "type": "skipped",
                    "visit": i,
                    "arm": arm.name,
                    "why": "not in force: " + "; ".join(problems),
                }
            )
            return
        inventory = gpus.inventory(system)
        run.add(
            {
                "type": "p2p",
                "visit": i,
                "result": "skipped: no NVIDIA GPU answers NVML"
                if not inventory or not inventory.get("gpus")
                else "see seat host verify-p2p",
            }
        )
    if arm.kind == "live":
        names = live.knobs(run.arms.values())
        if not run.of("live-start"):  # journaled before the first change: the end puts these back
            run.add({"type": "live-start", "values": live.read(system, names)})
        values = {**run.of("live-start")[0]["values"], **arm.live}
        progress(
            f"visit {i + 1} ({arm.name}): set {', '.join(f'{k}={v}' for k, v in sorted(values.items()))}"
        )
        live.apply(system, values)
        found = live.read(system, names)  # read back from the outside: a clamped or locked board says yes
        wrong = [f"{k} is {found[k]}, not {v}" for k, v in sorted(values.items()) if found.get(k) != v]
        if wrong:
            progress(f"visit {i + 1} ({arm.name}): not in force: {'; '.join(wrong)}; skipped")
            run.add(
                {"type": "skipped", "visit": i, "arm": arm.name, "why": "not in force: " + "; ".join(wrong)}
            )
            return
    progress(f"visit {i + 1}/{len(run.visits)} ({arm.name}): start the seat and bench it")
    system.fault(f"campaign: before the bench of visit {i}")
    folder = driver.bench(run.campaign, arm, system.path(f"{run.folder}/runs"), progress)
    system.fault(f"campaign: after the bench of visit {i}")
    run.add(
        {
            "type": "measured",
            "visit": i,
            "arm": arm.name,
            "boot_id": state.boot_id(system),
            "run": str(folder.relative_to(system.path(run.folder))),
            "figures": _figures(folder),
        }
    )


def _finish(run: Run, progress: Progress) -> str:
    """Restore the start state, report (when there is something to report), end. Nothing in the
    report or a knob that will not go back keeps the host from its start state or the campaign
    from its end: those are said, with what to do, and the end comes."""
    system = run.system
    stop = run.stopping
    system.fault("campaign: before the restore")
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
                "changed": boot.regenerated(system, tx),
                "grubenv": boot.operator_env(system, tx),
            }
        )
    by = boot.uninstall(system, run.id, progress)
    if by:
        run.add({"type": "restored", "by": by})
    regenerated = any(r["changed"] for r in run.of("regenerated"))
    if regenerated:  # the start's grub.cfg would boot yesterday's kernels and command line
        progress(
            f"{boot.GRUB_CFG} was regenerated during the campaign (a kernel upgrade or an "
            "update-grub): run update-grub again, so the normal boot carries today's configuration"
        )
        rc, output = system.run(["update-grub"])
        if rc:
            raise SeatError(
                f"update-grub failed (exit {rc}): {output.strip()[-300:]}",
                "fix what it names and run update-grub by hand before the next reboot",
            )
    if not stop and not run.of("reported"):
        try:
            analysis.write(run, system.path(run.folder))
            run.add({"type": "reported"})
        except Exception as exc:  # the measurements are in the journal and runs/; the host comes first
            progress(f"the report failed ({type(exc).__name__}: {exc}); the runs are in {run.folder}/runs")
            run.add({"type": "reported", "failed": f"{type(exc).__name__}: {exc}"})
    for r in run.of("regenerated"):  # after the restore: the operator's grubenv edits stand
        edits = r.get("grubenv") or {"set": {}, "unset": []}
        if edits["set"] or edits["unset"]:
            progress(
                f"{boot.GRUBENV}: keep what was changed during the campaign: "
                + " ".join(
                    [f"{k}={v}" for k, v in sorted(edits["set"].items())]
                    + [f"unset {k}" for k in edits["unset"]]
                )
            )
            boot.reapply_env(system, edits)
    system.fault("campaign: before the end")
    in_arm = boot.booted_arm(system)
    run.add({"type": "end", "outcome": stop["type"] if stop else "done"})
    system.remove(CURRENT)
    progress(
        f"campaign {run.id}: {stop['type'] + ': ' + stop['why'] if stop else 'done'}; "
        + (
            f"the host's files are as they were, but {boot.GRUB_CFG}, regenerated from today's configuration"
            if regenerated
            else "the host's files are as they were"
        )
        + "".join(f"; NOT PUT BACK: {why}" for r in run.of("live-restored") for why in r["left"])
    )
    if in_arm:  # the running kernel is an arm's: back to the normal entry
        progress("reboot into the normal entry")
        boot.reboot(system)
    return stop["type"] if stop else "done"


def step(system: System, driver: Driver, echo: Progress = lambda line: None) -> str:
    """One pass after a boot (or a resume): returns 'rebooting', 'done', 'aborted' or 'failed'."""
    folder = current(system)
    if folder is None:
        raise SeatError("no campaign is running", "`seat campaign run NAME` starts one")
    with held(system, f"campaign step ({folder})"):
        progress = Progress_(system, folder, echo)
        while True:
            run = Run(system, folder)  # an abort from another process is read at each pass
            if run.ended:  # killed after the end record, before the marker went
                system.remove(CURRENT)
                return run.of("end")[0]["outcome"]
            i = run.next_visit()
            if run.stopping or i is None:
                return _finish(run, progress)
            arm = run.visits[i]
            try:
                if arm.kind != "host":
                    _measure(run, i, driver, progress)
                    continue
                if boot.installed(system, run.id) is None:
                    progress("install the one-shot entries and the unit")
                    boot.uninstall(system, run.id, progress)  # a kill mid-install: undo it first
                    _install(run, progress)
                armed = run.of("armed", i)
                here = state.boot_id(system)
                if armed and armed[-1]["boot_id"] != here:  # rebooted since it was armed
                    if boot.booted_arm(system) == arm.name:
                        _measure(run, i, driver, progress)
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
                    system.fault(f"campaign: before arming visit {i}")
                    boot.arm(system, arm)
                    run.add({"type": "armed", "visit": i, "arm": arm.name, "boot_id": here})
                progress(f"visit {i + 1}/{len(run.visits)} ({arm.name}): reboot into its one-shot entry")
                system.fault(f"campaign: before the reboot into visit {i}")
                boot.reboot(system)
                return "rebooting"
            except (SeatError, OSError) as exc:  # a seat that never got ready, a full disk: stop, restore
                why = exc.message if isinstance(exc, SeatError) else f"{type(exc).__name__}: {exc}"
                progress(f"visit {i + 1} ({arm.name}) failed: {why}")
                run.add({"type": "failed", "visit": i, "why": why})


def _install(run: Run, progress: Progress) -> None:
    system = run.system
    profile = campaign_plan.host_profile(run.campaign)
    body = boot.default_entry(system)
    hosts = [a for a in run.arms.values() if a.kind == "host"]
    entries = [boot.entry(a, body, boot.arm_tokens(a, profile, run.vendor), run.campaign.name) for a in hosts]
    begin = run.records[0]
    boot.install(
        system,
        run.id,
        boot.script(run.campaign, entries),
        boot.unit_text(begin["seat_exe"], begin["root"]),
        progress,
    )


def abort(system: System, echo: Progress = lambda line: None) -> str:
    """Stop the campaign and restore the start state; a running step stops at its next check."""
    folder = current(system)
    if folder is None:
        raise SeatError("no campaign is running")
    if not Journal(system, f"{folder}/journal.jsonl").records():
        return _abort_without_journal(system, folder, echo)
    run = Run(system, folder)
    if not run.stopping:
        run.add({"type": "aborted", "why": "seat campaign abort"})
    try:
        with held(system, "campaign abort"):
            return _finish(Run(system, folder), Progress_(system, folder, echo))
    except SeatError as exc:
        if "a campaign step is running" in exc.message:
            raise SeatError(
                "the abort is recorded; a step is running now and restores the start "
                "state when its bench returns",
                exc.message,
            ) from None
        raise


def _abort_without_journal(system: System, folder: str, echo: Progress) -> str:
    """The folder is gone: the host transaction (named by the folder's campaign id) still says what
    to undo; what only the journal knew (the live knobs' start values, the runs) is gone with it."""
    with held(system, "campaign abort"):
        by = boot.uninstall(system, folder.rstrip("/").rsplit("/", 1)[-1], echo)
        echo(
            f"{folder} was gone: "
            + (f"the entries and the unit are removed ({by})" if by else "no entries or unit were installed")
            + "; nothing to report"
        )
        system.remove(CURRENT)
        if boot.booted_arm(system):
            echo("reboot into the normal entry")
            boot.reboot(system)
    return "aborted"


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
