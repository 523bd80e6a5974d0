"""The paper's campaign (campaigns/paper.yaml, full factorial), simulated end to end: a fake root
whose reboots are GRUB's one-shot boots done by the test harness, and the ground-truth oracle as the
seat (a TEST ORACLE: its step time is set by the fake host's live state, IOMMU off -40 %, P2P keys
-5 %, HMM 0, 1 % noise per boot; tokens/step constant). It prints the campaign's table and verdict
and copies its plot. Usage:
    .venv/bin/python tests/benchmarks/campaign_simulated.py [PNG]
"""

import json
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))

from campaign_harness import CampaignHost, OracleDriver, drive  # noqa: E402

from seatkit.campaign import plan as campaign_plan  # noqa: E402
from seatkit.campaign import runner
from seatkit.campaign import spec as specs


def main() -> None:
    paper = specs.load("paper")
    # Fewer prompts and tokens than the real seat needs: the oracle's numbers do not need them.
    campaign = paper.model_copy(
        update={"suites": ["code"], "bench": specs.Bench(warmups=0, repeats=3, max_tokens=31)}
    )
    with tempfile.TemporaryDirectory() as tmp:
        host = CampaignHost(Path(tmp) / "root")
        pristine = host.files()
        plan = campaign_plan.build(campaign, host.system, acknowledge_iommu_off=True)
        folder = runner.start(plan, host.system, "/usr/local/bin/seat", str(host.root))
        drive(host, OracleDriver(host, seed=42))
        result = json.loads(host.path(f"{folder}/report.json").read_text())
        print(result["table"])
        print(result["verdict"])
        print(
            f"\n{len(result['visits'])} benches, {plan.reboots} simulated reboots; host byte-identical "
            f"after: {host.files() == pristine}"
        )
        if len(sys.argv) > 1:
            shutil.copy(host.path(f"{folder}/plot.png"), sys.argv[1])


if __name__ == "__main__":
    main()
