"""seatkit/host/lock.py: one change at a time on a host, and a lock file that is not what it should be is
refused."""

from __future__ import annotations

import multiprocessing
import os
import re

import pytest
from fake_host import ACK, FakeHost, apply, make_plan

from seatkit import flock
from seatkit.errors import SeatError
from seatkit.host import change, lock, ops, status
from seatkit.host import plan as host_plan
from seatkit.host.journal import Journal
from seatkit.seat import host_profiles

pytestmark = pytest.mark.usefixtures("no_nvml")


def _apply_in_child(host, profile, choices, start, release, results):
    plan = make_plan(host, profile, choices)
    host.system.fault = lambda at: release.wait(60) if at == "before update-initramfs" else None
    start.wait(60)
    try:
        results.put(("applied", change.apply(plan, host.system)))
    except SeatError as exc:
        results.put(("refused", str(exc)))


def test_two_applies_started_together_leave_exactly_one_acting(tmp_path):
    host = FakeHost(tmp_path, "grub", driver="590.44.01")
    pristine = host.tree()
    ctx = multiprocessing.get_context("fork")
    start, release, results = ctx.Barrier(2), ctx.Event(), ctx.Queue()
    children = [
        ctx.Process(target=_apply_in_child, args=(host, p, c, start, release, results))
        for p, c in (("paper", ACK), ("conservative", host_plan.Choices()))
    ]
    for child in children:
        child.start()
    first = results.get(timeout=120)  # the loser reports while the winner waits inside its apply
    release.set()
    second = results.get(timeout=120)
    for child in children:
        child.join(60)
    (winner,), (loser,) = ([r for r in (first, second) if r[0] == kind] for kind in ("applied", "refused"))
    assert first[0] == "refused"
    # The holder is named once it has written its name; a loser that comes in between says so.
    assert re.search(
        r"another host change is running: (pid \d+ \(seat host apply (paper|conservative)"
        r"|a process that has not yet written its name)",
        loser[1],
    ), loser[1]
    (active,) = Journal(host.system).active()
    assert active.txid == winner[1]
    module = host.read(ops.MODPROBE_FILE)  # one profile's files, not a mix of both
    dropin = host.read(ops.GRUB_DROPIN)
    assert ("RMForceP2PType" in module) == ("iommu=off" in dropin) == (active.begin["profile"] == "paper")
    change.rollback(host.system)
    assert host.tree() == pristine


def test_status_and_plan_work_while_the_lock_is_held_and_changes_are_refused(tmp_path):
    host = FakeHost(tmp_path, "grub")
    txid = apply(host)
    with lock.held(host.system, "apply paper"):
        assert status.status(host_profiles.load("paper"), host.system)["transactions"]["in_force"]
        assert make_plan(host, "conservative", host_plan.Choices()).profile == "conservative"
        for act in (
            lambda: change.rollback(host.system),
            lambda: apply(host),
            lambda: change.forget(host.system, txid),
        ):
            with pytest.raises(
                SeatError,
                match=rf"another host change is running: pid {os.getpid()} "
                r"\(seat host apply paper, since",
            ):
                act()
    assert Journal(host.system).active()[0].txid == txid


def test_a_lock_file_that_is_a_symlink_is_refused_and_its_target_untouched(tmp_path):
    host = FakeHost(tmp_path / "root", "grub")
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    host.path(lock.LOCK).parent.mkdir(parents=True, exist_ok=True)
    host.path(lock.LOCK).symlink_to(victim)
    with pytest.raises(SeatError, match="lock"):
        apply(host)
    assert victim.read_text() == "precious\n"


def test_a_lock_that_cannot_be_opened_is_a_clear_error(tmp_path):
    host = FakeHost(tmp_path, "grub")
    host.path(lock.LOCK).mkdir(parents=True)  # a folder where the lock file goes
    with pytest.raises(SeatError, match="lock"):
        apply(host)


def test_a_full_disk_at_the_lock_is_a_clear_error_and_changes_nothing(tmp_path, monkeypatch):
    import errno

    host = FakeHost(tmp_path, "grub")
    pristine = host.tree()

    def full(*args):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(flock.os, "pwrite", full)
    monkeypatch.setattr(Journal, "_append", lambda self, record: full())
    with pytest.raises(SeatError, match="cannot write .*journal.jsonl: No space left on device"):
        apply(host)
    assert host.tree() == pristine and not host.changing_calls()
