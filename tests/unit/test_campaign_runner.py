"""seatkit/campaign/runner.py: a campaign run against hostile operators, odd hosts, bad data and kills at
seeded points."""

from __future__ import annotations

import json
import random

import pytest
from campaign_harness import (
    RECOVERIES,
    CampaignHost,
    FastDriver,
    drive,
    kill_plan,
    killed_and_recovered,
    start,
    write_campaign,
)

from seatkit.campaign import boot, runner
from seatkit.campaign.folder import Run, current
from seatkit.errors import SeatError
from seatkit.host import change as host_change
from seatkit.host.journal import Journal


@pytest.mark.parametrize("recovery", RECOVERIES)
def test_a_kill_at_a_seeded_point_then_each_recovery_leaves_the_host_byte_identical(
    tmp_path, monkeypatch, recovery
):
    """One seed here; the hundred seeds, spread over the kill points and the recoveries, run in
    tests/benchmarks/campaign_kills.py."""
    monkeypatch.setattr("seatkit.campaign.picture.draw", lambda *args: None)  # drawn in test_campaign.py
    plan, total = kill_plan(tmp_path)
    assert total > 50  # the points a whole campaign passes
    at = random.Random(0).randint(1, total)
    assert killed_and_recovered(plan, tmp_path / "killed", at, recovery)


def in_an_arm_with_grub_edited(tmp_path, token: str):
    """A campaign in its arm's boot, after which the operator (or apt) adds token to the command
    line in /etc/default/grub and runs update-grub; the host and the driver."""
    host = CampaignHost(tmp_path / "root")
    start(host, write_campaign(tmp_path, arms=[{"name": "p2p", "host": ["p2p"]}]))
    driver = FastDriver(host)
    assert runner.step(host.system, driver) == "rebooting"
    host.boot()
    grub = host.read("/etc/default/grub")
    line = f'GRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT {token}"\n'
    host.write("/etc/default/grub", grub + line)
    assert host.run(["update-grub"])[0] == 0  # the operator's (or apt's) own update-grub
    return host, driver


def test_an_update_grub_mid_campaign_is_not_undone_by_the_end(tmp_path):
    """A kernel upgrade (or an edit of /etc/default/grub) runs update-grub between two boots; the end
    must leave a grub.cfg made from today's configuration, not the stale bytes of the start."""
    host, driver = in_an_arm_with_grub_edited(tmp_path, "mitigations=off")
    assert host.run_unit(driver) == "rebooting"  # the end runs in the normal boot
    host.boot()
    assert host.run_unit(driver) == "done"
    cfg = host.read("/boot/grub/grub.cfg")
    assert "mitigations=off" in cfg and "seatkit" not in cfg
    log = next(host.root.glob("var/lib/seatkit/campaign/*/campaign.log")).read_text()
    assert "regenerated during the campaign" in log


def test_a_power_cut_right_after_the_end_keeps_the_grub_cfg_its_update_grub_made(tmp_path):
    """The end puts the start's grub.cfg back, then update-grub rewrites it from today's
    configuration. A power cut just after the campaign journals its end must not boot the start's
    bytes (yesterday's kernels and command line) while the journal says the campaign is over."""
    host, driver = in_an_arm_with_grub_edited(tmp_path, "quiet2")
    assert host.run_unit(driver) == "rebooting"
    host.boot()
    with host.write_loss() as disk:
        assert host.run_unit(driver) == "done"
        disk.power_cut()
    host.boot()
    assert "quiet2" in host.read("/proc/cmdline")
    assert "seatkit" not in host.read("/boot/grub/grub.cfg")


def test_seat_host_rollback_is_refused_while_a_campaign_runs(tmp_path):
    """`seat host rollback` with no id rolls back the newest transaction: the campaign's own entries
    and unit, mid-campaign. It must be refused, as apply is."""
    host = CampaignHost(tmp_path / "root")
    start(host, write_campaign(tmp_path, arms=[{"name": "p2p", "host": ["p2p"]}]))
    assert runner.step(host.system, FastDriver(host)) == "rebooting"
    host.boot()
    with pytest.raises(SeatError, match="a campaign is running"):
        host_change.rollback(host.system)
    campaign_tx = boot.installed(host.system, Run(host.system, current(host.system)).id)
    with pytest.raises(SeatError, match="a campaign is running"):  # forgotten, its entries would stay
        host_change.forget(host.system, campaign_tx.txid)
    assert host.unit_enabled()


