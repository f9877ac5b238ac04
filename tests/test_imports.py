"""Package boundaries a user relies on: TensorFlow stays out unless asked for, the two
libraries do not import each other or the rest of the project, the run contract imports only
the insertion points' names, and no modules of the project import each other in a circle."""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
from collections.abc import Iterator
from graphlib import CycleError, TopologicalSorter
from itertools import pairwise
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("echo", "sharing", "run_contract", "experiments", "analysis", "benchmarks")
TYPE_CHECKING = ("TYPE_CHECKING", "typing.TYPE_CHECKING")


@pytest.mark.parametrize(
    ("module", "forbidden"),
    [
        ("echo", ["tensorflow", "torch", "sharing", "experiments", "analysis"]),
        ("echo.state", ["tensorflow", "torch", "sharing", "experiments", "analysis"]),
        (
            "echo.torch",
            [
                "tensorflow",
                "torchdata",
                "lightning",
                "datasets",
                "transformers",
                "sharing",
                "experiments",
                "analysis",
            ],
        ),
        pytest.param(
            "echo.torch.nodes",
            ["tensorflow", "lightning", "datasets", "sharing", "experiments"],
            marks=pytest.mark.skipif(
                importlib.util.find_spec("torchdata") is None, reason="torchdata is not installed"
            ),
        ),
        ("sharing", ["tensorflow", "echo", "experiments", "analysis"]),
    ],
)
@pytest.mark.slow
def test_importing_a_library_pulls_in_nothing_it_should_not(module, forbidden):
    code = f"import sys, {module}; print(','.join(m for m in {forbidden!r} if m in sys.modules))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ""


def _module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement that runs, function-local ones too (not ``if TYPE_CHECKING:``)."""
    todo = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.If) and ast.unparse(node.test) in TYPE_CHECKING:
            todo.extend(node.orelse)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        else:
            todo.extend(ast.iter_child_nodes(node))


def _imported(node: ast.Import | ast.ImportFrom, package: str, modules: set[str]) -> list[str]:
    """The modules ``node`` imports: ``from x import y`` imports ``x.y`` where that is one of
    ``modules``, else ``x``; a relative import is resolved against ``package``."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        parts = package.split(".")
        anchor = parts[: len(parts) - node.level + 1]
        base = ".".join([*anchor, base] if base else anchor)
    named = [f"{base}.{alias.name}" for alias in node.names]
    return [name if name in modules else base for name in named]


def import_graph(root: Path, packages: tuple[str, ...]) -> dict[str, dict[str, str]]:
    """Module -> {a module of ``packages`` it imports: where (``path:line``)}, read statically."""
    files = {
        _module_name(path, root): path
        for package in packages
        for path in sorted((root / package).rglob("*.py"))
    }
    graph: dict[str, dict[str, str]] = {}
    for module, path in files.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        edges = graph[module] = {}
        for node in _imports(ast.parse(path.read_text(), filename=str(path))):
            for name in _imported(node, package, set(files)):
                if name in files and name != module:
                    edges.setdefault(name, f"{path.relative_to(root)}:{node.lineno}")
    return graph


def import_cycles(graph: dict[str, dict[str, str]]) -> list[str]:
    """Each circle of imports in ``graph``, as ``a (where a imports b) -> b (...) -> a``."""
    left = {module: set(edges) for module, edges in graph.items()}
    found = []
    while True:
        try:
            TopologicalSorter(left).prepare()
            return found
        except CycleError as error:
            circle = error.args[1][::-1]  # the sorter lists each module after what it imports
            arrows = [f"{a} ({graph[a][b]})" for a, b in pairwise(circle)]
            found.append(" -> ".join([*arrows, circle[0]]))
            left[circle[0]].discard(circle[1])


def test_the_run_contract_imports_nothing_that_trains_plans_or_analyses_runs():
    graph = import_graph(ROOT, PACKAGES)
    outside = {
        f"{module} imports {name} ({where})"
        for module, edges in graph.items()
        if module.split(".")[0] == "run_contract"
        for name, where in edges.items()
        if name.split(".")[0] != "run_contract" and name != "echo.points"
    }
    assert not outside


def test_no_modules_of_the_project_import_each_other_in_a_circle():
    assert import_cycles(import_graph(ROOT, PACKAGES)) == []


def test_a_circle_closed_inside_a_function_is_found_and_one_for_type_checkers_is_not(tmp_path):
    modules = {
        "__init__": "",
        "a": "from .b import f\n",
        "b": "def f():\n    from pkg import a\n",
        "c": "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from pkg.d import D\n",
        "d": "from pkg import c\n",
    }
    (tmp_path / "pkg").mkdir()
    for name, code in modules.items():
        (tmp_path / "pkg" / f"{name}.py").write_text(code)
    assert import_cycles(import_graph(tmp_path, ("pkg",))) == [
        "pkg.a (pkg/a.py:1) -> pkg.b (pkg/b.py:2) -> pkg.a"
    ]
