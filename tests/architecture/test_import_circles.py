"""No import circles between the modules of offloaddoctor, inside a package or across packages. As in
tests/architecture/test_layers.py, every import counts: at module level, inside a function, under TYPE_CHECKING.

There are none: a new one fails."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import parsed_source

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "offloaddoctor"


def module_name(path: Path, package: Path) -> str:
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Module -> the modules of the package it imports. `from a.b import c` is an edge to a.b.c when c is a
    module, else to a.b (the module or the package's __init__ that defines c)."""
    paths = {module_name(path, package): path for path in sorted(package.rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for module, path in paths.items():
        targets: set[str] = set()
        for node in ast.walk(parsed_source(path)):
            if isinstance(node, ast.Import):
                targets |= {alias.name for alias in node.names if alias.name in paths}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    here = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
                    base = ".".join([*here[: len(here) - node.level + 1], *([base] if base else [])])
                for alias in node.names:
                    if f"{base}.{alias.name}" in paths:
                        targets.add(f"{base}.{alias.name}")
                    elif base in paths:
                        targets.add(base)
        graph[module] = targets - {module}
    return graph


def circles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph.get(target, ())))))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
    return sorted(found, key=sorted)


def _shown(found: list[frozenset[str]]) -> list[str]:
    return [" ↔ ".join(sorted(circle)) for circle in found]


def test_no_import_circles():
    """The last circles (issue 28.4: advice ↔ engine ↔ memory_advice ↔ preflight, run_facts ↔ scanner, cli ↔
    cli.common) are gone: the report takes its advice as a function, the scan's result and the slowdown curves
    have modules of their own, StdoutWriteError lives in errors."""
    assert _shown(circles(import_graph())) == []


def test_the_graph_sees_circles_through_function_imports_and_packages(tmp_path):
    package = tmp_path / "offloaddoctor"
    (package / "analysis").mkdir(parents=True)
    (package / "analysis" / "__init__.py").write_text("")
    (package / "analysis" / "scanner.py").write_text("from offloaddoctor.analysis.run_facts import facts\n")
    (package / "analysis" / "run_facts.py").write_text(
        "def facts():\n    from offloaddoctor.analysis import scanner\n    return scanner\n"
    )
    (package / "analysis" / "engine.py").write_text("from . import scanner\n")  # one way only: no circle
    (package / "cli").mkdir()
    (package / "cli" / "__init__.py").write_text("def app():\n    from offloaddoctor.cli import common\n")
    (package / "cli" / "common.py").write_text("from offloaddoctor.cli import StdoutWriteError\n")
    graph = import_graph(package)
    assert graph["offloaddoctor.analysis.engine"] == {"offloaddoctor.analysis.scanner"}
    assert _shown(circles(graph)) == [
        "offloaddoctor.analysis.run_facts ↔ offloaddoctor.analysis.scanner",
        "offloaddoctor.cli ↔ offloaddoctor.cli.common",
    ]
