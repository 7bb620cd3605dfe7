"""A large log takes another road (literal cover, GNU grep on two halves, iteration lines skipped before
decoding); every fixture must give the same report on it as on the small-file road."""

from __future__ import annotations

import pytest

from offloaddoctor.api import diagnose
from offloaddoctor.logs import candidates, grep_prefilter
from offloaddoctor.render.json_report import report_to_dict

from .conftest import FIXTURES

LOGS = sorted(p for p in FIXTURES.rglob("*.log") if p.stat().st_size > 0)


def _report(path, catalog) -> dict:
    report = report_to_dict(diagnose([str(path)], catalog=catalog))
    report.pop("tool", None)
    return report


@pytest.mark.skipif(grep_prefilter.gnu_grep() is None, reason="needs GNU grep")
@pytest.mark.parametrize("log", LOGS, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_the_large_file_road_gives_the_same_report(log, catalog, monkeypatch):
    small = _report(log, catalog)
    monkeypatch.setattr(candidates, "GREP_MIN_BYTES", 0)
    monkeypatch.setattr(candidates, "COVER_MIN_BYTES", 0)
    monkeypatch.setattr(grep_prefilter, "SPLIT_MIN_BYTES", 0)
    monkeypatch.setattr(grep_prefilter, "_cores", lambda: 2)
    assert _report(log, catalog) == small
