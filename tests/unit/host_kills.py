"""Real SIGKILLs at seeded, deterministic points of apply, rollback and recover on a boot stack of the
fake host (tests/unit/fake_host.py).

A forked child runs the change and kills itself (SIGKILL: no cleanup, no finally) at the k-th
named step, including inside atomic writes and inside the regeneration tools. The parent then
runs recover and compares the whole tree (contents, folders, modes, owners, symlinks, xattrs)
with the pristine one. CI kills once per operation and stack (tests/unit/test_host_transaction.py);
the full counts run in tests/benchmarks/host_kills.py.
"""

from __future__ import annotations

import copy
import os
import random
import shutil
import signal
from pathlib import Path

from fake_host import FakeHost

from seatkit.host import change
from seatkit.host import plan as host_plan
from seatkit.host.journal import Journal
from seatkit.host.system import System
from seatkit.seat import host_profiles

STACKS = ["grub", "bls", "kernelstub", "systemd-boot"]
ACK = host_plan.Choices(acknowledge_iommu_off=True)
NEW = "6.8.0-50-generic"


def apply(host):
    return change.apply(host_plan.build(host_profiles.load("paper"), host.system, ACK), host.system)


def in_child(host, act, kill_at: int | None) -> int:
    """Run act in a forked child that SIGKILLs itself at fault call kill_at (None: count them).
    Returns the number of fault calls it made, or -1 when it was killed."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns to pytest
        os.close(read)
        calls = [0]

        def fault(at):
            calls[0] += 1
            if calls[0] == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)

        host.system.fault = fault
        try:
            act()
        finally:
            os.write(write, str(calls[0]).encode())
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        count = pipe.read()
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        assert os.WTERMSIG(status) == signal.SIGKILL
        return -1
    return int(count)


def over_apply_rollback_and_recover(tmp_path: Path, stack: str, counts: dict[str, int], every_step: bool):
    """Kill apply, rollback, and the recover of a cut apply, counts[op] times each, at seeded points
    (every step once first, when every_step), then recover: each must end pristine. Returns the
    kills made and the failures, and prints the figures."""
    rng = random.Random(f"issue-11-{stack}")
    probe = FakeHost(tmp_path / "probe", stack)
    steps = {"apply": in_child(probe, lambda: apply(probe), None)}
    apply(probe)
    steps["rollback"] = in_child(probe, lambda: change.rollback(probe.system), None)
    # every step once (inside writes and tools included) when every_step, then seeded random ones
    plan = {
        op: (
            (list(range(1, steps[op] + 1)) if every_step else [])
            + [rng.randint(1, steps[op]) for _ in range(counts[op])]
        )[: counts[op]]
        for op in ("apply", "rollback")
    }
    kills, failures, not_begun = [], [], []
    for n, op in enumerate(name for name in counts for _ in range(counts[name])):
        host = FakeHost(tmp_path / f"{op}-{n}", stack)
        pristine = host.tree()
        if op == "apply":
            point = plan["apply"].pop()
            assert in_child(host, lambda host=host: apply(host), point) == -1
        elif op == "rollback":
            apply(host)
            point = plan["rollback"].pop()
            assert in_child(host, lambda host=host: change.rollback(host.system), point) == -1
        else:  # cut an apply short, then kill the recover that undoes it
            assert in_child(host, lambda host=host: apply(host), rng.randint(1, steps["apply"])) == -1
            total = _recover_steps(host)
            if total == 0:
                continue
            point = rng.randint(1, total)
            assert in_child(host, lambda host=host: change.recover(host.system), point) == -1
        kills.append((op, point))
        change.recover(host.system)
        journal = Journal(host.system)
        if op == "rollback" and journal.active():  # killed before its begin record was whole:
            not_begun.append(point)  # nothing was undone yet, the apply stands
            change.rollback(host.system)
        if host.tree() != pristine or journal.open() or journal.active():
            diff = {k for k in set(host.tree()) | set(pristine) if host.tree().get(k) != pristine.get(k)}
            failures.append(f"{op} killed at step {point}: {sorted(diff)}")
    by_op = {op: sum(1 for o, _ in kills if o == op) for op in counts}
    print(
        f"\n{stack}: {len(kills)} SIGKILLs ({by_op}), steps per op {steps}, rollbacks killed before "
        f"they began (apply left standing, rolled back again) {len(not_begun)}, failures {failures}"
    )
    return kills, failures


def _recover_steps(host) -> int:
    """How many fault calls a recover of this host makes, counted in a child that changes nothing
    here (it runs on a copy of the tree)."""
    folder = host.root.parent / (host.root.name + "-count")
    shutil.copytree(host.root, folder, symlinks=True)
    twin = copy.copy(host)
    twin.root, twin.system = folder, System(root=folder, runner=twin.run, euid=0)
    count = in_child(twin, lambda: change.recover(twin.system), None)
    shutil.rmtree(folder)
    return count


def clone(host, folder):
    """A copy of the host's whole tree (journal and backups too) with its own fake tools."""
    shutil.copytree(host.root, folder, symlinks=True)
    twin = copy.copy(host)
    twin.root, twin.calls, twin.system = folder, [], System(root=folder, runner=twin.run, euid=0)
    return twin


def configured(host) -> dict[str, str]:
    """The tree without /proc and /sys: what is live differs between hosts (a boot id), not what boots."""
    return {k: v for k, v in host.tree().items() if not k.startswith(("proc", "sys"))}


def after_a_kernel_upgrade(tmp_path: Path, stack: str, counts: dict[str, int], every_step: bool):
    """apply, a kernel upgrade (its entry and image take the kit's change), SIGKILL anywhere in
    rollback (or in the recover of a killed rollback), counts[op] times each, then recover: the tree
    must be what the upgrade alone gives, the new kernel without the kit's change. Returns the kills
    made and the failures, and prints the figures."""
    rng = random.Random(f"issue-22-{stack}")
    alone = FakeHost(tmp_path / "alone", stack)
    alone.install_kernel(NEW)
    expected = configured(alone)
    template = FakeHost(tmp_path / "template", stack)
    apply(template)
    template.install_kernel(NEW)
    probe = clone(template, tmp_path / "probe")
    steps = in_child(probe, lambda: change.rollback(probe.system), None)
    points = (list(range(1, steps + 1)) if every_step else []) + [
        rng.randint(1, steps) for _ in range(counts["rollback"])
    ]
    kills, failures = [], []
    for n, op in enumerate(name for name in counts for _ in range(counts[name])):
        host = clone(template, tmp_path / f"{op}-{n}")
        point = points[n] if op == "rollback" else rng.randint(1, steps)
        assert in_child(host, lambda host=host: change.rollback(host.system), point) == -1
        if op == "recover":
            total = _recover_steps(host)
            if total == 0:
                continue
            point = (point, rng.randint(1, total))
            assert in_child(host, lambda host=host: change.recover(host.system), point[1]) == -1
        kills.append((op, point))
        change.recover(host.system)
        journal = Journal(host.system)
        if journal.active():  # a rollback killed before its begin record was whole: the apply stands
            change.rollback(host.system)
        if configured(host) != expected or journal.open() or journal.active():
            diff = {
                k for k in set(configured(host)) | set(expected) if configured(host).get(k) != expected.get(k)
            }
            failures.append(f"{op} killed at {point}: {sorted(diff)}")
        shutil.rmtree(host.root)
    print(f"\n{stack} after an upgrade: {len(kills)} SIGKILLs, rollback steps {steps}, failures {failures}")
    return kills, failures
