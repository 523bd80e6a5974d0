"""One visit of a campaign: its arm checked in force (host settings live, live knobs read back),
then its seat benched and the figures journaled."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from seatkit import safe_yaml
from seatkit.bench.sides import SUMMARY_BYTES
from seatkit.campaign import boot, live
from seatkit.campaign import plan as campaign_plan
from seatkit.campaign.folder import Progress, Run
from seatkit.campaign.spec import Arm, Campaign
from seatkit.errors import SeatError
from seatkit.host import state
from seatkit.host.system import System
from seatkit.seat import host_profiles, what_runs


class Driver(Protocol):
    def bench(self, campaign: Campaign, arm: Arm, runs: Path, progress: Progress) -> Path:
        """Start the arm's seat, wait ready (SeatError past the cold-start time), bench it into a
        new run folder under `runs`, stop the seat; returns the run folder."""

    def stop(self, campaign: Campaign) -> list[str]:
        """Stop every seat of the campaign's arms still running (a killed step's); their names."""


def in_force(
    arm: Arm, profile: host_profiles.HostProfile, vendor: state.Vendor, system: System, names: set[str]
) -> list[str]:
    """What of the arm is not live, among the settings named (those the campaign varies; the others
    are the operator's, as the normal boot has them): its settings must be live, the others not."""
    assert arm.host is not None  # a host arm
    problems = []
    tokens = set(profile.iommu.tokens[vendor])
    live = state.live_cmdline(system).value or set()
    units = system.entries("/sys/class/iommu") or []
    iommu = tokens <= live and not (profile.iommu.mode == "off" and units)
    keys = boot.p2p_keys(profile)
    found = state.live_dwords(system)
    hmm = state.live_hmm_disabled(system)
    for name, value, why in (
        (
            "iommu",
            iommu,
            f"/proc/cmdline has {' '.join(sorted(live)) or 'no IOMMU tokens'}"
            + (f", IOMMU units {' '.join(units)}" if units else ""),
        ),
        ("p2p", keys.items() <= found.value.items() if found.value is not None else None, found.source),
        ("hmm", hmm.value, hmm.source),
    ):
        if name not in names:
            continue
        wanted = name in arm.host
        if value is None:
            problems.append(f"{name}: unreadable ({why})")
        elif value != wanted:
            problems.append(
                f"{name} {'wanted live but is not' if wanted else 'is live but the arm leaves it out'} ({why})"
            )
    return problems


def _measured(run_folder: Path) -> dict:
    """The run's figures per suite, and its mark: why the seat's results are unverified (None:
    verified), so the report marks every number of that arm as the run's summary does."""
    summary = safe_yaml.read_json(run_folder / "summary.json", "bench summary", SUMMARY_BYTES)
    figures = {
        suite: {
            "ms_per_step": (s.get("ms_per_step") or {}).get("median"),
            "tokens_per_step": (s.get("tokens_per_step") or {}).get("median"),
        }
        for suite, s in summary["suites"].items()
    }
    conditions = summary.get("conditions")
    return {"figures": figures, "unverified": what_runs.mark(conditions)}


def _skip(run: Run, i: int, problems: list[str], progress: Progress) -> None:
    arm = run.visits[i]
    progress(f"visit {i + 1} ({arm.name}): not in force: {'; '.join(problems)}; skipped")
    run.add({"type": "skipped", "visit": i, "arm": arm.name, "why": "not in force: " + "; ".join(problems)})


def varied(run: Run) -> set[str]:
    return {s for a in run.arms.values() for s in a.host or []}


def _same_driver(run: Run) -> str | None:
    """The running NVIDIA driver, refused when it is not the one the campaign started on: visits of
    two drivers would be pooled into one effect."""
    now, start = state.driver_version(run.system), run.records[0].get("driver")
    if now != start:
        raise SeatError(
            f"the NVIDIA driver changed during the campaign: {start or 'none'} at its start, "
            f"{now or 'none'} now; visits of two drivers measure two hosts",
            "the visits so far are reported; run the campaign again on one driver",
        )
    return now


def _set_live(run: Run, i: int, progress: Progress) -> bool:
    """Set the live arm's knobs, read back from the outside; whether they took (else skipped)."""
    arm, system = run.visits[i], run.system
    names = live.knobs(run.arms.values())
    if not run.of("live-start"):  # journaled before the first change: the end puts these back
        run.add({"type": "live-start", "values": live.read(system, names)})
    values = {**run.of("live-start")[0]["values"], **(arm.live or {})}
    progress(f"visit {i + 1} ({arm.name}): set {', '.join(f'{k}={v}' for k, v in sorted(values.items()))}")
    live.apply(system, values)
    found = live.read(system, names)  # read back from the outside: a clamped or locked board says yes
    wrong = [f"{k} is {found[k]}, not {v}" for k, v in sorted(values.items()) if found.get(k) != v]
    if wrong:
        _skip(run, i, wrong, progress)
    return not wrong


def measure(run: Run, i: int, driver: Driver, progress: Progress) -> None:
    """Visit i: its arm checked in force (skipped, and why, if not), then its seat benched. HMM is
    read after the bench where nvidia_uvm was not yet loaded: the seat's CUDA start loads it."""
    arm, system = run.visits[i], run.system
    late: set[str] = set()
    profile = campaign_plan.host_profile(run.campaign) if arm.kind == "host" else None
    if arm.kind == "host":
        assert profile is not None  # host arms need campaign.host (Campaign)
        names = varied(run)
        if state.live_hmm_disabled(system).value is None:
            late = names & {"hmm"}
        problems = in_force(arm, profile, run.vendor, system, names - late)
        if problems:
            _skip(run, i, problems, progress)
            return
    if arm.kind == "live" and not _set_live(run, i, progress):
        return
    nvidia = _same_driver(run)
    progress(f"visit {i + 1}/{len(run.visits)} ({arm.name}): start the seat and bench it")
    system.fault(f"campaign: before the bench of visit {i}")
    folder = driver.bench(run.campaign, arm, system.path(f"{run.folder}/runs"), progress)
    system.fault(f"campaign: after the bench of visit {i}")
    if late:  # read now that the seat has loaded nvidia_uvm
        assert profile is not None
        problems = in_force(arm, profile, run.vendor, system, late)
        if problems:
            _skip(run, i, [*problems, f"its bench {folder.name} is not counted"], progress)
            return
    run.add(
        {
            "type": "measured",
            "visit": i,
            "arm": arm.name,
            "boot_id": state.boot_id(system),
            "driver": nvidia,
            "iommu_units": system.entries("/sys/class/iommu"),  # the IOMMU it ran with; None: unreadable
            "run": str(folder.relative_to(system.path(run.folder))),
            **_measured(folder),
        }
    )
