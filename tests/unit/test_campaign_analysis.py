"""seatkit/campaign/analysis.py on journals made by a test oracle with known effects
(campaign_oracle): each figure says which effect it is and is judged by its own arms' spread."""

from __future__ import annotations

import random

import pytest
from campaign_oracle import journal, truth

from seatkit.campaign import analysis, effects, picture

PAPER = ["iommu", "p2p", "hmm"]
# IOMMU off -40 %; the P2P keys help 10 % only where the IOMMU is off; HMM off nothing
INTERACTING = {("iommu",): -0.40, ("iommu", "p2p"): -0.10}


def _by(report: dict, kind: str) -> dict:
    return {(e["setting"], e["at"]): e for e in report["effects"] if e["kind"] == kind}


def test_the_analysis_recovers_main_effects_and_an_interaction_and_says_which_is_which():
    run = journal("factorial", PAPER, INTERACTING, repeats=3, noise=0.005, rng=random.Random(7))
    report = analysis.report(run)
    main, crossed = _by(report, "main"), _by(report, "interaction")
    for s in PAPER:
        e, true = main[(s, "")], truth(INTERACTING, PAPER, s)
        assert e["low_pct"] <= true <= e["high_pct"], (s, true, e)
    for a, b in [("iommu", "p2p"), ("iommu", "hmm"), ("p2p", "hmm")]:
        e = next(x for (name, _), x in crossed.items() if name == f"{a}×{b}")
        true = truth(INTERACTING, PAPER, a, b)
        assert e["low_pct"] <= true <= e["high_pct"], (a, b, true, e)
    assert (
        main[("iommu", "")]["claimed"] and main[("p2p", "")]["claimed"] and not main[("hmm", "")]["claimed"]
    )
    assert round(truth(INTERACTING, PAPER, "p2p"), 1) == -5.1  # averaged: half of the 10 %
    p2p_crossed = next(x for (name, _), x in crossed.items() if name == "iommu×p2p")
    assert p2p_crossed["claimed"] and -11 < p2p_crossed["effect_pct"] < -9
    # the claimed interaction is followed by its simple effects: where it helps and where not
    simple = _by(report, "simple")
    where_off, where_on = simple[("p2p", "IOMMU off in force")], simple[("p2p", "IOMMU off not in force")]
    assert where_off["low_pct"] <= -10 <= where_off["high_pct"] and where_off["claimed"]
    assert where_on["low_pct"] <= 0 <= where_on["high_pct"] and not where_on["claimed"]
    said, table = report["verdict"], report["table"]
    assert said.startswith("Main effects (each averaged over the other settings' levels): IOMMU off carries")
    assert (
        "Interactions (one's effect where the other is in force, over where not): IOMMU off × the P2P keys carries"
        in said
    )
    assert "the P2P keys, IOMMU off in force" in said and "the P2P keys, IOMMU off in force" in table
    assert "main effects (each averaged" in table and all(len(line) <= 80 for line in table.splitlines())


def test_one_at_a_time_figures_are_simple_effects_added_to_the_reference():
    run = journal("one-at-a-time", PAPER, INTERACTING, repeats=3, noise=0.005, rng=random.Random(3))
    report = analysis.report(run)
    kinds = {e["kind"] for e in report["effects"]}
    assert kinds == {"simple"}, kinds
    p2p = _by(report, "simple")[("p2p", "added to none")]
    assert p2p["low_pct"] <= 0 <= p2p["high_pct"]  # no help with the IOMMU on, which is what was measured
    assert (
        "Simple effects (one setting, the others as named): IOMMU off, added to none carries"
        in report["verdict"]
    )


def test_a_setting_the_firmware_held_is_never_changed_and_gets_no_effect():
    """The firmware had the IOMMU off: every visit reads it off live, whatever its arm asks."""
    run = journal("factorial", PAPER, INTERACTING, repeats=2, firmware_iommu_off=True, rng=random.Random(1))
    report = analysis.report(run)
    iommu = [e for e in report["effects"] if "iommu" in e["setting"]]
    assert [e["kind"] for e in iommu] == ["none"] and iommu[0]["effect_pct"] is None
    assert (
        "IOMMU off: never changed (in force on every visit, also where the arm leaves it out"
        in report["verdict"]
    )
    assert "IOMMU off carries" not in report["verdict"] and "IOMMU off within" not in report["verdict"]
    assert {e["setting"] for e in report["effects"] if e["kind"] == "main"} == {"p2p", "hmm"}
    # measured where IOMMU off was live, the P2P keys' -10 % is what they do there
    p2p = _by(report, "main")[("p2p", "")]
    assert p2p["low_pct"] <= -10 <= p2p["high_pct"] and p2p["claimed"]
    arms = {a["arm"]: a for a in report["arms"]}
    assert arms["none"]["live"] == "iommu" and "none ran iommu;" in report["table"]


def test_a_visit_missing_a_suite_is_named_and_left_out():
    """Prose is 22 % slower than code: a visit of the HMM arm with code alone would read -10 %."""
    run = journal(
        "one-at-a-time", PAPER, {}, repeats=3, noise=0.005, missing={3: "prose"}, rng=random.Random(2)
    )
    report = analysis.report(run)
    assert report["left_out"] == [{"visit": 3, "arm": "hmm", "why": "no usable ms/step for prose"}]
    assert "Left out of the estimate: visit 4 (hmm: no usable ms/step for prose)" in report["verdict"]
    hmm = next(a for a in report["arms"] if a["arm"] == "hmm")
    assert hmm["visits"] == 2 and hmm["left_out"] == 1 and "1 left out" in report["table"]
    e = _by(report, "simple")[("hmm", "added to none")]
    assert e["low_pct"] <= 0 <= e["high_pct"] and not e["claimed"]


