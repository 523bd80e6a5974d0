"""Durable before done, under the fake host's write-loss model: a power cut drops every write that
was not synced (the boot tools never sync; seatkit's own writes are fsynced), then recover runs."""

import pytest
from fake_host import Death, FakeHost

from seatkit.host import change
from seatkit.host import plan as host_plan
from seatkit.host import system as host_system
from seatkit.host.journal import Journal
from seatkit.host.system import System
from seatkit.seat import host_profiles

ACK = host_plan.Choices(acknowledge_iommu_off=True)
STACKS = ["grub", "bls", "kernelstub", "systemd-boot"]


pytestmark = pytest.mark.usefixtures("no_nvml")


def left(host) -> list[str]:
    boot = host.root / "boot"
    return [
        str(p)
        for p in boot.rglob("*")
        if p.is_file() and (b"iommu=off" in p.read_bytes() or b"seatkit-nvidia.conf" in p.read_bytes())
    ]


def points(stack, tmp_path) -> int:
    host = FakeHost(tmp_path / "count", stack)
    change.apply(host_plan.build(host_profiles.load("paper"), host.system, ACK), host.system)
    calls = []
    host.system.fault = calls.append
    change.rollback(host.system)
    return len(calls)


@pytest.mark.parametrize("stack", STACKS)
def test_a_power_cut_anywhere_in_rollback_or_after_it_never_leaves_the_change_booting(tmp_path, stack):
    failures = []
    for point in range(1, points(stack, tmp_path) + 2):  # the last one: after rollback returned
        host = FakeHost(tmp_path / f"cut-{point}", stack)
        change.apply(host_plan.build(host_profiles.load("paper"), host.system, ACK), host.system)
        with host.write_loss() as disk:
            calls = [0]

            def fault(at, calls=calls, point=point):
                calls[0] += 1
                if calls[0] == point:
                    raise Death(at)

            host.system.fault = fault
            try:
                change.rollback(host.system)
            except Death:
                pass
            disk.power_cut()
        host.system.fault = lambda at: None
        change.recover(host.system)
        if Journal(host.system).active():  # cut before the rollback's begin record: the apply stands
            change.rollback(host.system)
        if left(host):
            failures.append((point, left(host)))
    assert failures == []


def test_a_folder_seatkit_creates_is_made_durable_in_its_parent(tmp_path, monkeypatch):
    synced = []
    monkeypatch.setattr(host_system, "fsync_dir", lambda folder: synced.append(folder))
    System(root=tmp_path).write("/var/lib/seatkit/host/backups/tx/before/etc/x.conf", b"x")
    assert {
        tmp_path / "var/lib",
        tmp_path / "var/lib/seatkit",
        tmp_path / "var/lib/seatkit/host",
        tmp_path / "var/lib/seatkit/host/backups/tx/before",
    } <= set(synced)
