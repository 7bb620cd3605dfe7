"""Patterns that can backtrack catastrophically are refused before they ever see a log.

A signature pattern is parsed with Python's own regex parser (`re._parser`; the `regex` module accepts a
superset, so a pattern it alone understands is checked by the fallback rules below) and walked: an
unbounded repeat (`*`, `+`, `{n,}`) whose body can itself repeat without bound — `(a+)+`, `(\\w*)*`,
`(?:.*x)+` — takes exponential time on a near-miss line; so does an alternation under an unbounded repeat whose
alternatives can match the same text, `(a|aa)+b`: a run of `a`s splits into them in exponentially many ways.
Such patterns are errors. An unbounded repeat
inside a bounded one, `(.*a){3}`, is polynomial (degree 3 here, so ~L^4 steps on a near-miss line of L
characters) and a leading `.*` or `.+` makes every search scan the line twice: legal but slow, warnings for
`signatures lint`. The 0.25 s limit on each search (scanning/scanner.py) is the backstop for the rest.
"""

from __future__ import annotations

import re

try:  # Python 3.11+
    from re import _constants as sre_constants  # type: ignore[attr-defined] # private: not in typeshed
    from re import _parser as sre_parse  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants
    import sre_parse

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
    try:
        return _Walk(tree).catastrophic
    except RecursionError:
        return "nested too deeply to analyse"


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
                self.catastrophic = (
                    "an unbounded repeat inside another unbounded repeat (e.g. (a+)+): exponential backtracking"
                )
                return
            if _ambiguous_alternation(body, _first(body)[0]):
                self.catastrophic = (
                    "an alternation under an unbounded repeat whose alternatives can match the same "
                    "text (e.g. (a|aa)+): exponential backtracking"
                )
                return
            if outer is not None and self.polynomial is None:
                self.polynomial = (
                    f"an unbounded repeat inside a repeat of up to {outer} (e.g. (.*a){{{outer}}}): "
                    f"polynomial backtracking of degree {outer}; bound the inner repeat or make the body unambiguous"
                )
            self._items(body, _INSIDE_UNBOUNDED)
        elif high >= 2 and outer != _INSIDE_UNBOUNDED:
            self._items(body, high * (outer or 1))
        else:
            self._items(body, outer)


# First-character sets, for telling whether alternatives can start alike: ASCII code points, and _OTHER for
# "some character outside ASCII". Conservative: anything not understood may start with any character.
_OTHER = 128
_ANY_CHAR = frozenset(range(129))
_CATEGORY_TESTS = {
    "CATEGORY_DIGIT": str.isdigit,
    "CATEGORY_SPACE": str.isspace,
    "CATEGORY_WORD": lambda c: c.isalnum() or c == "_",
    "CATEGORY_LINEBREAK": lambda c: c == "\n",
}


def _in_set(items) -> frozenset[int]:
    members: set[int] = set()
    negate = False
    for op, value in items:
        if op == sre_constants.NEGATE:
            negate = True
        elif op == sre_constants.LITERAL:
            members.add(value if value < 128 else _OTHER)
        elif op == sre_constants.RANGE:
            low, high = value
            members.update(c for c in range(low, min(high, 127) + 1))
            if high >= 128:
                members.add(_OTHER)
        elif op == sre_constants.CATEGORY:
            name = str(value)
            test = _CATEGORY_TESTS.get(name.replace("_NOT", "").replace("UNI_", "").replace("LOC_", ""))
            if test is None:
                return _ANY_CHAR
            hits = {c for c in range(128) if test(chr(c))}
            members.update(set(range(128)) - hits if "_NOT" in name else hits)
            members.add(_OTHER)
        else:
            return _ANY_CHAR
    return _ANY_CHAR - members | {_OTHER} if negate else frozenset(members)


def _first(items) -> tuple[frozenset[int], bool]:
    """(characters a match of the sequence can start with, whether it can match the empty string)."""
    first: set[int] = set()
    for op, value in items:
        item_first, nullable = _first_of(op, value)
        first |= item_first
        if not nullable:
            return frozenset(first), False
    return frozenset(first), True


def _first_of(op, value) -> tuple[frozenset[int], bool]:
    if op == sre_constants.LITERAL:
        return frozenset({value if value < 128 else _OTHER}), False
    if op == sre_constants.NOT_LITERAL:
        return _ANY_CHAR - {value}, False
    if op == sre_constants.ANY:
        return _ANY_CHAR, False
    if op == sre_constants.IN:
        return _in_set(value), False
    if op == sre_constants.SUBPATTERN:
        return _first(value[-1])
    if op == _ATOMIC:
        return _first(value)
    if op in _REPEATS or (_POSSESSIVE is not None and op == _POSSESSIVE):
        low, _high, body = value
        body_first, body_nullable = _first(body)
        return body_first, body_nullable or low == 0
    if op == sre_constants.BRANCH:
        first: set[int] = set()
        nullable = False
        for branch in value[1]:
            branch_first, branch_nullable = _first(branch)
            first |= branch_first
            nullable = nullable or branch_nullable
        return frozenset(first), nullable
    if op in (sre_constants.AT, sre_constants.ASSERT, sre_constants.ASSERT_NOT):
        return frozenset(), True  # zero-width
    return _ANY_CHAR, True  # back-references, conditionals: not analysed, assume the worst


def _ambiguous_alternation(items, loop_first: frozenset[int]) -> bool:
    """Inside a repeated body: an alternation two of whose alternatives can start with the same character,
    or one of which can be empty while another starts like the body itself (`(a|aa)+` is parsed as
    `(?:a(?:|a))+`: `aa` is one pass or two)."""
    for op, value in items:
        if op == sre_constants.BRANCH:
            alternatives = [_first(branch) for branch in value[1]]
            for index, (first, nullable) in enumerate(alternatives):
                others = [f for i, (f, _n) in enumerate(alternatives) if i != index]
                if any(first & other for other in others[index:]):
                    return True
                if nullable and any(other & loop_first for other in others):
                    return True
            if any(_ambiguous_alternation(branch, loop_first) for branch in value[1]):
                return True
        elif op == sre_constants.SUBPATTERN:
            if _ambiguous_alternation(value[-1], loop_first):
                return True
        elif op == _ATOMIC:
            continue  # an atomic group gives back nothing: its alternatives are tried once
        elif op in _REPEATS and value[1] != _UNBOUNDED and _ambiguous_alternation(value[2], loop_first):
            return True
    return False
