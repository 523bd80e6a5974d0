"""A hostile review of the kit's judgments (issue 35): each test is a behaviour that should hold
and, when written, did not. Figures come from the ground-truth oracle, the campaign oracle, or
summaries written as a run writes them."""

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from campaign_oracle import journal  # noqa: E402

from seatkit.campaign import analysis  # noqa: E402

PAPER = ["iommu", "p2p", "hmm"]


def test_identical_repeats_with_no_true_effect_claim_no_effect_from_float_rounding():
    """Two visits per arm that read the same ms/step (a deterministic seat, a copied figure): the
    spread is 0, and no setting has any effect. A rounding error of 1e-16 must not be 'carried'."""
    run = journal("factorial", PAPER, {}, repeats=2, noise=0.0, rng=random.Random(0))
    report = analysis.report(run)
    assert not any(e["claimed"] for e in report["effects"]), report["verdict"]
    assert "carries" not in report["verdict"], report["verdict"]
