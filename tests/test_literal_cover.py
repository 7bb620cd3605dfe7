"""The prefilter's cover: every literal still found, shared words only when they are rare in the log."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from offloaddoctor.logs.literal_cover import cover_literals

words = st.sampled_from(
    [
        "offload",
        "optimizer",
        "Error",
        "cuda",
        "NCCL",
        "timed",
        "out",
        "of",
        "memory",
        "with",
        "supported",
        "x",
        "Ab",
        "CPU",
        "states",
        "-",
        "_",
        " ",
    ]
)
literal = st.lists(words, min_size=1, max_size=6).map("".join).filter(lambda s: s.strip()).map(str.encode)


@settings(max_examples=300, deadline=None)
@given(st.lists(literal, min_size=1, max_size=25), st.lists(words, max_size=400).map(" ".join).map(str.encode))
def test_every_literal_contains_a_pattern_and_every_pattern_comes_from_the_literals(literals, sample):
    patterns = cover_literals(literals, sample)
    assert all(any(p in lit for p in patterns) for lit in literals)
    assert all(any(p in lit for lit in literals) for p in patterns)
    assert len(patterns) <= len(set(literals))
    assert patterns == cover_literals(list(reversed(literals)), sample)  # the order given does not matter


def test_a_shared_word_replaces_the_literals_that_hold_it():
    literals = [
        b"CPU offloading can be done only",
        b"cannot be enabled with cpu_offloading",
        b"Pipeline with CPU offloading",
    ]
    assert cover_literals(literals, b"iteration 10 | loss 1.0\n" * 1000) == [b"offloading"]


def test_a_word_common_in_the_log_is_not_used():
    literals = [b"Watchdog caught collective operation timeout", b"collective operation failed"]
    chatter = b"NCCL INFO collective operation AllReduce done\n" * 2000
    assert cover_literals(literals, chatter) == sorted(literals)
    assert cover_literals(literals, b"quiet\n" * 2000) == [b"collective operation"]


def test_short_and_partial_words_are_never_used():
    # "time" is shared but short; " tim" / "orted" are fragments: none may stand in for the literals.
    literals = [b"elapsed time per iteration", b"operations have failed or timed out", b"comm aborted", b"unsupported"]
    assert cover_literals(literals, b"") == sorted(literals)
