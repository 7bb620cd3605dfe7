"""Patterns that can backtrack catastrophically are refused before they ever see a log.

A signature pattern is parsed with Python's own regex parser (`re._parser`; the `regex` module accepts a
superset, so a pattern it alone understands is checked by the fallback rules below) and walked: an
unbounded repeat (`*`, `+`, `{n,}`) whose body can itself repeat without bound — `(a+)+`, `(\\w*)*`,
`(?:.*x)+` — takes exponential time on a near-miss line. Such patterns are errors. A leading `.*` or
`.+` is legal but slow (it makes every search scan the line twice): a warning for `signatures lint`.
"""

from __future__ import annotations

import re

try:  # Python 3.11+
    from re import _constants as sre_constants
    from re import _parser as sre_parse
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants  # type: ignore[no-redef]
    import sre_parse  # type: ignore[no-redef]

_REPEATS = {sre_constants.MAX_REPEAT, sre_constants.MIN_REPEAT}
_POSSESSIVE = getattr(sre_constants, "POSSESSIVE_REPEAT", None)
_UNBOUNDED = sre_constants.MAXREPEAT
# Fallback for syntax only `regex` knows: a group with an unbounded quantifier inside, itself quantified.
_NESTED_TEXT = re.compile(r"\((?:[^()\\]|\\.)*(?:[*+]|\{\d*,\})(?:[^()\\]|\\.)*\)(?:[*+]|\{\d*,\})")


def catastrophic(pattern: str) -> str | None:
    """Why the pattern can backtrack catastrophically, or None."""
    try:
        tree = sre_parse.parse(pattern)
    except (re.error, OverflowError, RecursionError):
        return "nested unbounded quantifiers" if _NESTED_TEXT.search(pattern) else None
    return _walk(tree, inside_unbounded=False)


def slow_start(pattern: str) -> bool:
    return pattern.startswith((".*", ".+", "^.*", "^.+"))


def _walk(items, inside_unbounded: bool) -> str | None:
    for op, value in items:
        if op in _REPEATS or (_POSSESSIVE is not None and op == _POSSESSIVE):
            low, high, body = value
            unbounded = high == _UNBOUNDED
            if unbounded and op != _POSSESSIVE:
                if inside_unbounded:
                    return "an unbounded repeat inside another unbounded repeat (e.g. (a+)+): exponential backtracking"
                found = _walk(body, inside_unbounded=True)
            else:
                found = _walk(body, inside_unbounded)
            if found:
                return found
        elif op == sre_constants.SUBPATTERN:
            found = _walk(value[-1], inside_unbounded)
            if found:
                return found
        elif op == sre_constants.BRANCH:
            for branch in value[1]:
                found = _walk(branch, inside_unbounded)
                if found:
                    return found
        elif op in (sre_constants.ASSERT, sre_constants.ASSERT_NOT):
            found = _walk(value[1], inside_unbounded)
            if found:
                return found
    return None
