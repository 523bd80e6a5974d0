"""The campaign's seat: start the arm's profile with `seat up`'s launch, wait ready within the
profile's cold-start time, bench it into an ordinary run folder, stop it."""

from __future__ import annotations

from pathlib import Path

from seatkit.bench import run as bench_run
from seatkit.bench import workload
from seatkit.bench.target import Options
from seatkit.campaign.spec import Arm, Campaign
from seatkit.campaign.spec import all_arms as specs_of
from seatkit.doctor import targets
from seatkit.errors import SeatError
from seatkit.image import vouch
from seatkit.seat import profiles
from seatkit.serve import launch
from seatkit.serve import spec as specs

HEARTBEAT_S = 30


class SeatDriver:
    def bench(self, campaign: Campaign, arm: Arm, runs: Path, progress) -> Path:
        name = arm.profile or campaign.seat
        spec = specs.build(profiles.load(name))
        progress(f"{arm.name}: seat up {name}")
        said = set()

        def tick(stage: str, waited: float) -> None:  # a heartbeat in the log every 30 s, not a flood
            if (stage, int(waited // HEARTBEAT_S)) not in said:
                said.add((stage, int(waited // HEARTBEAT_S)))
                progress(f"{arm.name}: waiting for {stage} ({waited:.0f} s)")

        launch.up(spec, tick=tick, image_check=vouch.image_check)  # as `seat up` checks its image
        try:
            target = targets.of_profile(name)
            prompts = workload.suites(list(campaign.suites), campaign.bench.max_tokens)
            out = bench_run.RunDir(runs, arm.name)
            bench_run.bench(
                target,
                prompts,
                Options(campaign.bench.warmups, campaign.bench.repeats),
                out,
                progress=lambda line: progress(f"{arm.name}: {line}"),
            )
            return out.path
        finally:
            launch.down(name)

    def stop(self, campaign: Campaign) -> list[str]:
        stopped = []
        for name in sorted({a.profile or campaign.seat for a in specs_of(campaign)}):
            try:
                _, running = launch.down(name)
            except SeatError:  # not running: nothing `seat up` recorded for it
                continue
            if running:
                stopped.append(name)
        return stopped


class ConfinedDriver:
    """Under a throwaway root (`--root`): a seat would start or stop on this machine, so none does."""

    def bench(self, campaign: Campaign, arm: Arm, runs: Path, progress) -> Path:
        raise SeatError(
            f"{arm.name}: a seat would start on this machine, not under the throwaway root: not benched",
            "run the campaign on the host itself, without --root",
        )

    def stop(self, campaign: Campaign) -> list[str]:
        raise SeatError("a seat would be stopped on this machine, not under the throwaway root")
