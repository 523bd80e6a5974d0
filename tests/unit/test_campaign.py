"""seat campaign: campaigns as data, the plan, and the simulated-reboot campaign against the oracle."""

from __future__ import annotations

import pytest
import yaml
from campaign_harness import EFFECTS, CampaignHost, FastDriver, OracleDriver, drive

from seatkit.campaign import boot, runner
from seatkit.campaign import plan as campaign_plan
from seatkit.campaign import spec as specs
from seatkit.campaign.folder import current
from seatkit.errors import SeatError
from seatkit.host import change as host_change
from seatkit.host import plan as host_plan
from seatkit.seat import host_profiles


def write_campaign(tmp_path, **fields):
    data = {
        "description": "test",
        "seat": "cpu-smoke",
        "host": "paper",
        "suites": ["code"],
        "repeats": 3,
        "bench": {"warmups": 0, "repeats": 3},
        **fields,
    }
    path = tmp_path / "camp.yaml"
    path.write_text(yaml.safe_dump(data))
    return specs.load(str(path))


# --- campaigns as data ---------------------------------------------------------------------------


def test_designs_generate_the_host_arms(tmp_path):
    def names(design):
        return [a.name for a in specs.designed(design, ["iommu", "p2p", "hmm"])]

    assert names("factorial") == [
        "none",
        "iommu",
        "p2p",
        "hmm",
        "iommu+p2p",
        "iommu+hmm",
        "p2p+hmm",
        "iommu+p2p+hmm",
    ]
    assert names("leave-one-out") == ["iommu+p2p+hmm", "p2p+hmm", "iommu+hmm", "iommu+p2p"]
    assert names("one-at-a-time") == ["none", "iommu", "p2p", "hmm"]


def test_the_papers_campaign_is_data():
    paper = specs.load("paper")
    assert paper.host == "paper" and paper.design == "factorial"
    assert len(specs.all_arms(paper)) == 8
    cpu = specs.load("cpu-ngram-k")
    assert [a.kind for a in specs.all_arms(cpu)] == ["profile", "profile"]


@pytest.mark.parametrize(
    "fields, words",
    [
        ({"design": "factorial"}, "needs the settings"),
        ({"arms": [{"name": "x", "host": ["iommu"], "profile": "cpu-smoke"}]}, "exactly one of"),
        ({"arms": [{"name": "x", "host": ["dma"]}]}, "arms.0.host.0"),
        (
            {"arms": [{"name": "a", "host": ["p2p"]}, {"name": "b", "profile": "cpu-smoke"}]},
            "campaigns of their own",
        ),
        ({"arms": [{"name": "a b", "host": []}]}, "arms.0.name"),
        ({"arms": []}, "no arms"),
    ],
)
def test_bad_campaigns_are_refused_with_the_field(tmp_path, fields, words):
    with pytest.raises(SeatError) as caught:
        write_campaign(tmp_path, **fields)
    assert words in caught.value.message


def test_the_plan_counts_reboots_and_refuses_without_the_iommu_acknowledgement(tmp_path):
    host = CampaignHost(tmp_path / "root")
    paper = specs.load("paper")
    refused = campaign_plan.build(paper, host.system)
    assert any("--acknowledge-iommu-off" in r for r in refused.refusals)
    plan = campaign_plan.build(paper, host.system, acknowledge_iommu_off=True)
    assert plan.refusals == []
    assert len(plan.visits) == 16 and plan.reboots == 17
    # ABBA: the second round is the first reversed
    assert [a.name for a in plan.visits[8:]] == [a.name for a in plan.visits[:8]][::-1]
    # 17 boots and 16 cold starts bounded at 40 min: the estimate names hours, not minutes
    assert plan.seconds > 17 * paper.boot_s and "h" in campaign_plan.duration(plan.seconds)
    with pytest.raises(SeatError):
        campaign_plan.require(refused)


def test_a_loader_without_one_shot_is_refused_and_says_why(tmp_path):
    from fake_host import FakeHost

    host = FakeHost(tmp_path / "root", "bls")
    plan = campaign_plan.build(specs.load("paper"), host.system, acknowledge_iommu_off=True)
    assert any("grub-reboot" in r and "changes the default boot" in r for r in plan.refusals)


# --- the one-shot entry --------------------------------------------------------------------------


