"""The packages depend downward: serve knows nothing of the image builder or the CLI, and the
overlay lock's format sits below both."""

import ast
from pathlib import Path

import pytest

from seatkit import paths

PACKAGE = paths.REPO / "seatkit"


def imported(path: Path) -> set[str]:
    """Every module a file imports, at any depth (function-level imports included)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return names


@pytest.mark.parametrize("path", sorted((PACKAGE / "serve").glob("*.py")), ids=lambda p: p.name)
def test_serve_does_not_import_the_image_package_or_the_cli(path):
    above = {n for n in imported(path) if n.startswith(("seatkit.image", "seatkit.cli"))}
    assert not above, f"{path.name} imports {sorted(above)}"


@pytest.mark.parametrize("name", ["overlay_lock.py", "regions.py", "engine.py"])
def test_the_shared_lower_modules_import_no_area_package(name):
    areas = {
        n
        for n in imported(PACKAGE / name)
        if n.startswith(("seatkit.serve", "seatkit.image", "seatkit.bench", "seatkit.cli"))
    }
    assert not areas


def test_the_checker_sees_a_function_level_import(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from seatkit.image import build\n")
    assert "seatkit.image.build" in imported(probe)
