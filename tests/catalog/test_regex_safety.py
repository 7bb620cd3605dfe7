"""User signature patterns cannot hang a scan: refused shapes at load time, a time limit per search."""

from __future__ import annotations

import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from offloaddoctor.scanning import scanner
from offloaddoctor.scanning.scanner import MAX_TIMEOUTS_PER_SIGNATURE, Matcher, Scanner
from offloaddoctor.api import load_catalog
from offloaddoctor.catalog.loader import CatalogError
from offloaddoctor.catalog.model import MatchSpec
from offloaddoctor.catalog.regex_safety import catastrophic, polynomial

SIGNATURE = """id: team-hang
title: A team signature
severity: error
priority: 10
symptom: s
cause: c
match:
  literals: ["boom"]
  patterns: ['{pattern}']
confirm: ["look"]
fix: {{summary: fix it}}
references: [{{doc: team wiki}}]
examples:
  - {{expect: match, log: "boom aaa"}}
"""


@pytest.mark.parametrize("pattern", [r"boom (a+)+$", r"boom (\w*)*x", r"boom (?:.*a)+b", r"boom (\s?a+)*z"])
def test_catastrophic_patterns_are_refused_naming_the_file(tmp_path, pattern):
    (tmp_path / "team-hang.yaml").write_text(SIGNATURE.format(pattern=pattern))
    with pytest.raises(CatalogError) as raised:
        load_catalog([tmp_path])
    message = str(raised.value)
    assert "team-hang.yaml" in message and "match.patterns[0]" in message and "unbounded repeat" in message


@pytest.mark.parametrize(
    "pattern", [r"boom (a|b)+", r"boom a+b+", r"boom (ab){2,}", r"(?P<n>\d+)\s*GiB", r"boom (a++)+"]
)
def test_ordinary_patterns_pass(pattern):
    assert catastrophic(pattern) is None
    assert polynomial(pattern) is None


@pytest.mark.parametrize("pattern", [r"(?>(a+)+b)", r"((a+){2})*", r"(?P<g>x)?(?(g)(\w*)*|y)", r"(?=(\s+a)+)"])
def test_nesting_is_found_inside_atomic_groups_conditionals_and_lookarounds(pattern):
    assert catastrophic(pattern)


@pytest.mark.parametrize("pattern,degree", [(r"(.*a){3}", 3), (r"(\d+\.){4}", 4), (r"(?:(a+){2}){5}", 10)])
def test_an_unbounded_repeat_inside_a_bounded_one_is_slow_but_not_refused(pattern, degree):
    assert catastrophic(pattern) is None
    assert f"degree {degree}" in polynomial(pattern)


def test_builtin_catalogue_has_no_refused_or_polynomial_pattern():
    for signature in load_catalog().signatures:
        for pattern in signature.match.patterns if signature.match else ():
            assert catastrophic(pattern.pattern) is None, signature.id
            assert polynomial(pattern.pattern) is None, signature.id


@given(st.text(alphabet="ab()*+?|.\\w{},1", max_size=12))
def test_the_analyser_never_raises(pattern):
    catastrophic(pattern)
    polynomial(pattern)


def test_a_slow_pattern_gives_up_on_the_line_with_a_warning():
    # The loader refuses this shape now; a pattern that still backtracks badly is given up on per line.
    slow = Matcher("slow", MatchSpec(("x",), (r"x(a|aa)*y",)))
    start = time.perf_counter()
    result = Scanner([slow]).scan_lines("job.log", ["Error x" + "a" * 60, "x aay fine"])
    assert time.perf_counter() - start < 5
    assert any("signature slow" in w and "gave up" in w for w in result.warnings)


def test_a_signature_that_keeps_timing_out_is_switched_off(monkeypatch):
    monkeypatch.setattr(scanner, "SEARCH_TIMEOUT_S", 0.02)
    slow = Matcher("slow", MatchSpec(("x",), (r"x(a|aa)*y",)))
    fine = Matcher("fine", MatchSpec(("x aay",), (r"x aay",)))
    near_miss = "Error x" + "a" * 60
    result = Scanner([slow, fine]).scan_lines("job.log", [near_miss] * 6 + ["x aay fine"])
    gave_up = [w for w in result.warnings if "signature slow" in w]
    assert len(gave_up) == MAX_TIMEOUTS_PER_SIGNATURE and "switched off" in gave_up[-1]
    assert [a.matcher_id for a in result.aggregates] == ["fine"]
