"""One regular expression that finds where any of a set of byte literals occurs, at C speed.

On a small haystack (a rank log of a few lines) asking `literal in haystack` for each of ~65 literals costs
~19 µs, nearly all of it per call. One alternation of the literals is faster, but Python's regex engine
tries it at every byte that can start one, and the literals start with spaces and common letters: ~330
instructions a byte. So each literal is entered at its least common byte (COMMON_BYTES, measured on real
logs) and the part before that byte is checked by a lookbehind once the rest has matched: the engine skips
every byte that starts no anchored literal with one set test (about one byte in ten of a log starts one),
and the anchored literals share a trie. A rank log's rest: ~7 µs -> ~2 µs; a MiB of NCCL INFO chatter:
42 -> 12 ms.

A match starts at the anchor, inside the literal, so inside the line that holds it (a literal holds no
newline): every line holding a literal has a match of its own, and no other line has one.
"""

from __future__ import annotations

import functools
import re

# tools/gen_byte_ranks.py: the bytes of the H100 logs the repo bundles, most common first (no newline).
COMMON_BYTES = b". ear_tonisldpmcugfhyb021F3k:Nv=w/-6,x()zT485\t79q|PjGIU'[]MO>AWEDBR*LC`S\"+<YVH\\#"
_RANK = {byte: -rank for rank, byte in enumerate(COMMON_BYTES)}  # higher: more common; absent: rarest


@functools.lru_cache(maxsize=4)
def literal_trie(literals: tuple[bytes, ...]) -> re.Pattern[bytes]:
    """A pattern that matches inside each occurrence of one of `literals` (once on every line holding one)."""
    root: dict = {}
    for literal in filter(None, literals):
        anchor = min(range(len(literal)), key=lambda i: (_RANK.get(literal[i], -len(COMMON_BYTES)), i))
        node = root
        for byte in literal[anchor:]:
            node = node.setdefault(byte, {})
        node.setdefault(None, set()).add(literal[:anchor])  # what must come before the anchor
    return re.compile(_alternation(root, b"") if root else b"(?!)")


def _alternation(node: dict, suffix: bytes) -> bytes:
    """`suffix`: the bytes matched from the anchor to this node (a lookbehind checks them with the head)."""
    heads = node.get(None, set())
    if b"" in heads:
        return b""  # a literal anchored at its first byte ends here: the rest of the trie adds nothing
    branches = [
        re.escape(bytes([byte])) + _alternation(child, suffix + bytes([byte]))
        for byte, child in sorted((byte, child) for byte, child in node.items() if byte is not None)
    ]
    branches += [b"(?<=" + re.escape(head + suffix) + b")" for head in sorted(heads)]
    return branches[0] if len(branches) == 1 else b"(?:" + b"|".join(branches) + b")"
