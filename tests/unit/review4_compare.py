"""review4: compare's table carries the short mark (`code UNVERIFIED`, what_runs.marked short=True,
whose docstring says "the reason is printed above the table"), but neither compare.markdown nor
its JSON prints the reason anywhere: an unverified side is marked, never said why."""

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
