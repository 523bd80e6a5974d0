"""The kill loop: a campaign killed at a seeded point anywhere (inside a host transaction, mid-bench,
between arms, just before or after a reboot), then resumed, rebooted or aborted; the host ends byte for
byte as it began, every time. FastDriver writes run folders at once: no timing is measured here."""

from __future__ import annotations

import random

import pytest
import yaml
from campaign_harness import CampaignHost, FastDriver, drive
from fake_host import Death

from seatkit.campaign import analysis, runner
from seatkit.campaign import plan as campaign_plan
from seatkit.campaign import spec as specs
from seatkit.campaign.folder import current
from seatkit.errors import SeatError
from seatkit.host.journal import Journal

KILLS = 100


class Killer:
    def __init__(self, at: int):
        self.at, self.seen, self.points = at, 0, []

    def __call__(self, point: str) -> None:
        self.seen += 1
        self.points.append(point)
        if self.seen == self.at:
            raise Death(point)


def campaign(tmp_path):
    path = tmp_path / "kills.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "description": "kills",
                "seat": "cpu-smoke",
                "host": "paper",
                "suites": ["code"],
                "repeats": 1,
                "design": "one-at-a-time",
                "settings": ["p2p"],
            }
        )
    )
    return specs.load(str(path))


def test_a_hundred_seeded_kills_leave_the_host_byte_identical(tmp_path, monkeypatch):
    # The plot is drawn in test_campaign.py; here it would cost a second per kill.
    monkeypatch.setattr(analysis, "plot", lambda *args: None)
    spec = campaign(tmp_path)
    template = CampaignHost(tmp_path / "count")
    counter = Killer(0)
    template.system.fault = counter
    plan = campaign_plan.build(spec, template.system)  # every fake host is alike: one plan serves all
    runner.start(plan, template.system, "/seat", str(template.root))
    drive(template, FastDriver(template))
    total = counter.seen  # the kill points one whole campaign passes
    assert total > 50
    where, actions = set(), {"resume": 0, "reboot": 0, "abort": 0}
    for seed in range(KILLS):
        rng = random.Random(seed)
        host = CampaignHost(tmp_path / f"k{seed}")
        pristine = host.files()
        killer = Killer(rng.randint(1, total))
        host.system.fault = killer
        try:
            runner.start(plan, host.system, "/seat", str(host.root))
            drive(host, FastDriver(host))
        except Death as death:
            where.add(str(death))
        else:
            pytest.fail(f"seed {seed}: no kill at point {killer.at}")
        host.system.fault = lambda point: None
        action = rng.choice(sorted(actions))
        actions[action] += 1
        if action == "reboot":  # the kill was a power cut: GRUB boots what it would
            host.boot()
        try:
            if action == "abort":
                runner.abort(host.system)
                if host.reboots_requested:
                    host.boot()
            else:
                drive(host, FastDriver(host))
        except SeatError as exc:  # killed after the end: nothing left to run
            assert "no campaign is running" in exc.message, (seed, exc.message)
        if current(host.system) is not None or host.unit_enabled():
            pytest.fail(f"seed {seed}: the campaign did not end (killed at {killer.points[-1]})")
        if "seatkit.arm=" in host.read("/proc/cmdline"):
            host.boot()  # the operator's reboot after an abort from an arm's boot
        assert host.files() == pristine, (seed, killer.points[-1], action)
        assert not Journal(host.system).open(), seed
    assert len(where) > 20 and all(actions.values())
    assert any("inside the bench" in w for w in where) and any("reboot" in w for w in where)
