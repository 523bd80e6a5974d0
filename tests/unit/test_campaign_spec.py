"""seatkit/campaign/spec.py: a campaign file is hostile input, its knobs of the wrong kind refused naming the
field."""

import pytest
from campaign_harness import write_campaign

from seatkit.campaign import spec as specs
from seatkit.errors import SeatError


@pytest.mark.parametrize("live", [{"gpu_power_limit_w": True}, {"gpu_power_limit_w": 0}, {"cpu_boost": 7}])
def test_a_live_knob_of_the_wrong_kind_is_refused(tmp_path, live):
    with pytest.raises(SeatError, match="arms.0.live"):
        write_campaign(tmp_path, host=None, arms=[{"name": "x", "live": live}])


def test_a_hostile_campaign_file_is_refused_fast(tmp_path):
    """A billion-laughs campaign hung `seat campaign plan` (the error message repr'd the expansion);
    a repeated key silently won; a FIFO would block the read forever."""
    import os
    import time

    lines = [
        "description: bomb",
        "seat: cpu-smoke",
        "arms: [{name: x, profile: cpu-smoke}]",
        'a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]',
    ]
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 9)]
    (tmp_path / "bomb.yaml").write_text("\n".join(lines + ["suites: *a8"]) + "\n")
    began = time.monotonic()
    with pytest.raises(SeatError, match="aliases"):
        specs.load(str(tmp_path / "bomb.yaml"))
    assert time.monotonic() - began < 5
    (tmp_path / "twice.yaml").write_text(
        "description: x\nseat: cpu-smoke\nsuites: [code]\n"
        "arms: [{name: a, profile: cpu-smoke}]\nrepeats: 1\nrepeats: 20\n"
    )
    with pytest.raises(SeatError, match="duplicate key"):
        specs.load(str(tmp_path / "twice.yaml"))
    os.mkfifo(tmp_path / "pipe.yaml")
    with pytest.raises(SeatError, match="not a regular file"):
        specs.load(str(tmp_path / "pipe.yaml"))
