"""The packages that were `analysis/` (issue 28.4) each have a public surface: the package root exports what the
layers above use (`__all__`), each name loaded with its module on first use, and code outside the package
imports the root, never one of its modules (docs/architecture.md)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from tests.conftest import parsed_source, run_python

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "src" / "offloaddoctor"
SURFACED = ("scanning", "report", "advice")
ROOTS = (*SURFACED, "config", "catalog")  # config's and catalog's roots export what `api` uses


def _type_checking_imports(root: Path) -> dict[str, str]:
    """name -> module, from the root's `if TYPE_CHECKING:` block (what type checkers see)."""
    tree = ast.parse(root.read_text(encoding="utf-8"))
    block = next(
        node for node in tree.body if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING"
    )
    return {
        alias.name: node.module.rsplit(".", 1)[1]
        for node in block.body
        if isinstance(node, ast.ImportFrom) and node.module
        for alias in node.names
    }


@pytest.mark.parametrize("name", ROOTS)
def test_the_root_exports_each_name_from_the_module_that_defines_it(name):
    root = importlib.import_module(f"offloaddoctor.{name}")
    homes = root._HOMES
    assert sorted(root.__all__) == sorted(homes)
    assert _type_checking_imports(PACKAGE / name / "__init__.py") == homes  # type checkers see what runs
    for exported, home in homes.items():
        assert getattr(root, exported) is getattr(importlib.import_module(f"offloaddoctor.{name}.{home}"), exported)
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        root.nothing_here  # noqa: B018


def _submodule_imports(path: Path, packages: tuple[str, ...] = SURFACED) -> list[str]:
    found = []
    for node in ast.walk(parsed_source(path)):
        modules = [a.name for a in node.names] if isinstance(node, ast.Import) else []
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules = [node.module]
        found += [
            f"{node.lineno}: {m}" for m in modules if m.split(".")[:2] in (["offloaddoctor", p] for p in SURFACED)
        ]
    return [entry for entry in found if entry.split(": ")[1].count(".") > 1]


def test_code_outside_a_package_imports_its_root_not_its_modules():
    reaching_in = []
    for path in sorted(PACKAGE.rglob("*.py")):
        own = f"offloaddoctor.{path.relative_to(PACKAGE).parts[0]}."  # a package's own modules import each other
        reaching_in += [f"{path.relative_to(PACKAGE)}:{e}" for e in _submodule_imports(path) if own not in e]
    assert reaching_in == []


def test_api_imports_package_roots():
    """api.py named 32 modules, 9 of them analysis/'s; now 18, the roots of scanning, report, advice, config and
    catalog among them (logs, metrics and memory modules are still named)."""
    assert _submodule_imports(PACKAGE / "api.py", ROOTS) == []


def test_the_check_sees_a_module_reached_into(tmp_path):
    (tmp_path / "render.py").write_text(
        "from offloaddoctor.report.findings import Report\nfrom offloaddoctor.report import Finding\n"
    )
    assert _submodule_imports(tmp_path / "render.py") == ["1: offloaddoctor.report.findings"]


def test_a_root_loads_only_the_modules_of_the_names_asked_for():
    """Start-up: `check` takes RunFacts and Evidence from scanning's root, and must not load the scanner."""
    probe = (
        "import sys\n"
        "from offloaddoctor.scanning import Evidence, RunFacts\n"
        "from offloaddoctor.report import CheckReport\n"
        "print(sorted(m for m in sys.modules if m.startswith(('offloaddoctor.scanning.', 'offloaddoctor.advice'))))"
    )
    result = run_python(probe)
    loaded = set(ast.literal_eval(result.stdout))
    assert {"offloaddoctor.scanning.evidence", "offloaddoctor.scanning.run_facts"} <= loaded
    assert not loaded & {"offloaddoctor.scanning.scanner", "offloaddoctor.scanning.parallel", "offloaddoctor.advice"}
