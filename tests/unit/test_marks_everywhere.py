# ruff: noqa: F811  (experiment_seat: the fixture of test_unverified, taken by name)
"""Every number of an UNVERIFIED seat carries the mark, past summary and report too: the concurrency
sweep's tables (terminal and report.md), every plot's title, and a campaign's report (its arms
table, its effects, its verdict, its plot). Each printed the seat's numbers unmarked."""

import io
import json
from types import SimpleNamespace

from conftest import prose
from rich.console import Console
from test_unverified import REASON, experiment_seat  # noqa: F401

from seatkit.bench import plots, report, run, sweep
from seatkit.bench.target import Options
from seatkit.campaign import analysis, visit
from seatkit.campaign.spec import Arm
from seatkit.cli import bench_run
from seatkit.doctor import targets
from seatkit.seat import what_runs

MARK = f"UNVERIFIED ({REASON})"


def test_a_sweep_of_an_experiment_seat_marks_its_tables_report_and_plot(
    experiment_seat, tmp_path, monkeypatch
):
    target = targets.of_profile("exp")
    target.verify = None  # the seat's identity check wants a session leader; this test is none
    out = run.RunDir(tmp_path / "runs", "exp")
    summary = sweep.sweep(target, prose(), Options(0, 1), [1, 2], out)
    assert what_runs.mark(summary["conditions"]) == REASON
    text = (out.path / "report.md").read_text()
    assert text.splitlines()[0].endswith(MARK)
    assert "| 1 UNVERIFIED |" in text and "| 2 UNVERIFIED |" in text
    (suite,) = summary["suites"].values()
    assert [r[0] for r in report.sweep_rows(suite, summary["conditions"])] == ["1 UNVERIFIED", "2 UNVERIFIED"]
    assert plots.title(summary["conditions"], summary["suites"]).splitlines()[0].endswith(" UNVERIFIED")
    shown = io.StringIO()
    monkeypatch.setattr(bench_run, "out", Console(file=shown, width=200))
    bench_run.print_sweep(summary, out.path)
    assert MARK in shown.getvalue() and "1 UNVERIFIED" in shown.getvalue()


def test_a_bench_plot_title_is_marked(experiment_seat, tmp_path):
    target = targets.of_profile("exp")
    target.verify = None
    summary = run.bench(target, prose(), Options(0, 1), run.RunDir(tmp_path / "runs", "exp"))
    assert plots.title(summary["conditions"], summary["suites"]).splitlines()[0].endswith(" UNVERIFIED")
    clean = {**summary["conditions"], "provenance": {"differs": []}}
    assert "UNVERIFIED" not in plots.title(clean, summary["suites"])


def campaign(unverified: dict):
    """A finished campaign of two arms, three visits each, as the analysis reads its journal."""
    arms = [Arm(name="none", host=[]), Arm(name="iommu", host=["iommu"])]
    records = [
        {
            "type": "measured",
            "visit": i,
            "arm": name,
            "run": f"runs/{i}",
            "figures": {"code": {"ms_per_step": ms + i / 100, "tokens_per_step": 3.0}},
            "unverified": unverified.get(name),
        }
        for i, (name, ms) in enumerate([("none", 20.0), ("iommu", 12.0)] * 3)
    ]
    return SimpleNamespace(
        arms={a.name: a for a in arms},
        id="x",
        campaign=SimpleNamespace(design="one-at-a-time", name="c"),
        of=lambda kind, visit=None: [r for r in records if r["type"] == kind],
    )


def test_a_campaign_report_marks_the_arm_its_effects_the_verdict_and_its_plot(tmp_path, monkeypatch):
    from matplotlib.axes import Axes

    titles = []
    real = Axes.set_title
    monkeypatch.setattr(
        Axes, "set_title", lambda ax, text, *a, **k: titles.append(text) or real(ax, text, *a, **k)
    )
    result = analysis.write(campaign({"iommu": REASON}), tmp_path)
    assert titles == ["ms/step per arm UNVERIFIED", "effect of each setting UNVERIFIED"]
    table = result["table"].splitlines()
    assert next(line for line in table if line.startswith("iommu")).startswith("iommu UNVERIFIED")
    assert next(line for line in table if line.startswith("none")).split()[1] == "3"  # unmarked
    assert any(line.startswith("effect on ms/step UNVERIFIED") for line in table)
    assert result["verdict"].endswith(f"UNVERIFIED (arm iommu: {REASON})")
    assert result["unverified"] == f"arm iommu: {REASON}"
    text = (tmp_path / "report.md").read_text()
    assert text.splitlines()[0] == f"# Campaign c (x) UNVERIFIED (arm iommu: {REASON})"
    assert json.loads((tmp_path / "report.json").read_text())["unverified"] == f"arm iommu: {REASON}"
    clean = analysis.report(campaign({}))
    assert "UNVERIFIED" not in clean["table"] + clean["verdict"] and "unverified" not in clean


def test_a_visit_journals_the_mark_of_its_run(tmp_path):
    summary = {
        "conditions": {"provenance": {"differs": [REASON]}},
        "suites": {"code": {"ms_per_step": {"median": 9.0}}},
    }
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    assert visit._measured(tmp_path) == {
        "figures": {"code": {"ms_per_step": 9.0, "tokens_per_step": None}},
        "unverified": REASON,
    }
    (tmp_path / "summary.json").write_text(json.dumps({**summary, "conditions": {}}))
    assert visit._measured(tmp_path)["unverified"] is None


def test_the_demos_side_by_side_is_marked(monkeypatch, tmp_path):
    from seatkit.cli import demo as demo_cli

    monkeypatch.setattr(
        demo_cli.demo, "side_by_side", lambda summary, path: ([("tok/s", "1", "2", "", "")], "Code wins.")
    )
    shown = io.StringIO()
    monkeypatch.setattr(demo_cli, "out", Console(file=shown, width=200))
    demo_cli.print_side_by_side({"conditions": {"provenance": {"differs": [REASON]}}, "suites": {}}, tmp_path)
    assert "tok/s gap UNVERIFIED" in shown.getvalue() and f"Code wins. {MARK}" in shown.getvalue()
