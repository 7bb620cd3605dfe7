"""tests/ mirrors src/offloaddoctor/ (issue 28, point 6): a test module lives in the folder named after the package
it tests, or in one of the theme folders; only the tests of single-module leaves stay at the top. A snapshot file
sits in `__snapshots__/` beside the test module that owns it, where syrupy looks for it."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
PACKAGE = TESTS.parent / "src" / "offloaddoctor"
THEMES = {"architecture", "properties", "hostile", "repository"}
HELPERS = {"__init__.py", "conftest.py", "git_repos.py"}


def _folders(root: Path) -> set[str]:
    return {path.name for path in root.iterdir() if path.is_dir() and not path.name.startswith(("_", "."))}


def test_every_test_folder_mirrors_a_package_or_names_a_theme():
    packages = _folders(PACKAGE)
    assert _folders(TESTS) - packages - THEMES == set()


def test_only_single_module_tests_stay_at_the_top():
    modules = {path.stem for path in PACKAGE.glob("*.py")}
    top = [path.name for path in TESTS.glob("*.py") if path.name not in HELPERS]
    assert [name for name in top if name.removeprefix("test_").removesuffix(".py") not in modules] == []


def test_every_test_folder_is_a_package():
    """Two folders may hold modules of the same name; as packages they import as tests.<folder>.<module>."""
    assert [folder for folder in _folders(TESTS) if not (TESTS / folder / "__init__.py").exists()] == []


def test_every_snapshot_file_sits_beside_its_test_module():
    snapshots = sorted(TESTS.rglob("__snapshots__/*.ambr"))
    assert snapshots
    assert [
        str(path.relative_to(TESTS)) for path in snapshots if not (path.parent.parent / f"{path.stem}.py").exists()
    ] == []
