"""The literals' trie pattern must find a literal on every line that holds one, and nothing else."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from offloaddoctor.logs.literal_trie import COMMON_BYTES, literal_trie

# Few letters, so that literals share prefixes, contain each other and overlap in the haystack.
piece = st.text(alphabet="ab.(é\\[*", min_size=0, max_size=5).map(lambda s: s.encode())
haystack = st.lists(st.sampled_from(["a", "b", ".", "(", "é", "\\", "[", "*", "\n", "ab", "ba"]), max_size=40)


@settings(max_examples=400, deadline=None)
@given(st.lists(piece, max_size=8), haystack.map(lambda parts: "".join(parts).encode()))
def test_the_pattern_finds_a_literal_exactly_where_one_occurs(literals, text):
    pattern = literal_trie(tuple(literals))
    real = [lit for lit in literals if lit]
    assert bool(pattern.search(text)) == any(lit in text for lit in real)


def test_no_literals_match_nothing():
    assert literal_trie(()).search(b"anything") is None
    assert literal_trie((b"",)).search(b"anything") is None


@settings(max_examples=400, deadline=None)
@given(st.lists(piece, max_size=8), haystack.map(lambda parts: "".join(parts).encode()))
def test_searching_line_after_line_finds_exactly_the_lines_holding_a_literal(literals, text):
    """How the block reader uses it: search, take the match's line, go on from the next line. Each literal is
    entered at its least common byte, so a match starts inside the literal and so inside its line."""
    pattern = literal_trie(tuple(literals))
    real = [lit for lit in literals if lit]
    found, pos = set(), 0
    while (hit := pattern.search(text, pos)) is not None:
        start = text.rfind(b"\n", 0, hit.start()) + 1
        end = text.find(b"\n", hit.start())
        found.add(start)
        if end == -1:
            break
        pos = end + 1
    holding, start = set(), 0
    for line in text.split(b"\n"):
        if any(lit in line for lit in real):
            holding.add(start)
        start += len(line) + 1
    assert found == holding


def test_a_literal_is_entered_at_its_least_common_byte():
    """`elapsed (ms)` starts with `e`, common in logs; its brackets are rarer: the match starts at the rarer."""
    literal = b"elapsed (ms)"
    rarest = max(range(len(literal)), key=lambda i: COMMON_BYTES.index(literal[i]))
    assert literal[rarest : rarest + 1] in b"()"
    assert literal_trie((literal,)).search(b"x elapsed (ms) y").start() == len(b"x ") + rarest
    assert literal_trie((literal,)).search(b"x elapsed (ms y (ms) y") is None
