"""Patterns that can backtrack catastrophically are refused before they ever see a log.

A signature pattern is parsed with Python's own regex parser (`re._parser`; the `regex` module accepts a
superset, so a pattern it alone understands is checked by the fallback rules below) and walked: an
unbounded repeat (`*`, `+`, `{n,}`) whose body can itself repeat without bound — `(a+)+`, `(\\w*)*`,
`(?:.*x)+` — takes exponential time on a near-miss line. Such patterns are errors. An unbounded repeat
inside a bounded one, `(.*a){3}`, is polynomial (degree 3 here, so ~L^4 steps on a near-miss line of L
characters) and a leading `.*` or `.+` makes every search scan the line twice: legal but slow, warnings for
`signatures lint`. The 0.25 s limit on each search (analysis/scanner.py) is the backstop for the rest.
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
_ATOMIC = getattr(sre_constants, "ATOMIC_GROUP", None)
# Fallback for syntax only `regex` knows: a group with an unbounded quantifier inside, itself quantified.
_NESTED_TEXT = re.compile(r"\((?:[^()\\]|\\.)*(?:[*+]|\{\d*,\})(?:[^()\\]|\\.)*\)(?:[*+]|\{\d*,\})")


def catastrophic(pattern: str) -> str | None:
    """Why the pattern can backtrack catastrophically, or None."""
    try:
        tree = sre_parse.parse(pattern)
    except (re.error, OverflowError, RecursionError):
        return "nested unbounded quantifiers" if _NESTED_TEXT.search(pattern) else None
    return _Walk(tree).catastrophic


def polynomial(pattern: str) -> str | None:
    """Why the pattern backtracks polynomially (slow, not refused), or None."""
    try:
        tree = sre_parse.parse(pattern)
    except (re.error, OverflowError, RecursionError):
        return None
    return _Walk(tree).polynomial


def slow_start(pattern: str) -> bool:
    return pattern.startswith((".*", ".+", "^.*", "^.+"))


_INSIDE_UNBOUNDED = -1


class _Walk:
    """One pass over the parse tree; `outer` is the enclosing repeat: None, its bound (>= 2) or unbounded."""

    def __init__(self, tree) -> None:
        self.catastrophic: str | None = None
        self.polynomial: str | None = None
        self._items(tree, None)

    def _items(self, items, outer: int | None) -> None:
        for op, value in items:
            if self.catastrophic:
                return
            if op in _REPEATS or (_POSSESSIVE is not None and op == _POSSESSIVE):
                self._repeat(op, value, outer)
            elif op == sre_constants.SUBPATTERN:
                self._items(value[-1], outer)
            elif op == sre_constants.BRANCH:
                for branch in value[1]:
                    self._items(branch, outer)
            elif op in (sre_constants.ASSERT, sre_constants.ASSERT_NOT):
                self._items(value[1], outer)
            elif op == _ATOMIC:  # backtracking still happens inside the group while it matches
                self._items(value, outer)
            elif op == sre_constants.GROUPREF_EXISTS:
                for branch in value[1:]:
                    if branch is not None:
                        self._items(branch, outer)

    def _repeat(self, op, value, outer: int | None) -> None:
        _low, high, body = value
        if op == _POSSESSIVE:  # gives nothing back: cannot multiply the paths of what it contains
            self._items(body, outer)
        elif high == _UNBOUNDED:
            if outer == _INSIDE_UNBOUNDED:
                self.catastrophic = "an unbounded repeat inside another unbounded repeat (e.g. (a+)+): exponential backtracking"
                return
            if outer is not None and self.polynomial is None:
                self.polynomial = (f"an unbounded repeat inside a repeat of up to {outer} (e.g. (.*a){{{outer}}}): "
                                   f"polynomial backtracking of degree {outer}; bound the inner repeat or make the body unambiguous")
            self._items(body, _INSIDE_UNBOUNDED)
        elif high >= 2 and outer != _INSIDE_UNBOUNDED:
            self._items(body, high * (outer or 1))
        else:
            self._items(body, outer)