def test_an_arms_entry_copies_the_default_and_carries_its_tokens(tmp_path):
    host = CampaignHost(tmp_path / "root", cmdline="quiet iommu=pt")
    arm = specs.Arm(name="p2p+hmm", host=["p2p", "hmm"])
    text = boot.entry(
        arm, boot.default_entry(host.system), boot.arm_tokens(arm, host_profiles.load("paper"), "amd"), "c"
    )
    linux = next(line for line in text.splitlines() if line.strip().startswith("linux"))
    assert "'nvidia.NVreg_RegistryDwords=ForceP2P=0x11;" in linux  # `;` quoted for GRUB's parser
    assert "nvidia_uvm.uvm_disable_hmm=1" in linux and "seatkit.arm=p2p+hmm" in linux
    assert "root=UUID=abc" in linux and "--id seatkit-campaign-p2p+hmm" in text


def test_an_arm_changes_only_its_named_settings(tmp_path):
    host = CampaignHost(tmp_path / "root", cmdline="quiet intel_iommu=on iommu=pt")
    host.write("/etc/modprobe.d/site.conf", 'options nvidia NVreg_RegistryDwords="PowerMizerEnable=0x1"\n')
    body, paper = boot.default_entry(host.system), host_profiles.load("paper")

    def linux(arm):
        tokens = boot.arm_tokens(arm, paper, "intel", boot.operator_keys(host.system, body))
        text = boot.entry(arm, body, tokens, "c")
        return next(line for line in text.splitlines() if line.strip().startswith("linux")).split()

    p2p = linux(specs.Arm(name="p2p", host=["p2p"]))
    assert "intel_iommu=on" in p2p and "iommu=pt" in p2p  # the arm leaves the IOMMU as the operator has it
    dwords = next(w for w in p2p if "RegistryDwords" in w).strip("'").split("=", 1)[1]
    assert "PowerMizerEnable=0x1" in dwords and "ForceP2P=0x11" in dwords  # the operator's keys stay
    assert "EnableResizableBar" not in dwords  # a BAR setting is not a P2P key
    off = linux(specs.Arm(name="iommu", host=["iommu"]))
    assert "intel_iommu=on" not in off and "iommu=pt" not in off and "intel_iommu=off" in off


def test_an_arms_entry_never_saves_itself_as_the_default(tmp_path):
    host = CampaignHost(tmp_path / "root")
    body = boot.default_entry(host.system)
    body = body[:1] + ["\tsavedefault"] + body[1:]  # Debian's 10_linux with GRUB_SAVEDEFAULT=true
    arm = specs.Arm(name="hmm", host=["hmm"])
    text = boot.entry(arm, body, boot.arm_tokens(arm, host_profiles.load("paper"), "amd"), "c")
    assert "savedefault" not in text and "nvidia_uvm.uvm_disable_hmm=1" in text


# --- the simulated campaign ----------------------------------------------------------------------


def start(host, campaign, ack=True):
    plan = campaign_plan.build(campaign, host.system, acknowledge_iommu_off=ack)
    return runner.start(plan, host.system, "/usr/local/bin/seat", str(host.root))


def test_the_simulated_campaign_recovers_the_oracles_effects(tmp_path):
    host = CampaignHost(tmp_path / "root")
    pristine, default = host.files(), host.entries()[0]
    campaign = write_campaign(tmp_path, repeats=2, design="one-at-a-time", settings=["iommu", "p2p", "hmm"])
    folder = start(host, campaign)
    driver = OracleDriver(host, seed=1)
    assert runner.step(host.system, driver) == "rebooting"  # installs, arms the first visit
    assert host.entries()[0] == default  # the normal entry is untouched while it runs
    with pytest.raises(SeatError, match="a campaign is running"):
        host_change.apply(host_plan.build(host_profiles.load("conservative"), host.system), host.system)
    host.boot()
    outcomes = drive(host, driver)
    assert outcomes[-1] == "done"
    result = __import__("json").loads(host.path(f"{folder}/report.json").read_text())
    effects = {e["setting"]: e for e in result["effects"]}
    for name, truth in EFFECTS.items():  # each arm's own spread: a busy machine widens, never hides
        e = effects[name]
        assert e["kind"] == "simple" and e["at"] == "added to none"
        assert e["low_pct"] <= truth * 100 <= e["high_pct"], (name, e)
        said = f"{specs.LABELS[name]}, added to none within noise"
        assert (said in result["verdict"]) == (not e["claimed"]), result["verdict"]
    assert not effects["hmm"]["claimed"] and result["simulated"].startswith(
        "the seat was the kit's test oracle"
    )
    assert all(len(line) <= 80 for line in result["table"].splitlines())
    assert all(a["tps_alarm"] is None for a in result["arms"])
    assert host.path(f"{folder}/plot.png").read_bytes()[:4] == b"\x89PNG"
    # each arm's bench is an ordinary run folder: compare takes any two
    from seatkit.bench import compare

    runs = sorted(host.path(f"{folder}/runs").iterdir())
    assert len(runs) == 8 and compare.compare(str(runs[0]), str(runs[1]))
    assert host.files() == pristine  # after the final reboot into the normal entry
    assert current(host.system) is None


