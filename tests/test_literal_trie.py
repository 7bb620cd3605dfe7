"""The literals' trie pattern must find a literal on every line that holds one, and nothing else."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from offloaddoctor.logs.literal_trie import literal_trie

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
