"""seatkit/bench/compare.py: the table marks a side UNVERIFIED (the short mark), and the reason
is said beside it, in every format (review4: it was said in none)."""

import json
from pathlib import Path

from click.testing import CliRunner
from conftest import run_dir

from seatkit.bench import compare
from seatkit.cli.bench_compare import bench_compare_cmd

WHY = "PYTHONPATH onto a patched scheduler"


def runs(tmp_path, marked: str) -> tuple[str, str]:
    """Two runs of one model, the one named marked ("a" or "b") with WHY."""
    sides = {
        "a": run_dir(tmp_path, "a", "m", 10.0, 2.0, 200.0),
        "b": run_dir(tmp_path, "b", "m", 11.0, 2.0, 180.0),
    }
    summary = Path(sides[marked]) / "summary.json"
    data = json.loads(summary.read_text())
    data["conditions"]["provenance"] = {"differs": [WHY]}
    summary.write_text(json.dumps(data))
    return sides["a"], sides["b"]


def test_compare_names_why_a_side_is_unverified(tmp_path):
    result = compare.compare(*runs(tmp_path, "a"))
    text = compare.markdown(result)
    assert "code UNVERIFIED" in text and WHY in text  # the mark, and its reason
    assert compare.unverified_lines(result) == [f"A UNVERIFIED: {WHY}"]
    assert json.loads(compare.as_json(result))["unverified"] == {"A": WHY}


def test_the_table_names_why_a_side_is_unverified(tmp_path):
    done = CliRunner().invoke(bench_compare_cmd, list(runs(tmp_path, "b")))
    assert f"B UNVERIFIED: {WHY}" in done.output, done.output
