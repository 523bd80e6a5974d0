"""seat campaign under a hostile reviewer: operators, odd hosts and bad data that broke it once."""

from __future__ import annotations

import json

import pytest
import yaml
from campaign_harness import CampaignHost, FastDriver, drive

from seatkit.campaign import boot, runner
from seatkit.campaign import plan as campaign_plan
from seatkit.campaign import spec as specs
from seatkit.campaign.folder import Run, current
from seatkit.errors import SeatError
from seatkit.host import change as host_change
from seatkit.host.journal import Journal


def write_campaign(tmp_path, **fields):
    data = {
        "description": "test",
        "seat": "cpu-smoke",
        "host": "paper",
        "suites": ["code"],
        "repeats": 1,
        "bench": {"warmups": 0, "repeats": 1},
        **fields,
    }
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
    host.write(
        "/etc/default/grub",
        text + 'GRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT mitigations=off"\n',
    )
    assert host.run(["update-grub"])[0] == 0  # the operator's (or apt's) own update-grub
    assert host.run_unit(driver) == "done"
    host.boot()
    cfg = host.read("/boot/grub/grub.cfg")
    assert "mitigations=off" in cfg and "seatkit" not in cfg
    log = next(host.root.glob("var/lib/seatkit/campaign/*/campaign.log")).read_text()
    assert "regenerated during the campaign" in log


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
    class Driver:
        def bench(self, campaign, arm, runs, progress):
            out = FastDriver(host).bench(campaign, arm, runs, progress)
            summary = json.loads((out / "summary.json").read_text())
            summary["suites"]["code"]["ms_per_step"] = figures.get(arm.name, {"median": 20.0})
            (out / "summary.json").write_text(json.dumps(summary))
            return out

    return Driver()


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
    assert p2p["visits"] == 0 and p2p["unusable"] == 2 and "no figure to use" in report["verdict"]


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


def test_abort_after_the_campaign_folder_was_deleted_still_restores_the_host(tmp_path):
    """An operator cleans /var/lib/seatkit/campaign/2026…: the entries and the unit are still
    installed, and the unit would fail at every boot. Abort must still take them out."""
    import shutil

    host = CampaignHost(tmp_path / "root")
    pristine = host.files()
    folder = start(host, write_campaign(tmp_path, arms=[{"name": "p2p", "host": ["p2p"]}]))
    assert runner.step(host.system, FastDriver(host)) == "rebooting"
    host.boot()
    shutil.rmtree(host.path(folder))
    with pytest.raises(SeatError) as caught:
        runner.step(host.system, FastDriver(host))
    assert "seat campaign abort" in (caught.value.hint or "")
    assert runner.abort(host.system) == "aborted"
    host.boot()
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


@pytest.mark.parametrize("live", [{"gpu_power_limit_w": True}, {"gpu_power_limit_w": 0}, {"cpu_boost": 7}])
def test_a_live_knob_of_the_wrong_kind_is_refused(tmp_path, live):
    with pytest.raises(SeatError, match="arms.0.live"):
        write_campaign(tmp_path, host=None, arms=[{"name": "x", "live": live}])


def _run_of(arms, visits, design=None):
    """A finished campaign's journal, as the analysis reads it."""
    from types import SimpleNamespace

    records = [
        {
            "type": "measured",
            "visit": i,
            "arm": name,
            "run": f"runs/{i}",
            "figures": {"code": {"ms_per_step": ms, "tokens_per_step": 3.0}},
        }
        for i, (name, ms) in enumerate(visits)
    ]
    return SimpleNamespace(
        arms={a.name: a for a in arms},
        id="x",
        campaign=SimpleNamespace(design=design, name="x"),
        of=lambda kind, visit=None: [r for r in records if r["type"] == kind],
    )


def test_an_effect_whose_reference_arm_was_skipped_is_confounded_not_a_number():
    """One-at-a-time with its reference arm skipped (not in force): the IOMMU and P2P arms alone
    cannot give either effect, and least squares' answer (+96 %, +211 %) must not be printed."""
    from seatkit.campaign import analysis
    from seatkit.campaign.spec import Arm

    arms = [Arm(name="none", host=[]), Arm(name="iommu", host=["iommu"]), Arm(name="p2p", host=["p2p"])]
    report = analysis.report(_run_of(arms, [("iommu", 12.0), ("p2p", 19.0)] * 3, "one-at-a-time"))
    assert [e["effect_pct"] for e in report["effects"]] == [None, None]
    assert "confounded" in report["verdict"] and "%" not in report["verdict"]
    # with the reference there, the same fit gives both effects
    full = analysis.report(
        _run_of(
            arms,
            [("none", 20.0), ("iommu", 12.0), ("p2p", 19.0), ("p2p", 19.2), ("iommu", 12.1), ("none", 20.1)],
            "one-at-a-time",
        )
    )
    assert round(full["effects"][0]["effect_pct"]) == -40 and full["effects"][0]["uncertainty_pct"]


