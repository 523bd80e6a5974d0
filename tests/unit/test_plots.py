"""The run's plots as a reader sees them: overlapping series both visible, rates from 0, and no plot
that is one vertical strip of points."""

import subprocess
import sys

import pytest

from seatkit.bench import figure, plots


def records(drafted):
    return [
        {
            "suite": suite,
            "prompt": f"{suite}-1",
            "factors": {
                "decode_tok_s": 690.0 + i,
                "drafted_length": d,
                "ms_per_step": 4.0 + 0.1 * i,
                "prompt_tokens": 80 + 20 * i,
                "ttft_ms": 30.0 + i,
            },
        }
        for i, (suite, d) in enumerate((s, d) for s in ("code", "prose") for d in drafted)
    ]


def summary(recs):
    same = [0.99, 0.98, 0.97]  # one curve for both suites: the code line under the prose line
    return {
        "conditions": {"model": "tiny", "k": 3},
        "suites": {
            s: {"content": s, "context": 0, "acceptance_by_position": same} for s in ("code", "prose")
        },
        "fits": plots.fits(recs),
    }


@pytest.fixture
def drawn(monkeypatch):
    """Each figure's axes as they are when saved."""
    seen = {}
    save = figure.save

    def keep(fig, path):
        seen[path.name] = fig.axes
        return save(fig, path)

    monkeypatch.setattr(figure, "save", keep)
    return seen


def test_identical_acceptance_curves_both_show_on_an_axis_from_0(tmp_path, drawn):
    recs = records([2.0, 2.5, 3.0])
    plots.draw(recs, summary(recs), tmp_path)
    ax = drawn["acceptance_by_position.png"][0]
    lines = ax.get_lines()
    assert len(lines) == 2 and lines[0].get_marker() != lines[1].get_marker()
    assert lines[0].get_markersize() > lines[1].get_markersize()  # the one beneath is the larger
    assert lines[0].get_linestyle() != lines[1].get_linestyle()
    assert ax.get_ylim()[0] == 0
    assert drawn["tok_s_by_prompt.png"][0].get_xlim()[0] == 0


def test_a_vertical_strip_is_not_drawn_nor_fitted(tmp_path, drawn):
    recs = records([5.0, 5.0, 5.0])  # every step drafted k: ms/step against drafted length is a strip
    result = summary(recs)
    assert result["fits"]["ms_per_step_vs_drafted_tokens"] is None
    paths = plots.draw(recs, result, tmp_path)
    assert not (tmp_path / "ms_per_step_vs_drafted.png").exists()
    assert tmp_path / "ttft_vs_prompt_tokens.png" in paths  # prompt lengths do spread
    spread = records([2.0, 3.5, 5.0])
    assert (tmp_path / "ms_per_step_vs_drafted.png") in plots.draw(spread, summary(spread), tmp_path)


def test_seat_help_does_not_import_matplotlib():
    probe = (
        "import sys; from click.testing import CliRunner; from seatkit.cli.app import seat; "
        "CliRunner().invoke(seat, ['--help']); print('matplotlib' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "False", done.stderr


def test_a_fit_line_says_its_units(tmp_path, drawn):
    """'22.97 + 0.0299 x' left the reader to guess what x and the figures were."""
    recs = records([2.0, 3.5, 5.0])
    plots.draw(recs, summary(recs), tmp_path)
    (ttft,) = drawn["ttft_vs_prompt_tokens.png"]
    label = ttft.get_legend().get_texts()[0].get_text()
    assert label.startswith("fit: ") and label.endswith(" ms per prompt token") and " ms + " in label
    (step,) = drawn["ms_per_step_vs_drafted.png"]
    assert step.get_legend().get_texts()[0].get_text().endswith(" ms per drafted token")


def split_summary(recs):
    def stats(values):
        return {"median": sorted(values)[len(values) // 2], "min": min(values), "max": max(values)}

    suites = {}
    for s in ("code", "prose"):
        f = [r["factors"] for r in recs if r["suite"] == s]
        suites[s] = {
            "content": s,
            "context": 0,
            "acceptance_by_position": [],
            "ms_per_step": stats([x["ms_per_step"] for x in f]),
            "tokens_per_step": stats([x["tokens_per_step"] for x in f]),
        }
    return {"conditions": {"model": "tiny", "k": 3}, "suites": suites, "fits": plots.fits(recs)}


def split_records():
    """Code keeps three tokens a step, prose one, at the same 120 ms: two prompts a suite."""
    return [
        {
            "suite": s,
            "prompt": f"{s}-{p}",
            "factors": {"ms_per_step": 120.0 + r, "tokens_per_step": tau + 0.3 * p, "decode_tok_s": 0.0},
        }
        for s, tau in (("code", 3.0), ("prose", 1.0))
        for p in range(2)
        for r in range(3)
    ]


def test_the_factor_split_puts_code_and_prose_on_one_step_line_at_different_tokens_per_step(tmp_path, drawn):
    recs = split_records()
    assert tmp_path / "factor_split.png" in plots.draw(recs, split_summary(recs), tmp_path)
    ax = drawn["factor_split.png"][0]
    suites = {c.get_label().split(":")[0]: c for c in ax.containers}
    (code_x,), (code_y,) = suites["code"].lines[0].get_data()
    (prose_x,), (prose_y,) = suites["prose"].lines[0].get_data()
    assert code_x == prose_x == 121.0 and code_y > 2 * prose_y
    # One dot per prompt where a suite has several, each at its prompt's median over repeats.
    dots = sorted(
        tuple(map(float, xy)) for c in ax.collections if len(c.get_offsets()) == 2 for xy in c.get_offsets()
    )
    assert (121.0, 1.0) in dots and (121.0, 3.3) in dots
    # Lines of equal tok/s through the origin, labelled with their rate.
    labels = [t.get_text() for t in ax.texts]
    assert any(label.endswith(" tok/s") for label in labels)
    for line in ax.get_lines():
        xs, ys = line.get_data()
        if len(xs) == 2 and xs[0] == 0:
            rate = 1000 * ys[1] / xs[1]
            assert f"{rate:g} tok/s" in labels
    assert ax.get_xlim()[0] == 0 and ax.get_ylim()[0] == 0


def test_a_run_without_both_factors_says_so_on_its_factor_split(tmp_path, drawn):
    recs = records([2.0, 2.5, 3.0])
    plots.draw(recs, summary(recs), tmp_path)
    ax = drawn["factor_split.png"][0]
    assert [t.get_text() for t in ax.texts] == ["no suite has both factors (see report.md)"]
