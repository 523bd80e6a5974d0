"""Durable before done, under a write-loss model: a power cut drops every write to /boot that was
not synced (the boot tools never sync; seatkit's own writes are fsynced), then recover runs."""

import os

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


class Disk:
    """What of /boot would survive a power cut: updated by syncfs, and by seatkit's fsynced writes."""

    def __init__(self, host, monkeypatch):
        self.host, self.durable = host, {}
        self.sync()
        monkeypatch.setattr(host_system, "syncfs", lambda folder: self.sync(), raising=False)
        write, remove = System.write, System.remove

        def written(system, path, data, mode=0o644):
            write(system, path, data, mode)
            self.keep(path)

        def removed(system, path):
            remove(system, path)
            self.keep(path)

        monkeypatch.setattr(System, "write", written)
        monkeypatch.setattr(System, "remove", removed)

    def files(self):
        boot = self.host.root / "boot"
        return {str(p.relative_to(self.host.root)): p.read_bytes() for p in boot.rglob("*") if p.is_file()}

    def sync(self):
        self.durable = self.files()

    def keep(self, path):
        p = self.host.path(path)
        if path.startswith("/boot/"):
            if p.is_file():
                self.durable[path.lstrip("/")] = p.read_bytes()
            else:
                self.durable.pop(path.lstrip("/"), None)

    def power_cut(self):
        for name in set(self.files()) - set(self.durable):
            os.unlink(self.host.root / name)
        for name, data in self.durable.items():
            (self.host.root / name).parent.mkdir(parents=True, exist_ok=True)
            (self.host.root / name).write_bytes(data)


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
def test_a_power_cut_anywhere_in_rollback_or_after_it_never_leaves_the_change_booting(
    tmp_path, stack, monkeypatch
):
    failures = []
    for point in range(1, points(stack, tmp_path) + 2):  # the last one: after rollback returned
        host = FakeHost(tmp_path / f"cut-{point}", stack)
        change.apply(host_plan.build(host_profiles.load("paper"), host.system, ACK), host.system)
        with monkeypatch.context() as patch:
            disk = Disk(host, patch)
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
    monkeypatch.setattr(host_system, "_fsync_dir", lambda folder: synced.append(folder))
    System(root=tmp_path).write("/var/lib/seatkit/host/backups/tx/before/etc/x.conf", b"x")
    assert {
        tmp_path / "var/lib",
        tmp_path / "var/lib/seatkit",
        tmp_path / "var/lib/seatkit/host",
        tmp_path / "var/lib/seatkit/host/backups/tx/before",
    } <= set(synced)
