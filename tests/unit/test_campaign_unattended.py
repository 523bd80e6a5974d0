"""An unattended campaign never strands the host in an arm: any failure in an arm's boot, a kill or
not, expected or not, ends in the normal entry with the campaign ended and its report written."""

from __future__ import annotations

import random

import pytest
from campaign_harness import (
    FAULTS,
    CampaignHost,
    FastDriver,
    GpuIsLost,
    drive,
    fault_points,
    faulted,
    left_in_an_arm,
    read_only_var,
    start,
    write_campaign,
)

from seatkit.campaign import boot, runner
from seatkit.campaign import plan as campaign_plan
from seatkit.campaign.folder import current
from seatkit.host.journal import Journal

SLICE = 15  # the unit tier's share; tests/benchmarks/campaign_faults.py runs every fault


def two_arms(tmp_path, repeats=1):
    return write_campaign(
        tmp_path, repeats=repeats, arms=[{"name": "none", "host": []}, {"name": "p2p", "host": ["p2p"]}]
    )


def in_the_last_arm(host, tmp_path):
    """A campaign started and driven until its last visit's boot (the arm's kernel is running)."""
    folder = start(host, two_arms(tmp_path))
    driver = FastDriver(host)
    assert runner.step(host.system, driver) == "rebooting"
    host.boot()
    assert host.run_unit(driver) == "rebooting"  # visit 1 measured, visit 2 armed
    assert host.boot() == "seatkit-campaign-p2p"
    return folder


def test_the_end_runs_in_the_normal_boot_and_a_failed_one_still_ends(tmp_path):
    """The operator left a syntax error in /etc/default/grub: update-grub fails in the end's
    restore. The last arm's boot only reboots into the normal entry; the end runs there, says
    what to do, and ends."""
    host = CampaignHost(tmp_path / "root")
    folder = in_the_last_arm(host, tmp_path)
    host.write("/etc/default/grub", host.read("/etc/default/grub") + "if [ then\n")
    assert host.run_unit(FastDriver(host)) == "rebooting"
    assert host.boot() is None and host.path(boot.UNIT).exists()  # the normal entry, the unit still there
    assert host.run_unit(FastDriver(host)) == "done"
    assert current(host.system) is None and not Journal(host.system).open()
    assert "then run: update-grub" in host.read(f"{folder}/campaign.log")  # what to do is said
    assert host.path(f"{folder}/report.json").is_file()


def test_an_abort_in_an_arm_reboots_into_the_normal_entry_though_its_restore_fails(tmp_path, monkeypatch):
    host = CampaignHost(tmp_path / "root")
    in_the_last_arm(host, tmp_path)

    def broken(*args):
        raise RuntimeError("update-grub: /etc/default/grub: line 4: syntax error")

    monkeypatch.setattr(boot, "uninstall", broken)
    before = host.reboots_requested
    with pytest.raises(RuntimeError):
        runner.abort(host.system, FastDriver(host))
    assert host.reboots_requested == before + 1 and host.boot() is None


def test_an_edited_unit_does_not_hold_the_host_in_the_campaign(tmp_path):
    host = CampaignHost(tmp_path / "root")
    in_the_last_arm(host, tmp_path)
    host.write(boot.UNIT, host.read(boot.UNIT) + "Environment=DEBUG=1\n")
    assert host.run_unit(FastDriver(host)) == "rebooting"
    host.boot()
    assert host.run_unit(FastDriver(host)) == "done"
    assert not host.unit_enabled() and not host.path(boot.UNIT).exists()
    kept = list(host.path(boot.EDITED).rglob("*.service"))
    assert kept and "DEBUG=1" in kept[0].read_text()  # the operator's edit, kept aside


@pytest.mark.parametrize(
    "error", [GpuIsLost("GPU is lost"), RuntimeError("a bug"), OSError(30, "Read-only file system")]
)
def test_a_step_that_dies_in_an_arm_ends_the_campaign_in_the_normal_entry(tmp_path, error):
    host = CampaignHost(tmp_path / "root")
    folder = start(host, two_arms(tmp_path))
    driver = FastDriver(host)
    runner.step(host.system, driver)
    host.boot()

    class Lost(FastDriver):
        def bench(self, *args):
            raise error

    assert host.run_unit(Lost(host)) in ("failed", "rebooting")  # rebooting: an OSError is journaled
    assert host.boot() is None  # the normal entry, where the campaign ends
    assert host.run_unit(driver) == "failed"
    assert current(host.system) is None and not host.unit_enabled()
    assert "incomplete" in host.read(f"{folder}/campaign.log")
    assert host.path(f"{folder}/report.json").is_file()  # what was measured, reported