def _bench_writing(host, figures):
    class Driver(FastDriver):
        def bench(self, campaign, arm, runs, progress):
            out = FastDriver(host).bench(campaign, arm, runs, progress)
            summary = json.loads((out / "summary.json").read_text())
            summary["suites"]["code"]["ms_per_step"] = figures.get(arm.name, {"median": 20.0})
            (out / "summary.json").write_text(json.dumps(summary))
            return out

    return Driver(host)


@pytest.mark.parametrize("bad", [{"median": float("nan")}, {"median": -3.0}, None])
def test_a_bad_figure_in_a_summary_does_not_block_the_restore_or_reach_the_verdict(tmp_path, bad):
    host = CampaignHost(tmp_path / "root")
    pristine = host.files()
    start(
        host,
        write_campaign(
            tmp_path, repeats=2, arms=[{"name": "none", "host": []}, {"name": "p2p", "host": ["p2p"]}]
        ),
    )
    outcomes = drive(host, _bench_writing(host, {"p2p": bad}))
    assert outcomes[-1] == "done"
    assert host.files() == pristine
    folder = next(host.root.glob("var/lib/seatkit/campaign/*T*Z-camp"))
    report = json.loads((folder / "report.json").read_text())
    assert "nan" not in report["verdict"].lower()
    p2p = next(a for a in report["arms"] if a["arm"] == "p2p")
    assert p2p["visits"] == 0 and p2p["left_out"] == 2
    assert "Left out of the estimate" in report["verdict"] and "no usable ms/step" in report["verdict"]


def _live_host(tmp_path, pl_fails):
    host = CampaignHost(tmp_path / "root")
    host.write("/sys/devices/system/cpu/cpufreq/boost", "1\n")
    limits = ["600"]
    real_run = host.run

    def run(argv):  # a fake nvidia-smi whose power-limit write fails when told to
        if argv[0] == "nvidia-smi":
            if argv[1] == "-pl":
                if pl_fails(argv[2]):
                    return 6, "Changing power management limit is not supported\n"
                limits[0] = argv[2]
            return 0, f"{limits[0]}.00\n{limits[0]}.00\n"
        return real_run(argv)

    host.system.runner = run
    return host, limits


def test_a_power_limit_that_fails_half_way_and_will_not_go_back_still_ends_the_campaign(tmp_path):
    host, limits = _live_host(tmp_path, lambda w: True)
    campaign = write_campaign(
        tmp_path,
        host=None,
        arms=[
            {"name": "start", "live": {}},
            {"name": "low", "live": {"cpu_boost": False, "gpu_power_limit_w": 450}},
        ],
    )
    start(host, campaign)
    outcome = runner.step(host.system, FastDriver(host))
    assert outcome == "failed"
    assert runner.status(host.system) == {"running": False}  # ended: abort and resume are not stuck
    assert host.read("/sys/devices/system/cpu/cpufreq/boost") == "1\n"  # the half that took is back
    log = next(host.root.glob("var/lib/seatkit/campaign/*/campaign.log")).read_text()
    assert "NOT PUT BACK: gpu_power_limit_w=600" in log and "nvidia-smi -pl 600" in log


def test_a_report_that_fails_does_not_keep_the_host_from_its_start_state(tmp_path, monkeypatch):
    from seatkit.campaign import analysis

    host = CampaignHost(tmp_path / "root")
    pristine = host.files()

    def broken(run, folder):
        raise RuntimeError("matplotlib: no font cache")

    monkeypatch.setattr(analysis, "write", broken)
    start(host, write_campaign(tmp_path, arms=[{"name": "p2p", "host": ["p2p"]}]))
    assert drive(host, FastDriver(host))[-1] == "done"
    assert host.files() == pristine
    assert runner.status(host.system) == {"running": False}


