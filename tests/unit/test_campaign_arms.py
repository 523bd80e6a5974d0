"""An arm is a host plan, and a visit measures what it says: `seat host plan`'s rules at `campaign
plan` time, HMM read once the seat has loaded nvidia_uvm, the operator's launch knobs in every
visit, a driver change named, the live IOMMU in each visit's record."""

from __future__ import annotations

import json

import pytest
from campaign_harness import CampaignHost, FastDriver, drive, start, write_campaign

from seatkit.campaign import boot, runner
from seatkit.campaign import plan as campaign_plan
from seatkit.campaign.folder import Run
from seatkit.errors import SeatError


def plan_for(host, tmp_path, settings, ack=True):
    campaign = write_campaign(tmp_path, design="one-at-a-time", settings=settings)
    return campaign_plan.build(campaign, host.system, acknowledge_iommu_off=ack)


@pytest.mark.parametrize("driver", ["570.133.20", "580.167.08"])
def test_p2p_arms_on_a_driver_the_five_key_form_does_not_suit_are_refused(tmp_path, driver):
    host = CampaignHost(tmp_path / "root", driver=driver)
    plan = plan_for(host, tmp_path, ["p2p"])
    assert any("five-key registry form is wrong on driver " + driver in r for r in plan.refusals)
    assert plan_for(host, tmp_path, ["hmm"]).refusals == []  # no P2P arm: no driver rule


def test_iommu_off_arms_in_a_vm_are_refused_and_many_cpus_are_warned(tmp_path):
    vm = CampaignHost(tmp_path / "vm", virt="kvm")
    assert any("virtual machine" in r and "IOMMU" in r for r in plan_for(vm, tmp_path, ["iommu"]).refusals)
    big = CampaignHost(tmp_path / "big", cpus=256)
    plan = plan_for(big, tmp_path, ["iommu"])
    assert plan.refusals == [] and any("x2APIC" in n for n in plan.notes)
    assert not plan_for(big, tmp_path, ["iommu"], ack=False).refusals == []


def test_a_campaign_that_does_not_vary_hmm_does_not_need_it_readable(tmp_path):
    """nvidia_uvm loads on demand: before the seat starts, HMM is unreadable."""
    host = CampaignHost(tmp_path / "root")
    folder = start(
        host, write_campaign(tmp_path, arms=[{"name": "none", "host": []}, {"name": "p2p", "host": ["p2p"]}])
    )
    real_boot = host.boot

    def boot_without_uvm():
        ident = real_boot()
        host.path("/sys/module/nvidia_uvm/parameters/uvm_disable_hmm").unlink()
        return ident

    host.boot = boot_without_uvm
    assert drive(host, FastDriver(host))[-1] == "done"
    run = Run(host.system, folder)
    assert len(run.of("measured")) == 2 and not run.of("skipped")


def test_hmm_is_read_after_the_seat_has_loaded_nvidia_uvm(tmp_path):
    host = CampaignHost(tmp_path / "root")
    folder = start(
        host, write_campaign(tmp_path, arms=[{"name": "none", "host": []}, {"name": "hmm", "host": ["hmm"]}])
    )
    real_boot, loaded = host.boot, {}

    def boot_without_uvm():
        ident = real_boot()
        path = host.path("/sys/module/nvidia_uvm/parameters/uvm_disable_hmm")
        loaded["value"] = path.read_text()
        path.unlink()
        return ident

    class LoadsUvm(FastDriver):  # CUDA's start loads nvidia_uvm, with the boot's options
        def bench(self, campaign, arm, runs, progress):
            host.write("/sys/module/nvidia_uvm/parameters/uvm_disable_hmm", loaded["value"])
            return super().bench(campaign, arm, runs, progress)

    host.boot = boot_without_uvm
    assert drive(host, LoadsUvm(host))[-1] == "done"
    run = Run(host.system, folder)
    assert [r["arm"] for r in run.of("measured")] == ["none", "hmm"] and not run.of("skipped")


def test_the_operators_launch_knobs_reach_every_visit_and_the_plan_says_which(tmp_path, monkeypatch):
    monkeypatch.setenv("SEAT_PORT", "18123")
    host = CampaignHost(tmp_path / "root")
    campaign = write_campaign(tmp_path, arms=[{"name": "p2p", "host": ["p2p"]}])
    plan = campaign_plan.build(campaign, host.system, acknowledge_iommu_off=True)
    assert any("SEAT_PORT=18123" in n for n in plan.notes)
    runner.start(plan, host.system, "/usr/local/bin/seat", str(host.root))
    seen = []

    class Sees(FastDriver):
        def bench(self, campaign, arm, runs, progress):
            seen.append(__import__("os").environ.get("SEAT_PORT"))
            return super().bench(campaign, arm, runs, progress)

    assert runner.step(host.system, Sees(host)) == "rebooting"
    monkeypatch.delenv("SEAT_PORT")  # the unit starts with systemd's environment, not the operator's
    host.boot()
    host.run_unit(Sees(host))
    assert seen == ["18123"]


