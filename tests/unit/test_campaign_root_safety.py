"""A campaign never runs as root what a user can write, never acts outside --root, never boots what `seat host plan` refuses, and always comes back from an arm (issue 36)."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from campaign_harness import (
    SEAT,
    CampaignHost,
    FastDriver,
    drive,
    installed_unit,
    refusal,
    start,
    write_campaign,
)
from click.testing import CliRunner
from fake_host import KVER

from seatkit.campaign import boot, runner
from seatkit.campaign import plan as campaign_plan
from seatkit.cli.app import seat
from seatkit.host.system import confined

USER = 1000


@pytest.fixture
def request_cleanup():
    made = []
    yield made
    for p in made:
        shutil.rmtree(p, ignore_errors=True)


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


@root_only
def test_a_seat_home_a_user_can_write_never_reaches_the_root_unit(tmp_path, monkeypatch):
    """SEAT_HOME is a launch knob: set when the campaign starts (`sudo -E`, or `sudo SEAT_HOME=~u/...`
    to reuse the user's built runtime), it is journaled and put into the root unit's environment
    at every boot, so root launches the native runtime (its venv's python, vllm) from a folder
    uid 1000 can write. The kit checks `seat` itself to the last folder, but not this."""
    home = tmp_path / "home-user-cache-seatkit"
    home.mkdir()
    os.chown(home, USER, USER)
    monkeypatch.setenv("SEAT_HOME", str(home))
    host = CampaignHost(tmp_path / "root")
    plan = campaign_plan.build(p2p_campaign(tmp_path), host.system, acknowledge_iommu_off=True)
    carried = plan.launch_env.get("SEAT_HOME")
    assert carried is None or any("SEAT_HOME" in r for r in plan.refusals), (
        f"root's unit will run the seat from SEAT_HOME={carried}, owned by uid {USER}"
    )


def _profiles_with(tmp_path, monkeypatch, name, text):
    from seatkit import paths

    copy = tmp_path / "profiles"
    shutil.copytree(paths.PROFILES, copy)
    (copy / f"{name}.yaml").write_text(text)
    monkeypatch.setattr(paths, "PROFILES", copy)
    return copy


def test_pass_env_never_carries_path_or_loader_variables_into_the_root_unit(tmp_path, monkeypatch):
    """A profile's docker.pass_env accepts any upper-case name (PATH, LD_PRELOAD, PYTHONPATH). The
    campaign captures them at start and the step os.environ.update()s them in the root unit before
    it runs update-grub, grub-editenv and systemctl by bare name: root then resolves those through
    the operator's PATH (~/bin first) and loads LD_PRELOAD into each."""
    _profiles_with(
        tmp_path,
        monkeypatch,
        "leaky",
        "extends: cpu-smoke-docker\ndescription: leaky\ndocker:\n  pass_env: [PATH, LD_PRELOAD]\n",
    )
    monkeypatch.setenv("PATH", "/home/user/bin:" + os.environ["PATH"])
    monkeypatch.setenv("LD_PRELOAD", "/home/user/hook.so")
    host = CampaignHost(tmp_path / "root")
    campaign = write_campaign(tmp_path, seat="leaky", arms=[{"name": "p2p", "host": ["p2p"]}])
    plan = campaign_plan.build(campaign, host.system, acknowledge_iommu_off=True)
    carried = {k: v for k, v in plan.launch_env.items() if k in ("PATH", "LD_PRELOAD", "PYTHONPATH")}
    assert carried == {} or plan.refusals, f"the root unit would run with {carried}"


@root_only
def test_a_pth_file_a_user_can_write_beside_the_kits_package_is_refused(tmp_path, monkeypatch):
    """Python runs every site-packages/*.pth at start-up: a user-owned one beside a root-owned kit
    runs as root in the unit. unsafe_exe checks only seatkit's own .py files and their folders."""
    import seatkit

    host = CampaignHost(tmp_path / "root")
    site = host.path("/usr/lib/python3/dist-packages")
    package = site / "seatkit"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (site / "zz-user.pth").write_text("import os; os.system('id > /tmp/owned')\n")
    os.chown(site / "zz-user.pth", USER, USER)
    (site / "yaml").mkdir()
    (site / "yaml" / "__init__.py").write_text("")
    os.chown(site / "yaml" / "__init__.py", USER, USER)  # a dependency the kit imports
    monkeypatch.setattr(seatkit, "__file__", str(package / "__init__.py"))
    said = refusal(host, p2p_campaign(tmp_path))
    assert "zz-user.pth" in said and "yaml" in said, said


@root_only
def test_a_profile_a_user_can_write_is_refused_for_the_root_unit(tmp_path, monkeypatch):
    """At every boot the root unit loads the seat profile (image, command, mounts) and the host
    profile (the arm's tokens) by name from the kit's tree; unsafe_exe never looks at them."""
    import seatkit
    from seatkit import paths

    host = CampaignHost(tmp_path / "root")
    kit = host.path("/opt/seatkit")
    package = kit / "seatkit"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    shutil.copytree(paths.PROFILES, kit / "profiles")
    os.chown(kit / "profiles" / "cpu-smoke.yaml", USER, USER)  # the seat the unit launches as root
    monkeypatch.setattr(seatkit, "__file__", str(package / "__init__.py"))
    monkeypatch.setattr(paths, "PROFILES", kit / "profiles")
    monkeypatch.setattr(paths, "REPO", kit)
    said = refusal(host, p2p_campaign(tmp_path))
    assert "cpu-smoke.yaml" in said, said


def test_a_hung_step_in_an_arm_cannot_hold_the_host_there(tmp_path):
    """The unit is Type=oneshot with TimeoutStartSec=infinity and no watchdog: a bench or an NVML
    call that hangs in an arm's boot (a GPU wedged with the IOMMU off) keeps the arm running until
    someone power-cycles it. A finite start timeout would fail the unit and start the fallback."""
    text = installed_unit(CampaignHost(tmp_path / "root"), p2p_campaign(tmp_path))
    assert "TimeoutStartSec=infinity" not in text, text


@root_only
def test_the_units_own_check_refuses_a_root_owned_seat_whose_interpreter_a_user_can_write(
    tmp_path, request_cleanup
):
    """The unit's ExecStartPre is said to check at each start what unsafe_exe checks at the
    install; it checks the script and its folders only, not its #! interpreter (nor the package)."""
    text = installed_unit(CampaignHost(tmp_path / "root"), p2p_campaign(tmp_path))
    pre = next((line for line in text.splitlines() if line.startswith("ExecStartPre=")), "")
    assert pre, f"the unit checks nothing before it runs its seat as root:\n{text}"
    script = pre.split("=", 1)[1].removeprefix("/bin/sh -c '").removesuffix("'")
    script = script.replace("$$", "$").replace("%%", "%")
    import tempfile
    from pathlib import Path

    where = Path(tempfile.mkdtemp(dir="/root"))  # no world-writable folder above it (/tmp is one)
    request_cleanup.append(where)
    python = where / "python"
    python.write_text("#!/bin/sh\n")
    os.chmod(python, 0o755)
    os.chown(python, USER, USER)
    safe = where / "seat"
    safe.write_text(f"#!{python}\n")
    os.chmod(safe, 0o755)
    rc = subprocess.run(["sh", "-c", script.replace("/usr/local/bin/seat", str(safe))]).returncode
    assert rc == 1, "the unit would run a root-owned seat through uid 1000's interpreter"


def _in_the_last_arm(host, tmp_path):
    folder = start(
        host, write_campaign(tmp_path, arms=[{"name": "none", "host": []}, {"name": "p2p", "host": ["p2p"]}])
    )
    driver = FastDriver(host)
    assert runner.step(host.system, driver) == "rebooting"
    host.boot()
    assert host.run_unit(driver) == "rebooting"
    assert host.boot() == "seatkit-campaign-p2p"
    return folder


@pytest.mark.parametrize("when", ["before the marker goes", "after the marker went"])
def test_an_abort_killed_at_its_end_in_an_arm_is_resumed_into_the_normal_entry(tmp_path, monkeypatch, when):
    """`seat campaign abort` in an arm's boot (ssh, Ctrl-C, SIGHUP) dies after the end record: the
    unit and entries are already removed, so no boot will run a step again. `seat campaign resume`
    then returns the end's outcome without rebooting (runner._visits: `if run.ended: ... return`,
    with no booted_arm check), or says "no campaign is running"; `status` says not running. The
    arm's kernel (its P2P keys, or the IOMMU off) keeps running with nothing to bring it back."""
    from fake_host import Death

    from seatkit.campaign.folder import CURRENT
    from seatkit.host.system import System

    host = CampaignHost(tmp_path / "root")
    _in_the_last_arm(host, tmp_path)
    real_remove = System.remove

    def dying(self, path):
        if path == CURRENT:
            if when == "after the marker went":
                real_remove(self, path)
            monkeypatch.setattr(System, "remove", real_remove)
            raise Death(path)
        return real_remove(self, path)

    monkeypatch.setattr(System, "remove", dying)
    before = host.reboots_requested
    with pytest.raises(Death):
        runner.abort(host.system, FastDriver(host))
    assert host.reboots_requested == before  # killed before its reboot
    try:
        runner.step(host.system, FastDriver(host))  # `seat campaign resume`
    except Exception:
        runner.abort(host.system, FastDriver(host)) if runner.status(host.system)["running"] else None
    assert host.reboots_requested > before, (
        f"still in the arm {boot.booted_arm(host.system)}; status: {runner.status(host.system)}"
    )


COMMAND_LINE_SIZE = 2048  # x86: the kernel keeps 2047 bytes of the command line, silently


class TruncatingHost(CampaignHost):
    """The kernel's own limit: /proc/cmdline holds the first COMMAND_LINE_SIZE - 1 bytes."""

    def boot(self):
        self.last = super().boot()
        text = self.read("/proc/cmdline").rstrip("\n")
        self.write("/proc/cmdline", text[: COMMAND_LINE_SIZE - 1] + "\n")
        return self.last


def test_an_arm_whose_marker_the_kernel_would_cut_off_is_refused_or_still_left(tmp_path):
    """The marker `seatkit.arm=NAME` is the LAST token of the arm's line, after the P2P registry
    string (the operator's keys with the five P2P keys). On a long operator line (isolcpus,
    hugepages, many module options) the kernel truncates the arm's line and drops the marker:
    the kit then takes the arm's boot for the normal entry ("not the arm's entry", re-arms until
    the counter runs out), ends the campaign inside the arm's kernel and never reboots; the
    fallback unit's ConditionKernelCommandLine does not match either."""
    long_line = "quiet splash " + " ".join(f"opt{i:03d}.param=value{i:03d}" for i in range(86))
    host = TruncatingHost(tmp_path / "root", cmdline=long_line)
    assert len(host.read("/proc/cmdline")) < COMMAND_LINE_SIZE  # the normal line fits
    campaign = p2p_campaign(tmp_path)
    plan = campaign_plan.build(campaign, host.system, acknowledge_iommu_off=True)
    if plan.refusals:
        return  # refused before anything changed: holds
    runner.start(plan, host.system, SEAT, str(host.root))
    try:
        drive(host, FastDriver(host))
    except Exception:
        pass
    assert host.last is None, f"the campaign ended with the host running the arm entry {host.last}"


def test_a_full_disk_after_arming_leaves_no_one_shot_armed_in_the_normal_boot(tmp_path, monkeypatch):
    """In the normal boot, grub-reboot arms the p2p entry, then the journal's `armed` record (and
    the `failed` record after it) meet ENOSPC: the error leaves the step, the unit fails (its
    fallback does nothing outside an arm), and grubenv keeps next_entry. The host then runs the
    normal entry with the arm's one-shot armed: the next reboot, whoever makes it (the operator,
    a power cut, unattended-upgrades), boots the arm; the campaign neither ends nor says so."""
    import errno

    from campaign_harness import read_env

    from seatkit.host.journal import Journal

    host = CampaignHost(tmp_path / "root")
    folder = start(host, p2p_campaign(tmp_path))
    real = Journal._append

    def full(self, record):
        if self.file.startswith(folder) and record.get("type") in ("armed", "failed"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, record)

    monkeypatch.setattr(Journal, "_append", full)
    try:
        runner.step(host.system, FastDriver(host))
    except Exception:  # the journal says ENOSPC as a SeatError
        pass
    assert boot.booted_arm(host.system) is None  # the normal boot
    armed = read_env(host.path("/boot/grub/grubenv").read_bytes()).get("next_entry")
    assert not armed, f"the normal boot keeps the one-shot {armed} armed after a failed step"


def test_an_arm_that_panics_reboots_into_the_normal_entry_by_itself(tmp_path):
    """The one-shot is cleared as GRUB boots the arm, so any REBOOT lands in the normal entry; but
    an arm whose kernel panics (IOMMU off: a root on a device that needs it, an NVMe that fails)
    waits with panic=0, the default, for a human to power-cycle it. No arm line carries panic=N
    (nor a hardware watchdog, nor a timer that reboots when the unit never starts)."""
    host = CampaignHost(tmp_path / "root")
    start(host, p2p_campaign(tmp_path))
    runner.step(host.system, FastDriver(host))  # installs the entries, arms the first
    arms = [args for ident, args in host.entries() if ident and ident.startswith("seatkit-campaign-")]
    assert arms and all(any(w.startswith("panic=") for w in a.split()) for a in arms), arms


def test_the_fallback_unit_names_tools_this_host_has(tmp_path):
    """The fallback hard-codes /usr/bin/grub-editenv and /usr/bin/systemctl (the kit's own calls
    go through PATH). On a host without merged /usr (systemctl in /bin, systemd < 239 wants an
    absolute path), its reboot fails with 203/EXEC and the arm's boot stays where it is."""
    host = CampaignHost(tmp_path / "root")
    for tool in ("/bin/systemctl", "/usr/bin/grub-editenv"):
        host.write(tool, "#!/bin/sh\n")
    start(host, p2p_campaign(tmp_path))
    runner.step(host.system, FastDriver(host))
    paths = [
        line.split("=", 1)[1].lstrip("-").split()[0]
        for lines in host.on_failure_units()
        for line in lines
        if line.startswith("ExecStart=")
    ]
    assert paths and all(host.path(p).exists() for p in paths), paths


def test_a_refused_plain_reboot_in_an_arm_is_forced(tmp_path):
    """In the last arm's boot the way back is `systemctl reboot`; when it is refused (a conflicting
    shutdown job, logind answering "Transaction contains conflicting jobs", a D-Bus timeout on a
    busy host), the step raises, the fallback unit runs the same `systemctl reboot` once, and the
    arm's kernel keeps running: nothing escalates to `systemctl reboot --force` / `reboot -f`."""
    host = CampaignHost(tmp_path / "root")
    _in_the_last_arm(host, tmp_path)
    real = host.run
    forced = []

    def run(argv):
        if argv[:2] == ["systemctl", "reboot"] and len(argv) == 2:
            host.calls.append(list(argv))
            return 1, "Failed to reboot system via logind: Transaction contains conflicting jobs\n"
        if "reboot" in argv and any(a in ("-f", "--force", "-ff") for a in argv):
            forced.append(list(argv))
            host.reboots_requested += 1
            return 0, ""
        return real(argv)

    host.run = run
    host.system.runner = run
    before = host.reboots_requested
    try:
        host.run_unit(FastDriver(host))
    except Exception:
        pass  # the unit failed; its fallback has run
    assert host.reboots_requested > before, (
        f"still in the arm {boot.booted_arm(host.system)}: only {[c for c in host.calls if 'reboot' in c]}"
    )


@root_only
def test_an_interpreter_reached_through_a_folder_a_user_can_write_is_refused(tmp_path):
    """A root-owned /usr/local/bin/seat whose #! is a venv's python: the venv's bin/python is a
    link to /usr/bin/python3 (root's), but the venv is uid 1000's, so the user can replace the
    link. unsafe_exe checks the interpreter only as resolved, never the folders of the path the
    kernel actually opens."""
    host = CampaignHost(tmp_path / "root")
    host.write("/usr/bin/python3", "")
    venv = host.path("/home/user/venv/bin")
    venv.mkdir(parents=True)
    (venv / "python").symlink_to("../../../../usr/bin/python3")  # relative: inside the fake root
    for p in [venv, venv.parent, venv.parent.parent]:
        os.chown(p, USER, USER, follow_symlinks=False)
    host.write(SEAT, "#!/home/user/venv/bin/python\n")
    host.path(SEAT).chmod(0o755)
    said = refusal(host, p2p_campaign(tmp_path))
    assert "/home/user" in said, said


def test_an_abort_recorded_while_a_step_arms_keeps_the_host_out_of_the_arm(tmp_path):
    """`seat campaign abort` while the unit's step (normal boot) is between grub-reboot and
    `systemctl reboot`: the abort journals "aborted" and answers that the running step "restores
    the start state"; the step never reads the journal again, reboots into the arm it armed (IOMMU
    off, or the P2P keys) and only that arm's boot turns back."""
    from seatkit.errors import SeatError

    host = CampaignHost(tmp_path / "root")
    start(host, p2p_campaign(tmp_path))
    said = []

    def fault(point):
        if point == "campaign: before the reboot into visit 0" and not said:
            try:
                runner.abort(host.system, FastDriver(host))
            except SeatError as exc:
                said.append(exc.message)

    host.system.fault = fault
    runner.step(host.system, FastDriver(host))
    assert said and "restores the start state" in said[0], said
    if host.reboots_requested:
        assert host.boot() is None, "the aborted campaign rebooted the host into its arm"


def test_an_abort_after_a_kit_upgrade_still_takes_the_entries_and_unit_out(tmp_path):
    """The kit is upgraded mid-campaign (a `git pull` of the root-owned clone, a new wheel) and its
    Campaign model changed: Run() validates the journal's campaign strictly and raises a pydantic
    ValidationError, so `seat campaign abort` fails (only a missing beginning has a way out) and
    the entries, the unit and an armed one-shot stay; every boot runs the failing step."""
    import json

    host = CampaignHost(tmp_path / "root")
    folder = start(host, p2p_campaign(tmp_path))
    runner.step(host.system, FastDriver(host))  # installed and armed; the host reboots
    host.boot()  # the arm's boot; the operator aborts from here
    journal = host.path(f"{folder}/journal.jsonl")
    lines = journal.read_text().splitlines()
    begin = json.loads(lines[0])
    begin["campaign"]["retired_field"] = 1  # what the older kit wrote, unknown to the newer one
    journal.write_text("\n".join([json.dumps(begin), *lines[1:]]) + "\n")
    try:
        runner.abort(host.system, FastDriver(host))
    except Exception:
        pass
    assert not host.unit_enabled() and not host.path(boot.SCRIPT).exists(), "abort left the unit and entries"
    assert host.reboots_requested == 2, "the abort in the arm's boot did not reboot out of it"


def test_the_unit_runs_the_seat_that_started_the_campaign(tmp_path, monkeypatch):
    """_seat_exe() takes the first `seat` on PATH, not the one running: `sudo ./.venv/bin/seat
    campaign run` on a host that also has an older /usr/local/bin/seat writes a unit that runs the
    older kit at every boot (its journal format, its way out of an arm), while unsafe_exe vetted
    this process's package, not the one that seat imports."""
    import sys

    from seatkit.cli import campaign as cli_campaign

    other = tmp_path / "bin"
    other.mkdir()
    (other / "seat").write_text("#!/usr/bin/python3\nfrom old_seatkit import main; main()\n")
    (other / "seat").chmod(0o755)
    monkeypatch.setenv("PATH", f"{other}:{os.environ['PATH']}")
    running = str(__import__("pathlib").Path(sys.executable).with_name("seat"))
    assert cli_campaign._seat_exe() == running, f"the unit would run {cli_campaign._seat_exe()}"


def test_run_with_a_throwaway_root_starts_no_seat_on_this_machine(tmp_path, monkeypatch):
    """`seat campaign run NAME --root THROWAWAY` refuses host arms ("--root serves plan, status and
    report") but runs a seat-arm campaign: SeatDriver.bench calls launch.up, which starts the
    profile's server on this machine, outside the root and outside the confined runner."""
    host = CampaignHost(tmp_path / "root")
    write_campaign(
        tmp_path,
        host=None,
        arms=[{"name": "a", "profile": "cpu-smoke"}, {"name": "b", "profile": "cpu-smoke-k3"}],
    )
    ups = []

    def up(spec, *a, **k):
        ups.append(spec.profile.name)
        raise RuntimeError("stopped here by the test")

    monkeypatch.setattr("seatkit.serve.launch.up", up)
    CliRunner().invoke(seat, ["campaign", "run", str(tmp_path / "camp.yaml"), "--root", str(host.root)])
    assert ups == [], f"launch.up ran on this machine for {ups}"


def test_an_abort_in_an_arm_whose_reboot_is_refused_keeps_a_way_back(tmp_path):
    """`seat campaign abort` in an arm's boot restores the files, removes the unit and its fallback,
    ends the campaign, then `systemctl reboot` is refused: it raises "reboot by hand: the unit
    resumes the campaign after the boot" (there is no unit any more), and the arm's kernel runs
    on with nothing installed that would ever take it back."""
    host = CampaignHost(tmp_path / "root")
    _in_the_last_arm(host, tmp_path)
    real = host.run

    def run(argv):
        if (
            argv[:2] == ["systemctl", "reboot"] and argv.count("--force") < 2
        ):  # -ff: reboot(2), no one to refuse
            return 1, "Failed to reboot system via logind: Access denied\n"
        return real(argv)

    host.run = run
    host.system.runner = run
    try:
        runner.abort(host.system, FastDriver(host))
    except Exception:
        pass
    assert host.unit_enabled() or host.reboots_requested > 2, (
        f"in the arm {boot.booted_arm(host.system)}, campaign running: {runner.status(host.system)['running']}, "
        "no unit, no fallback"
    )


def test_campaign_plan_with_a_throwaway_root_reads_the_roots_copies_not_this_machine(tmp_path, monkeypatch):
    """`seat campaign plan --root THROWAWAY` reads the root's files; the commands that only read
    must read the root's copies too (modinfo its modules, uname its kernel, a lister its image),
    and what no copy can tell (systemd-detect-virt) is left to the root's files, not this machine."""
    host = CampaignHost(tmp_path / "root")
    host.write("/proc/sys/kernel/osrelease", f"{KVER}\n")
    p2p_campaign(tmp_path)
    ran = []
    real = subprocess.run

    def recording(argv, *args, **kwargs):
        ran.append(list(argv))
        return real(argv, *args, **kwargs)

    monkeypatch.setattr("seatkit.host.system.subprocess.run", recording)
    done = CliRunner().invoke(
        seat, ["campaign", "plan", str(tmp_path / "camp.yaml"), "--root", str(host.root), "--json"]
    )
    assert done.exit_code in (0, 2), done.output
    host_commands = [argv for argv in ran if argv[0] != "sh"]  # sh -n: the root's own defaults file
    assert all(str(host.root) in " ".join(argv) for argv in host_commands), host_commands
    modinfo = [argv for argv in host_commands if argv[0] == "modinfo"]
    assert modinfo and all(["-k", KVER] == argv[3:5] for argv in modinfo), (
        modinfo
    )  # not this machine's kernel
    assert "container" not in done.output and "virtual machine" not in done.output, done.output
    host.write("/proc/cpuinfo", host.read("/proc/cpuinfo").replace("fpu sse2", "fpu sse2 hypervisor"))
    done = CliRunner().invoke(
        seat, ["campaign", "plan", str(tmp_path / "camp.yaml"), "--root", str(host.root)]
    )
    assert "a hypervisor (cpuinfo flag)" in done.output, done.output  # the root's copy says so


def test_modinfo_under_a_throwaway_root_asks_for_the_roots_kernel(tmp_path, monkeypatch):
    """modinfo without -k reads the modules of this machine's `uname -r`, even with -b ROOT: under
    --root it must name the kernel the root's /proc says (the driver's version is judged by it)."""
    release = tmp_path / "proc/sys/kernel/osrelease"
    release.parent.mkdir(parents=True)
    release.write_text(f"{KVER}\n")
    ran = []
    monkeypatch.setattr("seatkit.host.system.run_real", lambda argv: ran.append(argv) or (0, ""))
    confined(tmp_path)(["modinfo", "-F", "version", "nvidia"])
    assert ran == [["modinfo", "-b", str(tmp_path), "-k", KVER, "-F", "version", "nvidia"]]


def test_the_fallback_unit_runs_no_tool_from_a_folder_a_user_can_write(tmp_path):
    """The fallback runs as root at a failed arm's boot, unchecked at its start (only the seat's
    unit checks what it runs). Reproduction: a host whose /usr/local/bin a user can write (a
    `chown -R $USER /usr/local` for global npm installs) and that holds a systemctl of its own
    there; unit.fallback_text now takes each tool from System.which, /usr/local first, so root's
    `ExecStart=` names /usr/local/bin/systemctl (before the cut: /usr/bin or /bin alone)."""
    from seatkit.campaign import unit

    host = CampaignHost(tmp_path / "root")
    for tool in ("/usr/bin/systemctl", "/usr/bin/grub-editenv", "/usr/local/bin/systemctl"):
        host.write(tool, "#!/bin/sh\n")
    os.chmod(host.path("/usr/local/bin"), 0o777)
    text = unit.fallback_text(host.system)
    started = [line for line in text.splitlines() if line.startswith("ExecStart=")]
    assert started and not any("/usr/local/" in line for line in started), started
