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


def test_a_repeated_key_in_a_campaign_file_is_refused(tmp_path):
    """A repeated key silently won."""
    (tmp_path / "twice.yaml").write_text(
        "description: x\nseat: cpu-smoke\nsuites: [code]\n"
        "arms: [{name: a, profile: cpu-smoke}]\nrepeats: 1\nrepeats: 20\n"
    )
    with pytest.raises(SeatError, match="duplicate key"):
        specs.load(str(tmp_path / "twice.yaml"))