def test_an_arm_whose_settings_do_not_take_is_flagged_and_skipped(tmp_path):
    host = CampaignHost(tmp_path / "root", ignore=("nvidia_uvm.uvm_disable_hmm",))
    pristine = host.files()
    campaign = write_campaign(
        tmp_path, repeats=1, arms=[{"name": "none", "host": []}, {"name": "hmm", "host": ["hmm"]}]
    )
    folder = start(host, campaign)
    assert drive(host, OracleDriver(host, seed=2))[-1] == "done"
    result = __import__("json").loads(host.path(f"{folder}/report.json").read_text())
    hmm = next(a for a in result["arms"] if a["arm"] == "hmm")
    assert hmm["skipped"] == 1 and "not in force: hmm wanted live but is not" in hmm["skipped_why"]
    assert "Not in force, skipped: hmm" in result["verdict"]
    assert host.files() == pristine


def test_one_campaign_at_a_time(tmp_path):
    host = CampaignHost(tmp_path / "root")
    campaign = write_campaign(tmp_path, repeats=1, arms=[{"name": "none", "host": []}])
    start(host, campaign)
    with pytest.raises(SeatError, match="already running"):
        start(host, campaign)


def test_a_boot_that_never_reaches_the_arm_fails_and_restores(tmp_path):
    host = CampaignHost(tmp_path / "root")
    pristine = host.files()
    campaign = write_campaign(tmp_path, repeats=1, arms=[{"name": "hmm", "host": ["hmm"]}])
    folder = start(host, campaign)
    driver = OracleDriver(host)
    assert runner.step(host.system, driver) == "rebooting"
    for _ in range(campaign.boot_attempts):  # the arm's kernel hangs: power cycles boot the default
        host.path("/boot/grub/grubenv").write_bytes(__import__("campaign_harness").grubenv({}))
        host.boot()
        outcome = host.run_unit(driver)
    assert outcome == "failed"
    assert "boot counter ran out" in host.read(f"{folder}/campaign.log")
    assert host.files() == pristine


def test_a_seat_not_ready_in_time_fails_the_campaign_and_restores(tmp_path):
    host = CampaignHost(tmp_path / "root")
    pristine = host.files()

    class Slow(FastDriver):
        def bench(self, *args):
            raise SeatError("the seat was not ready after 2400 s (waiting for health); it is stopped")

    start(host, write_campaign(tmp_path, repeats=1, arms=[{"name": "p2p", "host": ["p2p"]}]))
    outcomes = drive(host, Slow(host))
    assert outcomes[-1] == "failed"
    assert host.files() == pristine


def test_abort_restores_the_start_state(tmp_path):
    host = CampaignHost(tmp_path / "root")
    pristine = host.files()
    start(host, write_campaign(tmp_path, design="one-at-a-time", settings=["iommu", "p2p"]))
    driver = OracleDriver(host)
    runner.step(host.system, driver)
    host.boot()
    assert runner.status(host.system)["running"]
    assert runner.abort(host.system, FastDriver(host)) == "aborted"
    assert runner.status(host.system) == {"running": False}
    host.boot()
    assert host.files() == pristine


def test_a_campaign_name_that_would_break_grub_cfg_is_refused(tmp_path):
    path = tmp_path / "it's.yaml"  # the name lands inside a single-quoted menuentry title
    path.write_text(
        yaml.safe_dump(
            {
                "description": "x",
                "seat": "cpu-smoke",
                "host": "paper",
                "suites": ["code"],
                "arms": [{"name": "none", "host": []}],
            }
        )
    )
    with pytest.raises(SeatError, match="field 'name'"):
        specs.load(str(path))


def test_host_arms_without_root_are_refused_up_front(tmp_path):
    host = CampaignHost(tmp_path / "root", euid=1000)
    plan = campaign_plan.build(write_campaign(tmp_path, arms=[{"name": "p2p", "host": ["p2p"]}]), host.system)
    assert any("run it as root" in r for r in plan.refusals)


