"""A profile-arm campaign on the real vLLM CPU seat, no reboot: ngram k=3 against k=5, each arm
started with `seat up`'s launch, benched into an ordinary run folder, stopped; then the report."""

from __future__ import annotations

import json
import os

from conftest import free_port

from seatkit.bench import compare
from seatkit.campaign import plan as campaign_plan
from seatkit.campaign import runner
from seatkit.campaign import spec as specs
from seatkit.campaign.folder import current
from seatkit.campaign.seat import SeatDriver
from seatkit.host.system import System


def test_profile_arms_on_the_cpu_seat(vllm_runtime, tmp_path, monkeypatch):
    monkeypatch.setenv("SEAT_PORT", str(free_port()))
    cpu = specs.load("cpu-ngram-k")
    campaign = cpu.model_copy(
        update={"repeats": 1, "bench": specs.Bench(warmups=0, repeats=2, max_tokens=24)}
    )
    system = System(root=tmp_path / "root")  # no host change: the campaign's folder lives here
    plan = campaign_plan.build(campaign, system)
    assert plan.reboots == 0 and plan.refusals == []
    folder = runner.start(plan, system, "seat")
    assert runner.step(system, SeatDriver()) == "done"
    result = json.loads(system.path(f"{folder}/report.json").read_text())
    arms = {a["arm"]: a for a in result["arms"]}
    assert arms["k3"]["visits"] == arms["k5"]["visits"] == 1
    assert all(a["ms_median"] > 0 and a["tps_median"] >= 1 for a in arms.values())
    assert [e["setting"] for e in result["effects"]] == ["k5"]  # against the first arm
    runs = sorted(system.path(f"{folder}/runs").iterdir())
    summaries = [json.loads((r / "summary.json").read_text()) for r in runs]
    assert sorted(s["conditions"]["k"] for s in summaries) == [3, 5]  # the real seats, as launched
    assert compare.compare(str(runs[0]), str(runs[1]), force=True)
    assert system.path(f"{folder}/plot.png").read_bytes()[:4] == b"\x89PNG"
    assert current(system) is None and os.environ["SEAT_PORT"]
