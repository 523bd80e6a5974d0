"""The shape of the code, checked by tools rather than by review: the layer contract in
pyproject.toml (import-linter), no import cycle between modules, and modules and functions short
enough to read in one sitting."""

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

from seatkit import paths

PACKAGE = paths.REPO / "seatkit"
MODULE_LINES = 350
FUNCTION_LINES = 60


def _lint_imports() -> str:
    found = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    if not found:
        pytest.fail("lint-imports is missing: it comes with the test extras (pip install -e '.[test]')")
    return found


def test_the_layer_contract_holds():
    done = subprocess.run(
        [_lint_imports(), "--no-cache"], cwd=paths.REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_contract_catches_an_upward_import(tmp_path):
    """The contract is real: a copy of the tree with one import upward breaks it."""
    copy = tmp_path / "repo"
    shutil.copytree(PACKAGE, copy / "seatkit", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(paths.REPO / "pyproject.toml", copy)
    upward = copy / "seatkit" / "seat" / "upward.py"
    upward.write_text('"""Planted."""\n\nfrom seatkit.cli import app  # noqa: F401\n')
    env = {"PYTHONPATH": str(copy), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [_lint_imports(), "--no-cache"], cwd=copy, capture_output=True, text=True, timeout=120, env=env
    )
    assert done.returncode != 0 and "seatkit.seat.upward -> seatkit.cli" in done.stdout


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for other in graph.find_modules_directly_imported_by(module):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            group = []
            while True:
                top = stack.pop()
                group.append(top)
                if top == module:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return groups


def test_no_module_imports_itself_through_others():
    graph = grimp.build_graph("seatkit")
    # A package's __init__ is not a module of its own here: importing seatkit.x.y runs it anyway.
    for module in list(graph.modules):
        if graph.find_children(module):
            for imported in graph.find_modules_directly_imported_by(module):
                graph.remove_import(importer=module, imported=imported)
    assert _cycles(graph) == []


def test_the_cycle_finder_sees_a_cycle():
    graph = grimp.ImportGraph()
    for name in ("p", "p.a", "p.b", "p.c"):
        graph.add_module(name)
    graph.add_import(importer="p.a", imported="p.b")
    graph.add_import(importer="p.b", imported="p.a")
    graph.add_import(importer="p.c", imported="p.a")
    assert _cycles(graph) == [["p.a", "p.b"]]


def _sources() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", _sources(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_modules_and_functions_stay_short(path):
    lines = path.read_text().count("\n")
    assert lines <= MODULE_LINES, f"{path.name} has {lines} lines: split it by job"
    long = [
        f"{node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno - node.lineno + 1 > FUNCTION_LINES
    ]
    assert not long, f"{path.name}: {', '.join(long)}"