def test_live_arms_set_their_knobs_and_the_end_puts_them_back(tmp_path):
    host = CampaignHost(tmp_path / "root")
    host.write("/sys/devices/system/cpu/cpufreq/boost", "1\n")
    limits = ["600"]
    real_run = host.run

    def run(argv):  # a fake nvidia-smi over the fake host's tools
        if argv[0] == "nvidia-smi":
            host.calls.append(list(argv))
            if argv[1] == "-pl":
                limits[0] = argv[2]
            return 0, f"{limits[0]}.00\n{limits[0]}.00\n"
        return real_run(argv)

    host.system.runner = run
    seen = []

    class Driver(FastDriver):
        def bench(self, campaign, arm, runs, progress):
            seen.append((arm.name, host.read("/sys/devices/system/cpu/cpufreq/boost").strip(), limits[0]))
            return __import__("campaign_harness").FastDriver(host).bench(campaign, arm, runs, progress)

    campaign = write_campaign(
        tmp_path,
        host=None,
        repeats=1,
        arms=[
            {"name": "start", "live": {}},
            {"name": "no-boost", "live": {"cpu_boost": False}},
            {"name": "pl450", "live": {"gpu_power_limit_w": 450}},
        ],
    )
    start(host, campaign)
    assert runner.step(host.system, Driver(host)) == "done"
    assert seen == [("start", "1", "600"), ("no-boost", "0", "600"), ("pl450", "1", "450")]
    assert host.read("/sys/devices/system/cpu/cpufreq/boost") == "1\n" and limits == ["600"]


def test_the_cli_plans_and_reports_status_on_a_fake_root(tmp_path):
    from click.testing import CliRunner

    from seatkit.cli.app import seat

    host = CampaignHost(tmp_path / "root")
    cli = CliRunner()
    refused = cli.invoke(seat, ["campaign", "plan", "paper", "--root", str(host.root)])
    assert (
        refused.exit_code == 2  # as `seat host plan` exits when apply would refuse
        and "refused:" in refused.output
        and "--acknowledge-iommu-off" in refused.output
    )
    planned = cli.invoke(
        seat, ["campaign", "plan", "paper", "--root", str(host.root), "--acknowledge-iommu-off", "--json"]
    )
    assert __import__("json").loads(planned.output)["reboots"] == 17
    start(host, write_campaign(tmp_path, repeats=1, arms=[{"name": "p2p", "host": ["p2p"]}]))
    runner.step(host.system, OracleDriver(host))
    shown = cli.invoke(seat, ["campaign", "status", "--root", str(host.root)], env={"COLUMNS": "200"})
    assert "0 of 1 benches done" in shown.output and "next: visit 1 (p2p), 1 boot(s) armed" in shown.output
    assert runner.abort(host.system, FastDriver(host)) == "aborted"  # --root refuses update-grub here
    assert (
        cli.invoke(seat, ["campaign", "status", "--root", str(host.root)]).output.strip()
        == "no campaign is running"
    )


def test_the_seat_drivers_cold_start_wait_is_a_heartbeat_not_a_flood(tmp_path, monkeypatch):
    from seatkit.campaign import seat as campaign_seat
    from seatkit.image import vouch

    stopped = []

    def up(spec, tick, image_check):
        assert image_check is vouch.image_check  # the seat's image judged as `seat up` judges it
        for half_seconds in range(0, 240):  # two minutes of polling, twice a second
            tick("health", half_seconds / 2)
        return None, 120.0

    def bench(target, prompts, options, out, progress):
        out.finish({"suites": {}}, "x\n")

    monkeypatch.setattr(campaign_seat.launch, "up", up)
    monkeypatch.setattr(campaign_seat.launch, "down", lambda name: stopped.append(name))
    monkeypatch.setattr(campaign_seat.targets, "of_profile", lambda name: None)
    monkeypatch.setattr(campaign_seat.bench_run, "bench", bench)
    lines = []
    campaign = specs.load("cpu-ngram-k")
    folder = campaign_seat.SeatDriver().bench(campaign, specs.all_arms(campaign)[0], tmp_path, lines.append)
    waits = [line for line in lines if "waiting for health" in line]
    assert len(waits) == 4 and stopped == ["cpu-smoke-k3"] and folder.parent == tmp_path