def test_one_noisy_arm_makes_no_false_claim_in_null_campaigns():
    """No effect anywhere, the full set's arm five times noisier than the others: a seeded
    Monte-Carlo of the paper's factorial (tests/benchmarks/campaign_false_claims.py runs 1,000)."""
    rng, claims, n = random.Random(11), 0, 120
    for _ in range(n):
        run = journal("factorial", PAPER, {}, repeats=2, noisy={"iommu+p2p+hmm": 0.05}, rng=rng)
        claims += any(e["claimed"] for e in analysis.report(run)["effects"])
    assert claims / n <= 0.05, claims


def test_one_visit_per_arm_has_an_unknown_spread_said_and_drawn_as_unknown(tmp_path, monkeypatch):
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    run = journal("one-at-a-time", PAPER, INTERACTING, repeats=1, noise=0.0)
    report = analysis.report(run)
    assert all(e["claimed"] is None and e["low_pct"] is None for e in report["effects"])
    assert (
        "IOMMU off, added to none -40.0 % (spread unknown: one visit of iommu, none; repeat the arms)"
        in report["verdict"]
    )
    assert "carries" not in report["verdict"] and "within noise" not in report["verdict"]
    assert "unknown" in report["table"]
    bars, words = [], []
    monkeypatch.setattr(Axes, "errorbar", lambda ax, *a, **k: bars.append(a))
    real = Axes.annotate
    monkeypatch.setattr(
        Axes, "annotate", lambda ax, text, *a, **k: words.append(text) or real(ax, text, *a, **k)
    )
    real_text = Figure.text
    monkeypatch.setattr(
        Figure, "text", lambda fig, x, y, s, *a, **k: words.append(s) or real_text(fig, x, y, s, *a, **k)
    )
    picture.draw({**report, "simulated": "a test oracle"}, tmp_path / "plot.png")
    assert bars == [] and words.count("spread unknown") == 3 and "SIMULATED" in words
    assert (tmp_path / "plot.png").read_bytes()[:4] == b"\x89PNG"


def test_an_effect_whose_reference_arm_gave_nothing_is_not_a_number():
    """One-at-a-time without its reference arm: the IOMMU and P2P arms alone cannot give either
    effect, and least squares' answer would be printed as one."""
    run = journal(  # the reference arm's visits (0, 3, 6) gave no code figure
        "one-at-a-time", ["iommu", "p2p"], INTERACTING, repeats=3, missing={0: "code", 3: "code", 6: "code"}
    )
    report = analysis.report(run)
    assert [e["effect_pct"] for e in report["effects"]] == [None, None]
    assert report["verdict"].count("no two live states differ in it alone") == 2
    assert "IOMMU off carries" not in report["verdict"]


def test_the_tables_fit_80_columns_and_the_verdict_is_their_intervals():
    run = journal("factorial", PAPER, INTERACTING, repeats=2, rng=random.Random(5))
    report = analysis.report(run)
    long = {
        **report["arms"][0],
        "arm": "a-very-long-arm-name-that-goes-on",
        "ms_max": 123456.0,
        "tps_alarm": "x",
    }
    text = analysis.table([long, *report["arms"][1:]], report["effects"])
    assert all(len(line) <= 80 for line in text.splitlines()) and "a-very-long-arm-" in text
    for e in report["effects"]:
        if e["claimed"] is not None:
            assert e["claimed"] == (e["low_pct"] > 0 or e["high_pct"] < 0)
            said = f"{effects.name(e)} within noise ({e['effect_pct']:+.1f} %"
            assert (said in report["verdict"]) == (not e["claimed"]), (said, report["verdict"])
    alarmed = analysis.verdict(report["effects"], [long], [], {})
    assert "ALARM: tokens/step moved in a-very-long-arm-name-that-goes-on" in alarmed


@pytest.mark.parametrize(
    ("p", "df", "table"), [(0.975, 1, 12.706), (0.975, 2, 4.303), (0.995, 3, 5.841), (0.975, 30, 2.042)]
)
def test_the_t_quantile_matches_the_tables(p, df, table):
    assert effects.t_quantile(p, df) == pytest.approx(table, abs=1e-3)


def test_a_stopped_campaigns_report_is_written_from_its_journal_marked_incomplete(tmp_path):
    from campaign_harness import CampaignHost, FastDriver, start, write_campaign

    from seatkit.campaign import runner
    from seatkit.campaign.folder import Run

    host = CampaignHost(tmp_path / "root")
    folder = start(
        host, write_campaign(tmp_path, repeats=2, design="one-at-a-time", settings=["iommu", "hmm"])
    )
    assert runner.step(host.system, FastDriver(host)) == "rebooting"
    host.boot()
    host.run_unit(FastDriver(host))  # the first visit benched, the next armed
    Run(host.system, folder).add({"type": "aborted", "why": "seat campaign abort"})  # as abort journals it
    where = host.system.path(folder)
    for written in where.glob("report.*"):
        written.unlink()
    analysis.write(Run(host.system, folder), where)  # as `seat campaign report` renders it again
    paths = [where / "report.json", where / "report.md", where / "plot.png"]
    assert all(p.exists() for p in paths)
    title = paths[1].read_text().splitlines()[0]
    assert "INCOMPLETE (1 of 6 visits; aborted: seat campaign abort)" in title
    assert "SIMULATED (the host was a fake root, its reboots done by a test)" in title
    result = __import__("json").loads(paths[0].read_text())
    assert result["verdict"].startswith("SIMULATED (") and "INCOMPLETE (1 of 6 visits" in result["verdict"]
    assert "IOMMU off: never changed (not in force on every visit)" in result["verdict"]  # one arm so far