def _first_of_two_visits_measured(tmp_path):
    """A campaign of one arm visited twice, run up to its first visit measured (on 595.58.03)."""
    host = CampaignHost(tmp_path / "root")
    folder = start(host, write_campaign(tmp_path, repeats=2, arms=[{"name": "none", "host": []}]))
    driver = FastDriver(host)
    runner.step(host.system, driver)
    host.boot()
    assert host.run_unit(driver) == "rebooting"
    return host, folder, driver


def test_a_driver_change_between_visits_is_named_and_not_pooled(tmp_path):
    host, folder, driver = _first_of_two_visits_measured(tmp_path)
    host.write(
        "/proc/driver/nvidia/version",
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  600.10.01  Release Build\n",
    )
    host.boot()
    drive(host, driver)
    run = Run(host.system, folder)
    assert len(run.of("measured")) == 1 and run.of("measured")[0]["driver"] == "595.58.03"
    assert "595.58.03 at its start, 600.10.01 now" in run.stopping["why"]
    assert json.loads(host.read(f"{folder}/report.json"))["visits"]  # what was measured, reported


def test_each_visit_records_the_live_iommu(tmp_path):
    host = CampaignHost(tmp_path / "root")
    folder = start(
        host,
        write_campaign(tmp_path, arms=[{"name": "none", "host": []}, {"name": "iommu", "host": ["iommu"]}]),
    )
    assert drive(host, FastDriver(host))[-1] == "done"
    units = {r["arm"]: r.get("iommu_units") for r in Run(host.system, folder).of("measured")}
    assert units == {"none": ["ivhd0"], "iommu": []}


def test_an_abort_writes_the_report_of_what_was_measured_and_a_command_renders_it_again(tmp_path):
    from click.testing import CliRunner

    from seatkit.cli.app import seat

    host, folder, driver = _first_of_two_visits_measured(tmp_path)
    assert runner.abort(host.system, driver) == "aborted"
    report = json.loads(host.read(f"{folder}/report.json"))
    assert [v["arm"] for v in report["visits"]] == ["none"]
    host.path(f"{folder}/report.json").unlink()
    shown = CliRunner().invoke(seat, ["campaign", "report", folder, "--root", str(host.root)])
    assert shown.exit_code == 0, shown.output
    assert "1 of 2 visits measured INCOMPLETE" in shown.output and "aborted" in shown.output
    assert host.path(f"{folder}/report.json").is_file()


def _damage_a_journal_line(host, folder) -> int:
    """Garbles the first line that is neither a begin nor a measured record; its index."""
    journal = host.path(f"{folder}/journal.jsonl")
    lines = journal.read_text().splitlines(keepends=True)
    damaged = next(i for i, line in enumerate(lines) if json.loads(line)["type"] not in ("begin", "measured"))
    lines[damaged] = "{garbage\n"
    journal.write_text("".join(lines))
    return damaged


def test_an_abort_whose_journal_has_a_damaged_line_reports_what_the_other_lines_record(tmp_path):
    from click.testing import CliRunner

    from seatkit.cli.app import seat

    host, folder, driver = _first_of_two_visits_measured(tmp_path)
    damaged = _damage_a_journal_line(host, folder)
    try:
        said = runner.abort(host.system, driver)
    except SeatError as exc:  # the kit before: "line N is damaged", and nothing else
        said = exc.message
    assert host.path(f"{folder}/report.json").is_file(), said
    report = json.loads(host.read(f"{folder}/report.json"))
    assert [v["arm"] for v in report["visits"]] == ["none"]
    assert report["incomplete"] == f"1 of 2 visits; journal line {damaged + 1} unreadable, left out"
    shown = CliRunner().invoke(seat, ["campaign", "report", folder, "--root", str(host.root)])
    assert shown.exit_code == 0 and "INCOMPLETE" in shown.output, shown.output


def test_an_abort_whose_journal_is_damaged_leaves_the_arm_even_when_update_grub_fails(tmp_path):
    """In an arm's boot, with a journal line damaged and update-grub failing, the abort still asks
    for the reboot into the normal entry (the one-shot cleared first), then says what failed."""
    host, folder, driver = _first_of_two_visits_measured(tmp_path)
    _damage_a_journal_line(host, folder)
    host.write("/proc/cmdline", host.read("/proc/cmdline").strip() + f" {boot.MARKER}=none\n")
    host.failing.add("update-grub")
    host.calls.clear()
    with pytest.raises(SeatError):
        runner.abort(host.system, driver)
    asked = [c[:2] for c in host.calls if c[0] in ("grub-editenv", "systemctl")]
    assert ["systemctl", "reboot"] in asked, host.calls
    assert asked.index([c for c in asked if c[0] == "grub-editenv"][0]) < asked.index(["systemctl", "reboot"])
