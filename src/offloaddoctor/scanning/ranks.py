"""Compact rank sets: [0, 1, 2, 3, 12] -> "0-3,12"."""

from __future__ import annotations

from collections.abc import Iterable


def format_ranks(ranks: Iterable[int]) -> str:
    ordered = sorted(set(ranks))
    if not ordered:
        return ""
    parts = []
    start = previous = ordered[0]
    for rank in ordered[1:]:
        if rank == previous + 1:
            previous = rank
            continue
        parts.append(_span(start, previous))
        start = previous = rank
    parts.append(_span(start, previous))
    return ",".join(parts)


def _span(start: int, end: int) -> str:
    return str(start) if start == end else f"{start}-{end}"


def parse_ranks(text: str) -> list[int]:
    """Inverse of format_ranks."""
    ranks: list[int] = []
    for part in filter(None, text.split(",")):
        low, _, high = part.partition("-")
        ranks.extend(range(int(low), int(high or low) + 1))
    return ranks
