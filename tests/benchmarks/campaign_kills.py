"""The kill sweep in full: a hundred seeded kills of a one-arm campaign on the simulated host
(tests/unit/campaign_harness.py), each at a seeded kill point and recovered in a seeded way (abort,
a power cut's reboot, or resume). Each must leave the host byte-identical, with no host transaction
open; together they must reach more than twenty kill points, inside the bench and at the reboot, and
every recovery. CI kills once per recovery (tests/unit/test_campaign_runner.py). Prints the count and
what failed; exits 1 on any failure. Usage:
    .venv/bin/python tests/benchmarks/campaign_kills.py [KILLS]
"""

import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))

from campaign_harness import RECOVERIES, kill_plan, killed_and_recovered  # noqa: E402

from seatkit.campaign import picture  # noqa: E402


def main(kills: int) -> int:
    picture.draw = lambda *args: None  # a second per kill; the plot is not what is tested
    started, failures = time.monotonic(), []
    where: set[str] = set()
    recoveries = dict.fromkeys(RECOVERIES, 0)
    with tempfile.TemporaryDirectory() as tmp:
        plan, total = kill_plan(Path(tmp))
        for seed in range(kills):
            rng = random.Random(seed)
            at = rng.randint(1, total)
            recovery = rng.choice(RECOVERIES)
            recoveries[recovery] += 1
            try:
                where.add(killed_and_recovered(plan, Path(tmp) / f"k{seed}", at, recovery))
            except AssertionError as exc:
                failures.append(f"seed {seed} (point {at}, {recovery}): {exc}")
    spread = [
        f"{len(where)} kill points reached (more than 20 wanted)" if len(where) <= 20 else "",
        "no kill inside the bench" if not any("inside the bench" in w for w in where) else "",
        "no kill at a reboot" if not any("reboot" in w for w in where) else "",
        *(f"no {r} recovery" for r, n in recoveries.items() if n == 0),
    ]
    failures += [s for s in spread if s]
    print(
        f"kills: {kills} of {total} kill points; {len(where)} points reached; {time.monotonic() - started:.0f} s"
    )
    print("recoveries: " + ", ".join(f"{r} {n}" for r, n in recoveries.items()))
    for line in failures:
        print(f"  FAIL {line}")
    print("PASS" if not failures else "FAIL")
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 100))
