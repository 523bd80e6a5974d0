"""seatkit/bench/compare.py: the table marks a side UNVERIFIED (the short mark), and the reason
is said beside it, in every format (review4: it was said in none)."""

import json
from pathlib import Path

from conftest import run_dir

from seatkit.bench import compare

WHY = "PYTHONPATH onto a patched scheduler"


def test_compare_names_why_a_side_is_unverified(tmp_path):
    a = run_dir(tmp_path, "a", "m", 10.0, 2.0, 200.0)
    b = run_dir(tmp_path, "b", "m", 11.0, 2.0, 180.0)
    summary = Path(a) / "summary.json"
    data = json.loads(summary.read_text())
    data["conditions"]["unverified"] = WHY
    summary.write_text(json.dumps(data))
    result = compare.compare(a, b)
    text = compare.markdown(result)
    assert "code UNVERIFIED" in text  # the mark is there
    assert WHY in text, "the reason is printed nowhere"
    assert compare.unverified_lines(result) == [f"A UNVERIFIED: {WHY}"]
    assert json.loads(compare.as_json(result))["unverified"] == {"A": WHY}


def test_the_table_names_why_a_side_is_unverified(tmp_path):
    from click.testing import CliRunner

    from seatkit.cli.bench_compare import bench_compare_cmd

    a = run_dir(tmp_path, "a", "m", 10.0, 2.0, 200.0)
    b = run_dir(tmp_path, "b", "m", 11.0, 2.0, 180.0)
    summary = Path(b) / "summary.json"
    data = json.loads(summary.read_text())
    data["conditions"]["unverified"] = WHY
    summary.write_text(json.dumps(data))
    done = CliRunner().invoke(bench_compare_cmd, [a, b])
    assert f"B UNVERIFIED: {WHY}" in done.output, done.output
