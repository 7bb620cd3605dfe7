"""lazy_compile stands in for re.compile at module level: same answers, compiled on first use only."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from offloaddoctor.scanning import scanner
from offloaddoctor.config import from_log
from offloaddoctor.lazy_pattern import LazyPattern, lazy_compile
from offloaddoctor.logs import normalize
from offloaddoctor.metrics import iteration_lines as iterations

PATTERNS = [
    (r"\biteration\s+(\d+)\s*/\s*(\d+)\s*\|", 0),
    (r"(?P<key>\w+)=(?P<value>[^,]*)", 0),
    (r"rank[-_.]?(\d{1,6})", re.IGNORECASE),
    (r"^(\s*):(?=:)|#(?=#\[)", re.MULTILINE),
    (r"x*", 0),
]
TEXT = st.text(st.sampled_from("iteration 12/ 100|rank_7 RANK-3 key=val,x=::##[ \n"), max_size=40)


@settings(max_examples=200, deadline=None)
@given(index=st.integers(0, len(PATTERNS) - 1), text=TEXT)
def test_every_method_answers_as_the_compiled_pattern(index, text):
    source, flags = PATTERNS[index]
    lazy, compiled = lazy_compile(source, flags), re.compile(source, flags)

    def shown(match):
        return None if match is None else (match.span(), match.groups(), match.groupdict())

    assert shown(lazy.search(text)) == shown(compiled.search(text))
    assert shown(lazy.match(text)) == shown(compiled.match(text))
    assert shown(lazy.fullmatch(text)) == shown(compiled.fullmatch(text))
    assert lazy.findall(text) == compiled.findall(text)
    assert [shown(m) for m in lazy.finditer(text)] == [shown(m) for m in compiled.finditer(text)]
    assert lazy.sub("<\\g<0>>", text) == compiled.sub("<\\g<0>>", text)
    assert lazy.subn("", text) == compiled.subn("", text)
    assert lazy.split(text) == compiled.split(text)
    assert (lazy.pattern, lazy.flags, lazy.groups, lazy.groupindex) == (
        compiled.pattern,
        compiled.flags,
        compiled.groups,
        compiled.groupindex,
    )


def test_compiled_on_first_use_and_then_its_own_methods():
    lazy = lazy_compile(r"(a)+")
    assert "_compiled" not in vars(lazy)
    assert lazy.search("baa").group(0) == "aa"
    assert vars(lazy)["search"] == vars(lazy)["_compiled"].search  # later calls skip __getattr__
    assert repr(lazy) == "lazy_compile('(a)+', 0)"


def test_a_bad_pattern_fails_on_first_use_with_re_error():
    lazy = lazy_compile("(unclosed")
    with pytest.raises(re.error):
        lazy.search("x")


def test_module_patterns_on_the_diagnose_path_are_lazy():
    for pattern in (iterations._ITERATION, scanner._ERROR_LINE, from_log._ARGS_START, normalize._ANSI):
        assert isinstance(pattern, LazyPattern)
