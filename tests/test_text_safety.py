"""safe_text searches only where its patterns can match (start-up: most text compiles neither); the answer is
the one the two searches give on every text."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from offloaddoctor import text_safety
from offloaddoctor.text_safety import safe_text

_UNSAFE = re.compile(text_safety._UNSAFE._source[0])
_RUNNER_COMMAND = re.compile(text_safety._RUNNER_COMMAND._source[0])


def _searched_always(text: str) -> str:
    """safe_text as it was: both substitutions on every text."""
    shown = _UNSAFE.sub(lambda m: text_safety._escape(m.group()), text)
    return _RUNNER_COMMAND.sub(lambda m: (m.group(1) or "") + text_safety._escape(m.group()[-1]), shown)


# Each character class the patterns name, their neighbours, whitespace of every kind, and the runner openers.
_CHARACTERS = st.sampled_from(
    list(": #[ab\t\n\r\x0b\x0c\x00\x08\x1f\x7f\x80\x9f\xa0\xad\u2028\u2029\u202a\u202e\u2066\u2069\u200b\u3000\ufeff")
)


@settings(max_examples=500, deadline=None)
@given(text=st.text(_CHARACTERS, max_size=12) | st.text(max_size=12))
def test_safe_text_answers_as_both_searches(text):
    assert safe_text(text) == _searched_always(text)


def test_printable_text_compiles_neither_pattern(tmp_path):
    from tests.conftest import run_python

    probe = (
        "from offloaddoctor import text_safety\n"
        "assert text_safety.safe_text('iteration 12/ 100 | ok: a#b [x]') == 'iteration 12/ 100 | ok: a#b [x]'\n"
        "print(sorted(name for name in ('_UNSAFE', '_RUNNER_COMMAND')"
        " if '_compiled' in vars(getattr(text_safety, name))))\n"
    )
    assert run_python(probe, cwd=tmp_path).stdout == "[]\n"
