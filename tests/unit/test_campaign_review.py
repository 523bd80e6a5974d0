"""Hostile review of the unattended campaign (issue 36): each test names what should hold."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from campaign_harness import SEAT, CampaignHost, FastDriver, drive, start, write_campaign
from click.testing import CliRunner

from seatkit.campaign import boot, runner, unit
from seatkit.campaign import plan as campaign_plan
from seatkit.campaign.folder import Run
from seatkit.cli.app import seat
from fake_host import KVER

USER = 1000
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="hands files to another uid (chown)")


def p2p_campaign(tmp_path, **kw):
    return write_campaign(tmp_path, arms=[{"name": "p2p", "host": ["p2p"]}], **kw)


def test_abort_with_a_throwaway_root_stops_no_seat_on_this_machine(tmp_path, monkeypatch):
    """`seat campaign abort --root THROWAWAY` must not act on this machine; its finish calls
    SeatDriver.stop -> launch.down (docker stop / kill of recorded seats) on the real host,
    before the confined runner has any say."""
    host = CampaignHost(tmp_path / "root")
    start(host, write_campaign(tmp_path, arms=[{"name": "none", "host": []}]))
    downed = []

    def down(name, *a, **k):
        downed.append(name)
        return None, True

    monkeypatch.setattr("seatkit.serve.launch.down", down)
    CliRunner().invoke(seat, ["campaign", "abort", "--root", str(host.root)])
    assert downed == [], f"launch.down ran on this machine for {downed}"


def test_a_campaign_in_a_container_is_refused_as_seat_host_plan_refuses_it(tmp_path):
    """`seat host plan` refuses any change in a container (the boot files are not the host's);
    campaign plan only notes it, and boots p2p/hmm arms there."""
    host = CampaignHost(tmp_path / "root", virt="docker")
    plan = campaign_plan.build(p2p_campaign(tmp_path), host.system, acknowledge_iommu_off=True)
    assert any("container" in r for r in plan.refusals), (plan.refusals, plan.notes)


def test_a_driver_installed_after_the_start_is_judged_before_an_arm_is_booted(tmp_path):
    """The plan judged 595.58.03; a driver upgrade (580.167.08 installed for the next boot) lands
    after `campaign run`. The kit still grub-reboots into the p2p arm, whose five-key string
    `seat host plan` refuses on 580.167.08 (peer copies break silently)."""
    host = CampaignHost(tmp_path / "root")
    start(host, p2p_campaign(tmp_path))
    host.installed[KVER] = "580.167.08"  # apt upgraded the driver; the next boot loads it
    drive(host, FastDriver(host))
    armed = [c for c in host.calls if c[:1] == ["grub-reboot"]]
    assert armed == [], f"booted an arm with the five-key form onto driver 580.167.08: {armed}"
