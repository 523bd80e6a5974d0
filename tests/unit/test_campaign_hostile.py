"""seat campaign under a hostile reviewer: operators, odd hosts and bad data that broke it once."""

from __future__ import annotations

import json

import pytest
import yaml

from campaign_harness import CampaignHost, FastDriver, OracleDriver, drive
from seatkit.campaign import boot, plan as campaign_plan, runner, spec as specs
from seatkit.errors import SeatError
from seatkit.host import change as host_change


def write_campaign(tmp_path, **fields):
    data = {"description": "test", "seat": "cpu-smoke", "host": "paper", "suites": ["code"],
            "repeats": 1, "bench": {"warmups": 0, "repeats": 1}, **fields}
    path = tmp_path / "camp.yaml"
    path.write_text(yaml.safe_dump(data))
    return specs.load(str(path))


def start(host, campaign):
    plan = campaign_plan.build(campaign, host.system, acknowledge_iommu_off=True)
    return runner.start(plan, host.system, "/usr/local/bin/seat", str(host.root))


def test_an_update_grub_mid_campaign_is_not_undone_by_the_end(tmp_path):
    """A kernel upgrade (or an edit of /etc/default/grub) runs update-grub between two boots; the end
    must leave a grub.cfg made from today's configuration, not the stale bytes of the start."""
    host = CampaignHost(tmp_path / "root")
    start(host, write_campaign(tmp_path, arms=[{"name": "p2p", "host": ["p2p"]}]))
    driver = FastDriver(host)
    assert runner.step(host.system, driver) == "rebooting"
    host.boot()
    text = host.read("/etc/default/grub")
    host.write("/etc/default/grub", text + 'GRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT mitigations=off"\n')
    assert host.run(["update-grub"])[0] == 0  # the operator's (or apt's) own update-grub
    assert host.run_unit(driver) == "done"
    host.boot()
    cfg = host.read("/boot/grub/grub.cfg")
    assert "mitigations=off" in cfg and "seatkit" not in cfg
    log = next(host.root.glob("var/lib/seatkit/campaign/*/campaign.log")).read_text()
    assert "regenerated during the campaign" in log
