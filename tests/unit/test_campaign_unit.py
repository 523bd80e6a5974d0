"""What root runs unattended is root's alone, and --root acts on nothing outside the root."""

from __future__ import annotations

import os
import subprocess

import pytest
from campaign_harness import SEAT, CampaignHost, FastDriver, installed_unit, refusal, start, write_campaign
from click.testing import CliRunner

from seatkit.campaign import plan as campaign_plan
from seatkit.campaign import runner
from seatkit.cli.app import seat
from seatkit.errors import SeatError

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="hands files to another uid (chown)")
USER = 1000  # the user whose clone the campaign was started from


def p2p_campaign(tmp_path):
    return write_campaign(tmp_path, arms=[{"name": "p2p", "host": ["p2p"]}])


@pytest.mark.parametrize(
    "how, said",
    [
        (lambda host: os.chown(host.path(SEAT), USER, USER), "/usr/local/bin/seat is owned by uid 1000"),
        (lambda host: os.chmod(host.path("/usr/local/bin"), 0o777), "/usr/local/bin is writable by others"),
        (lambda host: os.chmod(host.path(SEAT), 0o775), "/usr/local/bin/seat is writable by others"),
        (lambda host: os.chown(host.path("/usr/local"), USER, USER), "/usr/local is owned by uid 1000"),
    ],
)
def test_a_seat_a_user_can_write_is_refused_before_anything_changes(tmp_path, how, said):
    host = CampaignHost(tmp_path / "root")
    pristine = host.files()
    how(host)
    plan = campaign_plan.build(p2p_campaign(tmp_path), host.system, acknowledge_iommu_off=True)
    with pytest.raises(SeatError) as caught:
        runner.start(plan, host.system, SEAT, str(host.root))
    assert said in caught.value.message and "make install" in caught.value.hint
    boot_files = ("etc/", "boot/")
    assert {k: v for k, v in host.files().items() if k.startswith(boot_files)} == {
        k: v for k, v in pristine.items() if k.startswith(boot_files)
    }


def test_an_editable_installs_seat_is_refused_through_its_interpreter_and_links(tmp_path):
    """The user's clone: .venv/bin/seat (a script whose interpreter is the clone's python), reached
    through a root-owned link in /usr/local/bin."""
    host = CampaignHost(tmp_path / "root")
    clone = host.path("/home/user/seatkit/.venv/bin")
    clone.mkdir(parents=True)
    (clone / "python").write_text("")
    (clone / "seat").write_text(f"#!{'/home/user/seatkit/.venv/bin/python'}\n")
    for p in [clone / "python", clone / "seat", *list(clone.parents)[:3]]:
        os.chown(p, USER, USER)
    host.path(SEAT).unlink()
    host.path(SEAT).symlink_to("../../../home/user/seatkit/.venv/bin/seat")  # relative: inside the root
    said = refusal(host, p2p_campaign(tmp_path))
    assert "/home/user/seatkit/.venv/bin/seat is owned by uid 1000" in said, said
    os.chown(clone / "seat", 0, 0)  # a root-owned script that runs the user's python is no better
    said = refusal(host, p2p_campaign(tmp_path))
    assert "/home/user/seatkit/.venv/bin/python is owned by uid 1000" in said, said


def test_the_unit_checks_its_seat_at_each_start_and_falls_back_on_failure(tmp_path):
    text = installed_unit(CampaignHost(tmp_path / "root"), p2p_campaign(tmp_path))
    pre = next((line for line in text.splitlines() if line.startswith("ExecStartPre=")), "")
    assert pre, f"the unit checks nothing before it runs its seat as root:\n{text}"
    script = pre.split("=", 1)[1].removeprefix("/bin/sh -c '").removesuffix("'")
    script = script.replace("$$", "$").replace("%%", "%")  # as systemd hands it to sh

    def check(path):
        return subprocess.run(["sh", "-c", script.replace("/usr/local/bin/seat", str(path))]).returncode

    safe = tmp_path / "safe"
    safe.write_text("#!/bin/sh\n")
    os.chmod(tmp_path, 0o755)
    assert check("/bin/sh") == 0  # root's own program: it runs
    os.chown(safe, USER, USER)
    assert check(safe) == 1  # the user's: systemd does not run the step
    assert "OnFailure=" in text  # the fallback unit, which boots the normal entry


def test_a_throwaway_root_runs_no_command_on_this_machine(tmp_path, monkeypatch):
    host = CampaignHost(tmp_path / "root")
    start(host, p2p_campaign(tmp_path))
    runner.step(host.system, FastDriver(host))  # installed: the abort would run update-grub
    ran = []
    real = subprocess.run

    def recording(argv, *args, **kwargs):
        ran.append(argv[0])
        return real(argv, *args, **kwargs)

    monkeypatch.setattr("seatkit.host.system.subprocess.run", recording)
    done = CliRunner().invoke(seat, ["campaign", "abort", "--root", str(host.root)])
    assert isinstance(done.exception, SeatError) and "would act on this machine" in done.exception.message
    assert not {"update-grub", "grub-reboot", "grub-editenv", "systemctl"} & set(ran), ran


def test_the_kits_own_code_a_user_can_write_is_refused(tmp_path, monkeypatch):
    """A root-owned `seat` whose package is an editable install: the code lives in the user's clone."""
    import seatkit

    host = CampaignHost(tmp_path / "root")
    package = host.path("/home/user/seatkit/seatkit")
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "cli.py").write_text("")
    os.chown(package / "cli.py", USER, USER)
    monkeypatch.setattr(seatkit, "__file__", str(package / "__init__.py"))
    said = refusal(host, p2p_campaign(tmp_path))
    assert "/home/user/seatkit/seatkit/cli.py is owned by uid 1000, not root" in said, said
