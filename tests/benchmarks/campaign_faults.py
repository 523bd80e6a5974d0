"""The fault loop in full: every fault kind (GPU lost, /var read-only, the campaign folder removed,
update-grub failing on the operator's syntax error, the unit edited) at every fault point of every
arm's boot of a three-arm, two-repeat campaign on the simulated host (tests/unit/campaign_harness.py).
Each must end with the host in its normal entry, no host transaction open, the kit's boot files gone
and the report written. Prints the count and what failed; exits 1 on any failure. Usage:
    .venv/bin/python tests/benchmarks/campaign_faults.py
"""

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))

from campaign_harness import (  # noqa: E402
    FAULTS,
    CampaignHost,
    fault_points,
    faulted,
    left_in_an_arm,
    read_only_var,
    write_campaign,
)

from seatkit.campaign import picture  # noqa: E402
from seatkit.campaign import plan as campaign_plan  # noqa: E402


def main() -> int:
    picture.draw = lambda *args: None  # a second per fault; the plot is not what is tested
    read_only_var(setattr)
    with tempfile.TemporaryDirectory() as tmp:
        campaign = write_campaign(
            Path(tmp),
            repeats=2,
            arms=[
                {"name": "none", "host": []},
                {"name": "p2p", "host": ["p2p"]},
                {"name": "hmm", "host": ["hmm"]},
            ],
        )
        plan = campaign_plan.build(campaign, CampaignHost(Path(tmp) / "plan").system)
        points = fault_points(plan, Path(tmp) / "count")
        started, failures, count = time.monotonic(), [], 0
        for kind in FAULTS:
            for at in range(1, points + 1):
                host, point, folder = faulted(plan, Path(tmp) / f"{count}", kind, at)
                problems = left_in_an_arm(host, folder) if point else ["the fault never fired"]
                count += 1
                if problems:
                    failures.append(f"{kind} at {point or at}: {'; '.join(problems)}")
            print(f"{kind:<22} {points} fault points done", flush=True)
    print(f"faults injected: {count} ({len(FAULTS)} kinds x {points} points in the arms' boots)")
    print(f"left the host wrong: {len(failures)}; {time.monotonic() - started:.0f} s")
    for line in failures:
        print(f"  FAIL {line}")
    print("PASS" if not failures and count >= 200 else "FAIL")
    return 0 if not failures and count >= 200 else 1


if __name__ == "__main__":
    sys.exit(main())
