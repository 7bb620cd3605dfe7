"""Every fixtures/<case>/ directory: diagnose its job.log (with the config and overrides its expected.yaml
names) and compare with what expected.yaml says."""

from __future__ import annotations

import pytest
import yaml

from offloaddoctor.scanning.ranks import format_ranks
from offloaddoctor.api import diagnose
from offloaddoctor.config.dialect import parse_fix_line

from tests.conftest import FIXTURES

CASES = sorted(p.parent for p in FIXTURES.glob("*/expected.yaml"))


def test_there_is_a_fixture_for_every_public_signature(catalog):
    from tests.catalog.test_signature_examples import REQUIRED_IDS

    covered = set()
    for case in CASES:
        expected = yaml.safe_load((case / "expected.yaml").read_text())
        covered.update(expected.get("ids", []))
    assert REQUIRED_IDS <= covered, sorted(REQUIRED_IDS - covered)


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_fixture(case, catalog):
    expected = yaml.safe_load((case / "expected.yaml").read_text())
    assert (case / "SOURCE.md").exists(), "every fixture says where its text came from"
    configs = [str((case / c).resolve()) for c in expected.get("config", [])]
    report = diagnose([str(case / "job.log")], configs, expected.get("sets", []), catalog=catalog)
    ids = [f.id for f in report.findings]
    assert ids == expected.get("ids", []), ids
    if "first" in expected:
        first = report.findings[0]
        assert first.id == expected["first"]["id"]
        assert first.config.verdict == expected["first"]["verdict"]
    if "ranks" in expected:
        assert format_ranks(report.findings[0].ranks) == expected["ranks"]
    if expected.get("unmatched"):
        assert report.unmatched is not None and expected["unmatched"] in report.unmatched.text
    else:
        assert report.unmatched is None, report.unmatched
    assert (1 if report.has_errors else 0) == expected["exit_code"]
    for override in expected.get("overrides", []):  # written as Bridge overrides: compared as changes (any dialect)
        assert all(change in report.findings[0].changes for change in parse_fix_line(override)), override