def test_a_step_that_cannot_journal_in_an_arm_still_reboots_and_the_next_boot_ends_it(tmp_path, monkeypatch):
    read_only_var(monkeypatch.setattr)
    host = CampaignHost(tmp_path / "root")
    folder = in_the_last_arm(host, tmp_path)
    host.system.read_only = True  # /var remounted read-only in the arm's boot

    class Lost(FastDriver):
        def bench(self, *args):
            raise GpuIsLost("GPU is lost")

    assert host.run_unit(Lost(host)) == "failed"
    assert host.boot() is None  # the normal entry
    host.system.read_only = False  # the next boot mounts it again: the arm is tried once more
    assert drive(host, FastDriver(host))[-1] == "done"
    assert left_in_an_arm(host, folder) == []


def test_the_fallback_unit_returns_only_from_an_arms_boot(tmp_path):
    host = CampaignHost(tmp_path / "root")
    start(host, two_arms(tmp_path))
    runner.step(host.system, FastDriver(host))
    assert host.on_failure_units()
    before = host.reboots_requested
    host.on_failure()  # the normal boot: nothing to return from
    assert host.reboots_requested == before
    host.boot()
    host.on_failure()
    assert host.reboots_requested == before + 1
    assert host.boot() is None  # its next_entry cleared first: the normal entry, not an arm


def test_faults_of_every_kind_in_an_arms_boot_end_in_the_normal_entry(tmp_path, monkeypatch):
    monkeypatch.setattr("seatkit.campaign.picture.draw", lambda *args: None)  # a second per fault otherwise
    read_only_var(monkeypatch.setattr)
    plan = campaign_plan.build(two_arms(tmp_path, repeats=2), CampaignHost(tmp_path / "p").system)
    total = fault_points(plan, tmp_path / "count")
    assert total > 20
    rng = random.Random(36)
    for n in range(SLICE):
        kind, at = FAULTS[n % len(FAULTS)], rng.randint(1, total)
        host, point, folder = faulted(plan, tmp_path / f"f{n}", kind, at)
        assert point is not None, (kind, at)
        assert left_in_an_arm(host, folder) == [], (kind, point)


def test_a_killed_steps_seat_is_stopped_by_abort(tmp_path):
    host = CampaignHost(tmp_path / "root")
    start(host, two_arms(tmp_path))
    runner.step(host.system, FastDriver(host))
    stopped = []

    class Serving(FastDriver):
        def stop(self, campaign):
            stopped.append(campaign.seat)
            return [campaign.seat]

    lines = []
    assert runner.abort(host.system, Serving(host), lines.append) == "aborted"
    assert stopped == ["cpu-smoke"]
    said = "\n".join(lines)
    assert said.index("stopped the seat cpu-smoke") < said.index("the host's files are as they were")


@pytest.mark.parametrize(
    "mounts",
    [
        "/dev/nvme0n1p2 / btrfs rw 0 0\n",
        "/dev/mapper/vg-root / ext4 rw 0 0\n",
        "/dev/sda2 / ext4 rw 0 0\n/dev/md0 /boot ext4 rw 0 0\n",
        "rpool/ROOT / zfs rw 0 0\n",
    ],
)
def test_a_boot_where_grub_cannot_clear_its_one_shot_is_refused(tmp_path, mounts):
    host = CampaignHost(tmp_path / "root")
    host.write("/proc/self/mounts", mounts)
    plan = campaign_plan.build(two_arms(tmp_path), host.system)
    assert any("hung arm would boot again at every power cycle" in r for r in plan.refusals), plan.refusals
    host.write("/proc/self/mounts", "/dev/sda2 / btrfs rw 0 0\n/dev/sda1 /boot ext4 rw 0 0\n")
    assert campaign_plan.build(two_arms(tmp_path), host.system).refusals == []  # a plain /boot: accepted
