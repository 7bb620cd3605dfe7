"""The layer order written in docs/architecture.md (the repository's copy of "The layers of our house" in
../shared/conventions.md), enforced: a module imports
only from its own package or from a lower layer, never from a layer above or a sibling of its own layer.
Imports inside functions and under TYPE_CHECKING count too: they run up the layers all the same."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import parsed_source

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "offloaddoctor"

ARCHITECTURE = PACKAGE.parents[1] / "docs" / "architecture.md"


def written_order(text: str) -> tuple[tuple[str, ...], ...]:
    """The order line of docs/architecture.md: ranks top to bottom split by →, siblings by commas."""
    line = next(line for line in text.splitlines() if line.startswith("`__main__`"))
    return tuple(tuple(name.strip().strip("`") for name in rank.split(",")) for rank in line.split("→"))


LAYERS = written_order(ARCHITECTURE.read_text(encoding="utf-8"))
RANK = {name: rank for rank, names in enumerate(LAYERS) for name in names}


def part_of(module: str) -> str | None:
    """The top-level part of the package that `offloaddoctor.x.y` belongs to (x), None for other packages."""
    parts = module.split(".")
    if parts[0] != "offloaddoctor":
        return None
    return parts[1] if len(parts) > 1 else "__init__"


def imports_of(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(parsed_source(path)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "offloaddoctor":  # `from offloaddoctor import x`: x is a part, or __version__
                found += [
                    (node.lineno, f"offloaddoctor.{a.name}" if a.name in RANK else "offloaddoctor") for a in node.names
                ]
            else:
                found.append((node.lineno, node.module))
    return found


def violations(package: Path = PACKAGE) -> list[str]:
    problems = []
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package)
        own = (
            relative.parts[0].removesuffix(".py")
            if len(relative.parts) > 1 or relative.stem != "__init__"
            else "__init__"
        )
        if own not in RANK:
            problems.append(f"{relative}: not in the layer order (add it to LAYERS and conventions.md)")
            continue
        for line, module in imports_of(path):
            target = part_of(module)
            if target is None or target == own:
                continue
            if target not in RANK:
                problems.append(f"{relative}:{line}: imports {module}, which is not in the layer order")
            elif RANK[target] <= RANK[own]:
                where = "a sibling in its layer" if RANK[target] == RANK[own] else "a higher layer"
                problems.append(f"{relative}:{line}: imports {module}: {where} ({target} over {own})")
    return problems


def test_imports_follow_the_layer_order():
    assert violations() == []


def test_the_check_sees_an_upward_import_and_a_sibling_import(tmp_path):
    (tmp_path / "catalog").mkdir()
    (tmp_path / "catalog" / "loader.py").write_text("def f():\n    from offloaddoctor.scanning.fact_parsers import X\n")
    (tmp_path / "memory").mkdir()
    (tmp_path / "memory" / "model.py").write_text(
        "from offloaddoctor.metrics.model import RunMetrics\nfrom offloaddoctor.config.values import ConfigStore\n"
    )
    (tmp_path / "errors.py").write_text("from offloaddoctor import __version__\n")
    assert violations(tmp_path) == [
        "catalog/loader.py:2: imports offloaddoctor.scanning.fact_parsers: a higher layer (scanning over catalog)",
        "memory/model.py:1: imports offloaddoctor.metrics.model: a sibling in its layer (metrics over memory)",
    ]


def test_the_written_order_has_every_part_once():
    names = [name for rank in LAYERS for name in rank]
    assert len(names) == len(set(names)) and {
        "cli",
        "api",
        "advice",
        "report",
        "scanning",
        "metrics",
        "memory",
        "config",
        "logs",
    } <= set(names)
