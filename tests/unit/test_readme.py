"""README.md: a newcomer's page. At most 150 lines, every page it sends the reader to is there, and
the demo output it shows is what `seat demo` prints for the run it came from
(tests/fixtures/demo-run/, a real `make demo` on a shared 2-core machine), rendered again here."""

import io
import json
import re

from conftest import REPO
from rich.console import Console

from seatkit.cli import demo as demo_cli

README = REPO / "README.md"
RUN = REPO / "tests" / "fixtures" / "demo-run"
# Pages other engineers write at the same time: linked from here, checked where they are written.
WRITTEN_ELSEWHERE = {"docs/threat-model.md", "docs/draft-length.md"}


def test_the_readme_is_a_page_a_newcomer_reads_in_five_minutes():
    lines = README.read_text().splitlines()
    assert len(lines) <= 150, len(lines)
    text = "\n".join(lines)
    for command in ("make demo", "make test"):
        assert f"\n{command} " in text
    for command in (
        "seat up",
        "seat status",
        "seat bench run",
        "seat bench compare",
        "seat doctor",
        "seat down",
    ):
        assert f"| `{command} " in text, command
    # The exit-code rule, in one place a newcomer reads.
    said = " ".join(text.split())
    assert "**0** done, or already so" in said and "**1** a check failed" in said and "**2** refused" in said


def test_every_page_the_readme_links_is_there():
    links = re.findall(r"\]\(([^)#]+)\)", README.read_text())
    assert "docs/real-rig.md" in links and "docs/factor-split.png" in links
    for link in links:
        if link not in WRITTEN_ELSEWHERE:
            assert (REPO / link).is_file(), link


def test_the_demo_output_in_the_readme_is_what_the_demo_prints_for_that_run(monkeypatch):
    summary = json.loads((RUN / "summary.json").read_text())
    buffer = io.StringIO()
    monkeypatch.setattr(demo_cli, "out", Console(file=buffer, width=80))
    demo_cli.print_side_by_side(summary, RUN)
    printed = [line.rstrip() for line in buffer.getvalue().splitlines()]
    table = "\n".join(line for line in printed if line.startswith(("┏", "┃", "┡", "│", "└")))
    text = README.read_text()
    block = text[text.index("<!-- demo output") :].split("```")[1]
    assert table in block, (
        "README's demo output is stale: paste the table printed for tests/fixtures/demo-run"
    )
    assert printed[0].strip() in block  # its title
    assert max(map(len, printed[:-1])) <= 80
