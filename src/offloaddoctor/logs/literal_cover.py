"""Fewer prefilter patterns for a large log: substrings that several literals share.

GNU grep's multi-pattern search, and the block reader's one `bytes.find` pass per pattern, slow down with
the number of patterns. Many catalogue literals share a word (`offload`, `Error`, `supported with`), and a
line holding a literal holds every substring of it, so searching for the shared substring finds a superset
of the candidate lines; the consumer's exact gate throws the extra ones away. The only risk is speed: a
substring that is common in this log (`NCCL ` in NCCL_DEBUG=INFO chatter) would flood the consumer. So
each shared substring is checked against a sample of the log and kept only if it finds almost nothing
there that its literals do not.
"""

from __future__ import annotations

import re

MIN_SHARED = 5  # bytes; shorter shared words ("with", "not") are everywhere
# Word starts: after a non-alphanumeric byte, or a camel-case hump (`OutOfMemory|Error`, `nccl|System|Error`).
_WORD = re.compile(rb"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")
EXTRA_PER_MIB = 16  # lines a shared substring may find in the sample beyond its literals', per MiB


def cover_literals(literals: list[bytes], sample: bytes) -> list[bytes]:
    """Patterns such that every literal contains one of them; each is a literal or a substring shared
    by several literals that is rare in `sample`. Deterministic for the same input."""
    literals = sorted(set(literals))
    allowed_extra = max(1, EXTRA_PER_MIB * len(sample) // (1 << 20))
    owners = _shared_substrings(literals)
    covered: set[int] = set()
    patterns: list[bytes] = []
    while owners:
        # The piece covering the most literals not yet covered; on a tie the longer (rarer, faster for grep).
        piece, owned = max(owners.items(), key=lambda item: (len(item[1] - covered), len(item[0]), item[0]))
        fresh = owned - covered
        del owners[piece]
        if len(fresh) < 2:
            break
        # Occurrences, not lines: an upper bound, good enough to compare the piece with its literals.
        extra = sample.count(piece) - sum(sample.count(literals[i]) for i in fresh)
        if extra <= allowed_extra:
            patterns.append(piece)
            covered |= fresh
    return sorted(patterns + [literal for index, literal in enumerate(literals) if index not in covered])


def _shared_substrings(literals: list[bytes]) -> dict[bytes, set[int]]:
    """Runs of whole words (as written, separators included) that occur in more than one literal.
    Whole words only: a fragment like ` time` or `orted` is short and common, and slows grep down."""
    owners: dict[bytes, set[int]] = {}
    for index, literal in enumerate(literals):
        for piece in _word_runs(literal):
            owners.setdefault(piece, set()).add(index)
    return {piece: owned for piece, owned in owners.items() if len(owned) > 1}


def _word_runs(literal: bytes) -> set[bytes]:
    spans = [(m.start(), m.end()) for m in _WORD.finditer(literal)]
    runs = set()
    for first in range(len(spans)):
        for last in range(first, len(spans)):
            piece = literal[spans[first][0] : spans[last][1]]
            if len(piece) >= MIN_SHARED:
                runs.add(piece)
    return runs
