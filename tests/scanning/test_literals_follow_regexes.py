"""A literal that gates a regex (the line pass and grep hand a handler only lines holding one of its literals) must
occur in every string the regex matches: otherwise lines the regex reads are never shown to it. Kept in step by
hand before; now each pair is property-tested with hypothesis `from_regex`. It found one: `[Rank 0] memory(MB) |`
matched the memory-report pattern but not its literal " memory (": the pattern now requires the literal."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from offloaddoctor.scanning import failure_lines
from offloaddoctor.metrics import memory_lines, parameter_lines


def _alternatives(pattern: str) -> list[str]:
    """The top-level alternatives of a pattern without groups around its `|` (FAILURE_LINE_PATTERN's shape)."""
    return pattern.split("|")


PAIRS = [
    *(
        (literal, alternative)
        for literal, alternative in zip(
            failure_lines.FAILURE_LINE_LITERALS, _alternatives(failure_lines.FAILURE_LINE_PATTERN), strict=True
        )
    ),
    (parameter_lines.LITERAL, parameter_lines._PER_RANK.pattern),
    (parameter_lines.LITERAL, parameter_lines._BILLIONS.pattern),
    (memory_lines.LITERAL, memory_lines._REPORT.pattern),
]


@pytest.mark.parametrize(("literal", "pattern"), PAIRS, ids=[f"{p[0]!r}" for p in PAIRS])
def test_each_literal_is_in_every_string_its_regex_matches(literal, pattern):
    compiled = re.compile(pattern)

    @settings(
        max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much]
    )
    @given(st.from_regex(compiled, fullmatch=False))
    def check(text):
        found = compiled.search(text)
        assert found is not None and literal in found.group(0), (literal, pattern, text)

    check()