def test_a_campaign_whose_folder_was_deleted_is_ended_by_the_next_step(tmp_path):
    """An operator cleans /var/lib/seatkit/campaign/2026… while an arm runs: the entries and the
    unit are still installed. The unit's step takes them out and reboots into the normal entry."""
    import shutil

    host = CampaignHost(tmp_path / "root")
    pristine = host.files()
    folder = start(host, write_campaign(tmp_path, arms=[{"name": "p2p", "host": ["p2p"]}]))
    assert runner.step(host.system, FastDriver(host)) == "rebooting"
    assert host.boot() == "seatkit-campaign-p2p"
    shutil.rmtree(host.path(folder))
    before = host.reboots_requested
    assert host.run_unit(FastDriver(host)) == "aborted"
    assert host.reboots_requested == before + 1
    assert host.boot() is None  # the normal entry
    assert runner.status(host.system) == {"running": False}
    assert host.files() == pristine
    assert not host.unit_enabled() and "seatkit" not in host.read("/boot/grub/grub.cfg")


def test_a_live_arm_whose_knob_did_not_take_is_not_measured(tmp_path):
    """nvidia-smi -pl says yes but the limit stays (a clamped or locked board): nothing is measured
    on an arm whose settings did not take."""
    host = CampaignHost(tmp_path / "root")
    host.write("/sys/devices/system/cpu/cpufreq/boost", "1\n")
    real_run = host.run

    def run(argv):  # the write "succeeds", the read-back still shows the old limit
        if argv[0] == "nvidia-smi":
            return 0, "" if argv[1] == "-pl" else "600.00\n600.00\n"
        return real_run(argv)

    host.system.runner = run
    start(
        host,
        write_campaign(
            tmp_path,
            host=None,
            arms=[{"name": "start", "live": {}}, {"name": "pl450", "live": {"gpu_power_limit_w": 450}}],
        ),
    )
    assert runner.step(host.system, FastDriver(host)) == "done"
    folder = next(host.root.glob("var/lib/seatkit/campaign/*T*Z-camp"))
    records = [json.loads(line) for line in (folder / "journal.jsonl").read_text().splitlines()]
    assert [r["arm"] for r in records if r["type"] == "measured"] == ["start"]
    skipped = [r for r in records if r["type"] == "skipped"]
    assert skipped and skipped[0]["arm"] == "pl450" and "gpu_power_limit_w" in skipped[0]["why"]


def test_an_abort_while_the_step_writes_its_journal_does_not_tear_it(tmp_path):
    """`seat campaign abort` appends its record without the step's lock (the step holds it for hours).
    Landing between the two halves of the step's record, it cut that record off as a torn tail and
    the step's second half made a damaged line mid-journal: every later step, status and abort refused."""
    import dataclasses
    import threading

    host = CampaignHost(tmp_path / "root")
    pristine = host.files()
    start(host, write_campaign(tmp_path, host=None, arms=[{"name": "k3", "profile": "cpu-smoke"}]))
    other = dataclasses.replace(host.system, fault=lambda point: None)  # the operator's shell
    threads = []

    def abort_now():  # "recorded, a step is running", or "no campaign" if the step ended first
        with pytest.raises(SeatError):
            runner.abort(other, FastDriver(host))

    def fault(point):
        if point == "inside the journal record measured" and not threads:
            threads.append(threading.Thread(target=abort_now))
            threads[0].start()
            threads[0].join(1.0)  # the abort gets its chance in the middle of the record

    host.system.fault = fault
    assert runner.step(host.system, FastDriver(host)) in ("aborted", "done")
    threads[0].join(10)
    folder = next(host.root.glob("var/lib/seatkit/campaign/*T*Z-camp"))
    records = Journal(host.system, "/" + str((folder / "journal.jsonl").relative_to(host.root))).records()
    assert [r["type"] for r in records].count("measured") == 1 and records[-1]["type"] in ("end", "aborted")
    assert runner.status(host.system) == {"running": False}
    assert host.files() == pristine
