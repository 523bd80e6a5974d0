"""seatkit/campaign/analysis.py: effects that cannot be a number are named, not computed."""

from __future__ import annotations


def _run_of(arms, visits, design=None):
    """A finished campaign's journal, as the analysis reads it."""
    from types import SimpleNamespace

    records = [
        {
            "type": "measured",
            "visit": i,
            "arm": name,
            "run": f"runs/{i}",
            "figures": {"code": {"ms_per_step": ms, "tokens_per_step": 3.0}},
        }
        for i, (name, ms) in enumerate(visits)
    ]
    return SimpleNamespace(
        arms={a.name: a for a in arms},
        id="x",
        campaign=SimpleNamespace(design=design, name="x"),
        of=lambda kind, visit=None: [r for r in records if r["type"] == kind],
    )


def test_an_effect_whose_reference_arm_was_skipped_is_confounded_not_a_number():
    """One-at-a-time with its reference arm skipped (not in force): the IOMMU and P2P arms alone
    cannot give either effect, and least squares' answer (+96 %, +211 %) must not be printed."""
    from seatkit.campaign import analysis
    from seatkit.campaign.spec import Arm

    arms = [Arm(name="none", host=[]), Arm(name="iommu", host=["iommu"]), Arm(name="p2p", host=["p2p"])]
    report = analysis.report(_run_of(arms, [("iommu", 12.0), ("p2p", 19.0)] * 3, "one-at-a-time"))
    assert [e["effect_pct"] for e in report["effects"]] == [None, None]
    assert "confounded" in report["verdict"] and "%" not in report["verdict"]
    # with the reference there, the same fit gives both effects
    full = analysis.report(
        _run_of(
            arms,
            [("none", 20.0), ("iommu", 12.0), ("p2p", 19.0), ("p2p", 19.2), ("iommu", 12.1), ("none", 20.1)],
            "one-at-a-time",
        )
    )
    assert round(full["effects"][0]["effect_pct"]) == -40 and full["effects"][0]["uncertainty_pct"]
