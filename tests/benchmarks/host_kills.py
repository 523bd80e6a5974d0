"""The host transaction's kill sweeps in full (tests/unit/host_kills.py): on every boot stack, every
step of apply and rollback once, then seeded points, 52 SIGKILLs a stack over apply, rollback and the
recover of a cut apply, and 52 over the rollback of a change a kernel upgrade has since taken. Each
must end pristine (or as the upgrade alone leaves it). CI kills once per operation and stack
(tests/unit/test_host_transaction.py). Prints the figures and what failed; exits 1 on any failure.
Usage (root: the fake host keeps owners and xattrs):
    .venv/bin/python tests/benchmarks/host_kills.py [STACK ...]
"""

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))

from host_kills import STACKS, after_a_kernel_upgrade, over_apply_rollback_and_recover  # noqa: E402

from seatkit.host import gpus  # noqa: E402

KILLS = {"apply": 25, "rollback": 15, "recover": 12}  # per stack: 52, 208 in all
UPGRADE_KILLS = {"rollback": 32, "recover": 20}  # per stack: 52, 208 in all


def main(stacks: list[str]) -> int:
    gpus.inventory = lambda system=None: None  # the fake host's files are judged, not this machine
    started, failures, count = time.monotonic(), [], 0
    with tempfile.TemporaryDirectory() as tmp:
        for stack in stacks:
            for sweep, counts, least in (
                (over_apply_rollback_and_recover, KILLS, 45),
                (after_a_kernel_upgrade, UPGRADE_KILLS, 50),
            ):
                kills, failed = sweep(Path(tmp) / f"{stack}-{sweep.__name__}", stack, counts, every_step=True)
                count += len(kills)
                failures += [f"{stack} {sweep.__name__}: {f}" for f in failed]
                if len(kills) < least:
                    failures.append(f"{stack} {sweep.__name__}: {len(kills)} kills, fewer than {least}")
    print(f"SIGKILLs: {count} on {len(stacks)} stacks; {time.monotonic() - started:.0f} s")
    for line in failures:
        print(f"  FAIL {line}")
    print("PASS" if not failures else "FAIL")
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or STACKS))
