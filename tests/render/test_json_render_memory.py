"""`--format json` is rendered in pieces (200,000 rank logs: docs/performance.md); the text must be exactly
what encoding the whole document at once gives."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from offloaddoctor.report.findings import SourceSummary
from offloaddoctor.api import diagnose
from offloaddoctor.policy import Policy
from offloaddoctor.render import json_report
from offloaddoctor.text_safety import inert_json

from tests.conftest import FIXTURES

# Containers of at most 4 items, at most 30 leaves: unbounded ones drew past max_leaves in most examples and
# hypothesis drew them again (15 s for 200 examples, 7 times this); the documents are as deep and as long
# (median ~29 lines, a nested list or dict in most), and JOIN_CHUNKS = 3 puts batch boundaries all through them.
VALUES = st.recursive(
    st.none() | st.booleans() | st.floats() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=30,
)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(), VALUES, max_size=6))
def test_indented_in_batches_is_json_dumps(document):
    expected = json.dumps(document, indent=2, ensure_ascii=False, default=str)
    original = json_report.JOIN_CHUNKS, json_report.SPLICE_MIN_ITEMS, json_report.JOIN_ITEMS
    try:
        json_report.JOIN_CHUNKS = 3  # many batches, and a batch boundary anywhere
        assert "".join(json_report._indented_parts(document)) == expected
        json_report.SPLICE_MIN_ITEMS = 1  # every list of strings written out into its place, two items a batch
        json_report.JOIN_ITEMS = 2
        assert "".join(json_report._indented_parts(document)) == expected
    finally:
        json_report.JOIN_CHUNKS, json_report.SPLICE_MIN_ITEMS, json_report.JOIN_ITEMS = original


@pytest.mark.parametrize("sources", [0, 1, 7])
def test_sources_encoded_in_batches_give_the_document_encoded_at_once(monkeypatch, sources):
    report = diagnose([str(FIXTURES / "oom-fragmentation-multirank" / "job.log")], policy=Policy())
    # Paths that need escaping, and more entries than one batch holds.
    extra = [SourceSummary(f'rank{i}\n"##[x]"\u2028\u00e9.log', i) for i in range(sources)]
    report.sources = [*report.sources, *extra] if sources else []
    monkeypatch.setattr(json_report, "JOIN_ITEMS", 2)
    monkeypatch.setattr(json_report, "JOIN_CHUNKS", 5)
    monkeypatch.setattr(json_report, "TAIL_PART_CHARS", 7)  # the rest of the document in many parts
    monkeypatch.setattr(json_report, "SPLICE_MIN_ITEMS", 1)  # and a finding's files written out, in batches
    whole = inert_json(json.dumps(json_report.report_to_dict(report), indent=2, ensure_ascii=False, default=str)) + "\n"
    assert json_report.render_json(report) == whole


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.text(), st.integers(0, 10**12)), max_size=6),
    st.lists(st.tuples(st.text(), st.lists(st.integers(0, 5), max_size=4)), max_size=3),
)
def test_the_written_out_source_list_is_what_json_writes(sources, findings):
    """The sources' entries are written out, not encoded: any path, count and finding ids give json's text."""
    from types import SimpleNamespace

    report = SimpleNamespace(
        sources=[SourceSummary(path, lines) for path, lines in sources],
        findings=[
            SimpleNamespace(id=name, files=[sources[i][0] for i in at if i < len(sources)]) for name, at in findings
        ],
    )
    listed = list(json_report._source_entries(report))
    expected = json.dumps({"sources": listed}, indent=2, ensure_ascii=False)
    expected = expected[expected.index("[") : expected.rindex("]") + 1]
    assert "".join(json_report._source_list(report)) == inert_json(expected)


@given(
    st.text(alphabet=st.sampled_from(["a", "#", "[", "\x7f", "\x85", "\u2028", "\u202e", "é", '"', "\\"]), max_size=30)
)
def test_inert_json_skips_its_search_only_where_it_would_change_nothing(text):
    from offloaddoctor import text_safety

    every_time = text_safety._UNSAFE_IN_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", text).replace("##[", "#\\u0023[")
    assert inert_json(text) == every_time
