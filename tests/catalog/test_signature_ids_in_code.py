"""Signature ids that Python depends on (`finding.id == "optimizer-offload-slowdown"`) are tested names: renaming
the YAML without the code fails here, not silently in a user's report (the advice would just stop coming)."""

from __future__ import annotations

import ast
from pathlib import Path

import offloaddoctor
from offloaddoctor.catalog.loader import builtin_signature_dir

from tests.conftest import parsed_source

SOURCE = Path(offloaddoctor.__file__).parent


def _is_id(node: ast.AST) -> bool:
    """`x.id`, `signature_id`, `self.signature_id`: what a signature id is compared with."""
    name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""
    return name == "id" or name.endswith("_id")


def _strings(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [s for element in node.elts for s in _strings(element)]
    return []


def ids_compared_in_code() -> dict[str, str]:
    """Every string compared with a signature id anywhere in src/ -> where."""
    found: dict[str, str] = {}
    for path in sorted(SOURCE.rglob("*.py")):
        for node in ast.walk(parsed_source(path)):
            if isinstance(node, ast.Compare):
                operands = [node.left, *node.comparators]
                if any(_is_id(operand) for operand in operands):
                    for operand in operands:
                        for text in _strings(operand):
                            found[text] = f"{path.relative_to(SOURCE)}:{node.lineno}"
    return found


def unknown_ids(catalogue: set[str]) -> list[str]:
    return [f"{where}: {text!r}" for text, where in ids_compared_in_code().items() if text not in catalogue]


CATALOGUE = {path.stem for path in builtin_signature_dir().glob("*.yaml")}


def test_every_signature_id_the_code_compares_with_is_in_the_catalogue():
    assert unknown_ids(CATALOGUE) == []


def test_the_check_sees_the_ids_the_code_depends_on_and_fails_on_a_rename():
    compared = ids_compared_in_code()
    assert {"optimizer-offload-slowdown", "memory-exceeds-capacity"} <= set(compared)
    renamed = CATALOGUE - {"memory-exceeds-capacity"} | {"memory-over-capacity"}
    assert [line.split(": ")[1] for line in unknown_ids(renamed)] == ["'memory-exceeds-capacity'"]


def test_a_signature_file_is_named_by_its_id():
    """The catalogue above is read from file names: each file's `id` is its name."""
    import yaml

    for path in builtin_signature_dir().glob("*.yaml"):
        assert yaml.safe_load(path.read_text(encoding="utf-8"))["id"] == path.stem, path
