from __future__ import annotations

import ast
import functools
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from offloaddoctor.api import load_catalog

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "fixtures"


class UncaughtRunner(CliRunner):
    """The CLI in tests: an exception escaping a command is raised in the test, not turned into exit code 1
    (our "findings" code) with no traceback, which a test asserting `exit_code in (0, 1)` would pass."""

    def invoke(self, *args, **kwargs):
        kwargs.setdefault("catch_exceptions", False)
        return super().invoke(*args, **kwargs)


RUNNER = UncaughtRunner()


def run_python(code: str, check: bool = True, cwd=None) -> subprocess.CompletedProcess:
    """`code` in a fresh interpreter importing this tree's offloaddoctor: for what loads at start-up."""
    return subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": str(REPO / "src")},
        capture_output=True,
        text=True,
        check=check,
        cwd=cwd,
    )


@pytest.fixture
def cli():
    """`cli.invoke(app, [...])`: see UncaughtRunner."""
    return RUNNER


@pytest.fixture
def command_line(capsys, monkeypatch):
    """`offloaddoctor ARGV` in this process: run_typer, what the installed command's main() runs once it has
    set up the standard streams (usage errors, help and exit codes are run_typer's). A CompletedProcess, as
    subprocess.run gives for the installed command."""
    from offloaddoctor.cli import run_typer

    monkeypatch.setenv("COLUMNS", "100")

    def run(*argv: str) -> subprocess.CompletedProcess:
        capsys.readouterr()
        code = run_typer(list(argv))
        captured = capsys.readouterr()
        return subprocess.CompletedProcess(list(argv), code, captured.out, captured.err)

    return run


def pytest_configure(config):
    """Tests never write to the user's ~/.cache; the cache itself is exercised in test_catalog_cache.py. Set
    before collection (each xdist worker runs this too): test modules load the catalogue at import."""
    directory = tempfile.mkdtemp(prefix="offloaddoctor-cache-")
    config.add_cleanup(functools.partial(shutil.rmtree, directory, ignore_errors=True))
    os.environ["OFFLOADDOCTOR_CACHE_DIR"] = directory
    # pytest-xdist's mark, known here too when it is not loaded (`pytest -p no:xdist`)
    config.addinivalue_line("markers", "xdist_group(name): run in one worker under --dist loadgroup")


@functools.cache
def builtin_catalog():
    """The built-in catalogue, loaded once a process (a frozen Catalog of frozen signatures): for tests of what
    is done with it, not of loading it. Loading it writes the private cache above, so a CLI run in a child
    process started after it reads the catalogue from JSON, not YAML."""
    return load_catalog()


@pytest.fixture(scope="session")
def catalog():
    return builtin_catalog()


EVERY_FIXTURE = pytest.mark.xdist_group("every-fixture")
"""For tests that read diagnosed_alone: `make test` (--dist loadgroup) runs them in one worker, which diagnoses
each fixture once for all of them; elsewhere each process diagnoses it at most once."""


@functools.cache
def diagnosed_alone(log: str):
    """`diagnose([log], policy=Policy())` with the built-in catalogue, once a process: the report several files
    check every fixture's against (~45 ms a fixture). Read it, never change it."""
    from offloaddoctor.api import diagnose
    from offloaddoctor.policy import Policy

    return diagnose([log], policy=Policy(), catalog=builtin_catalog())


EVERY_LOG = pytest.mark.xdist_group("every-log")
"""For tests that compare a road's report over every fixture log with every_log_report()'s: one worker, one diagnosis."""


@functools.cache
def every_log_report() -> str:
    """`diagnose` of every non-empty fixtures/**/*.log together, as JSON, once a process: the report two
    reading roads (hyperscan or not; steady records kept or stood in for) must each give."""
    from offloaddoctor.api import diagnose
    from offloaddoctor.render.json_report import render_json

    logs = sorted(str(p) for p in FIXTURES.rglob("*.log") if p.stat().st_size > 0)
    return render_json(diagnose(logs, catalog=builtin_catalog()))


def parsed_source(path: Path) -> ast.Module:
    """ast.parse of a Python file, once a process for as long as the file is unchanged: the architecture checks
    each walk every module of src/ (~0.4 s a pass). Shared: walk it, never change it."""
    stat = path.stat()
    return _parsed_source(str(path), stat.st_mtime_ns, stat.st_size)


@functools.cache
def _parsed_source(path: str, mtime_ns: int, size: int) -> ast.Module:
    return ast.parse(Path(path).read_text(encoding="utf-8"))


@functools.cache
def schema_validator(name: str):
    """A validator of docs/NAME (a JSON schema), the schema itself checked once a process: jsonschema.validate
    checks the schema again on every call (~70 ms for the signature schema). `.validate(instance)` raises on
    an invalid instance, as jsonschema.validate does."""
    import json

    import jsonschema

    schema = json.loads((REPO / "docs" / name).read_text())
    validator = jsonschema.validators.validator_for(schema)
    validator.check_schema(schema)
    return validator(schema)


@functools.cache
def _estimated_fixture(path: str):
    from offloaddoctor.api import estimate

    return estimate([path], catalog=builtin_catalog())


def estimate_run(paths: list[str], **options):
    """api.estimate with the built-in catalogue loaded once (loading it is not what these tests are about). A
    recorded log's own estimate (one file under fixtures/, no options) is made once a process: several tests
    of tests/memory read each run's. Read it, never change it."""
    if len(paths) == 1 and not options and Path(paths[0]).resolve().is_relative_to(FIXTURES):
        return _estimated_fixture(paths[0])
    from offloaddoctor.api import estimate

    return estimate(paths, catalog=builtin_catalog(), **options)