def test_a_hostile_campaign_file_is_refused_fast(tmp_path):
    """A billion-laughs campaign hung `seat campaign plan` (the error message repr'd the expansion);
    a repeated key silently won; a FIFO would block the read forever."""
    import os
    import time

    lines = [
        "description: bomb",
        "seat: cpu-smoke",
        "arms: [{name: x, profile: cpu-smoke}]",
        'a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]',
    ]
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 9)]
    (tmp_path / "bomb.yaml").write_text("\n".join(lines + ["suites: *a8"]) + "\n")
    began = time.monotonic()
    with pytest.raises(SeatError, match="aliases"):
        specs.load(str(tmp_path / "bomb.yaml"))
    assert time.monotonic() - began < 5
    (tmp_path / "twice.yaml").write_text(
        "description: x\nseat: cpu-smoke\nsuites: [code]\n"
        "arms: [{name: a, profile: cpu-smoke}]\nrepeats: 1\nrepeats: 20\n"
    )
    with pytest.raises(SeatError, match="duplicate key"):
        specs.load(str(tmp_path / "twice.yaml"))
    os.mkfifo(tmp_path / "pipe.yaml")
    with pytest.raises(SeatError, match="not a regular file"):
        specs.load(str(tmp_path / "pipe.yaml"))


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
            runner.abort(other)

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


GRUB_CFG = """if [ "${next_entry}" ] ; then
   set default="${next_entry}"
   set next_entry=
   save_env next_entry
else
   set default="%s"
fi
menuentry 'Debian GNU/Linux' --class debian $menuentry_id_option 'gnulinux-simple-abc' {
\tlinux\t/boot/vmlinuz-6.12.9-amd64 root=UUID=abc ro quiet
}
submenu 'Advanced options for Debian GNU/Linux' $menuentry_id_option 'gnulinux-advanced-abc' {
\tmenuentry 'Debian GNU/Linux, with Linux 6.1.0-30-amd64' $menuentry_id_option 'gnulinux-6.1.0-30-amd64-advanced-abc' {
\t\tlinux\t/boot/vmlinuz-6.1.0-30-amd64 root=UUID=abc ro quiet
\t}
}
"""


@pytest.mark.parametrize(
    "default, saved, kernel",
    [
        ("0", None, "6.12.9"),
        ("${saved_entry}", None, "6.12.9"),
        ("${saved_entry}", "gnulinux-advanced-abc>gnulinux-6.1.0-30-amd64-advanced-abc", "6.1.0-30"),
        ("gnulinux-advanced-abc>gnulinux-6.1.0-30-amd64-advanced-abc", None, "6.1.0-30"),
        (
            "Advanced options for Debian GNU/Linux>Debian GNU/Linux, with Linux 6.1.0-30-amd64",
            None,
            "6.1.0-30",
        ),
    ],
)
def test_the_arms_copy_the_entry_the_normal_boot_boots_not_the_first(tmp_path, default, saved, kernel):
    """An operator who pinned an older kernel (GRUB_DEFAULT=saved, or a submenu path) would have had
    every arm boot the newest one: another kernel, maybe without the NVIDIA module."""
    from campaign_harness import grubenv

    host = CampaignHost(tmp_path / "root")
    host.write("/boot/grub/grub.cfg", GRUB_CFG % default)
    host.path("/boot/grub/grubenv").write_bytes(grubenv({"saved_entry": saved} if saved else {}))
    body = boot.default_entry(host.system)
    assert body[0].startswith("menuentry ") and body[-1] == "}"
    assert f"vmlinuz-{kernel}" in body[1]


def test_a_default_that_names_no_entry_is_refused(tmp_path):
    host = CampaignHost(tmp_path / "root")
    host.write("/boot/grub/grub.cfg", GRUB_CFG % "gnulinux-gone")
    with pytest.raises(SeatError, match="another kernel than the normal one"):
        boot.default_entry(host.system)


def test_a_saved_entry_set_before_is_kept_and_one_set_between_boots_is_not_undone(tmp_path):
    from campaign_harness import grubenv, read_env

    host = CampaignHost(tmp_path / "root")
    host.path("/boot/grub/grubenv").write_bytes(grubenv({"saved_entry": "Ubuntu"}))  # the operator's, before
    pristine = host.files()
    start(host, write_campaign(tmp_path, arms=[{"name": "p2p", "host": ["p2p"]}]))
    assert drive(host, FastDriver(host))[-1] == "done"
    assert host.files() == pristine  # grub-reboot's next_entry gone, saved_entry as it was
    start(host, write_campaign(tmp_path, arms=[{"name": "hmm", "host": ["hmm"]}]))
    assert runner.step(host.system, FastDriver(host)) == "rebooting"
    host.boot()
    env = read_env(host.path("/boot/grub/grubenv").read_bytes())  # grub-set-default between boots
    host.path("/boot/grub/grubenv").write_bytes(grubenv({**env, "saved_entry": "Ubuntu (recovery mode)"}))
    assert host.run_unit(FastDriver(host)) == "done"
    assert read_env(host.path("/boot/grub/grubenv").read_bytes())["saved_entry"] == "Ubuntu (recovery mode)"


def test_a_campaign_started_in_the_same_second_as_the_last_one_gets_its_own_folder(tmp_path, monkeypatch):
    """The folder was named by the second alone: a rerun in the second the last one ended (a script,
    a profile-arm campaign that ends at once) died on FileExistsError with a traceback."""
    monkeypatch.setattr(runner.time, "strftime", lambda fmt, t=None: "20261202T150000Z")
    host = CampaignHost(tmp_path / "root")
    campaign = write_campaign(tmp_path, host=None, arms=[{"name": "k3", "profile": "cpu-smoke"}])
    first = start(host, campaign)
    assert runner.step(host.system, FastDriver(host)) == "done"
    second = start(host, campaign)
    assert second != first and runner.step(host.system, FastDriver(host)) == "done"
    assert host.path(f"{first}/report.json").exists() and host.path(f"{second}/report.json").exists()
