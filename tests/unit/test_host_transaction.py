"""Real SIGKILLs at seeded points of apply, rollback and recover on every boot stack, one per operation
and stack (tests/unit/host_kills.py); the full counts, every step and 52 seeded kills a stack, run in
tests/benchmarks/host_kills.py. Run with -s to see the figures."""

from __future__ import annotations

import pytest
from host_kills import STACKS, after_a_kernel_upgrade, over_apply_rollback_and_recover

pytestmark = pytest.mark.usefixtures("no_nvml")


@pytest.mark.parametrize("stack", STACKS)
def test_seeded_sigkills_over_apply_rollback_and_recover_all_end_pristine(tmp_path, stack):
    kills, failures = over_apply_rollback_and_recover(
        tmp_path, stack, {"apply": 1, "rollback": 1, "recover": 1}, every_step=False
    )
    assert failures == []
    assert {op for op, _ in kills} >= {"apply", "rollback"}  # a recover with no step to kill is skipped


@pytest.mark.parametrize("stack", STACKS)
def test_seeded_sigkills_after_a_kernel_upgrade_end_as_the_upgrade_alone_would(tmp_path, stack):
    kills, failures = after_a_kernel_upgrade(tmp_path, stack, {"rollback": 1, "recover": 1}, every_step=False)
    assert failures == []
    assert "rollback" in {op for op, _ in kills}
