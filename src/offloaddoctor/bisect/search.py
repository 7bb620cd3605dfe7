"""Binary search for the first bad commit, with commits that cannot be tested (skips), as git bisect."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

GOOD, BAD, SKIP = "good", "bad", "skip"


class Outcome(NamedTuple):
    verdict: str  # GOOD, BAD or SKIP
    reason: str = ""
    detail: tuple[str, ...] = ()  # e.g. the failing signature ids


@dataclass
class SearchResult:
    """`candidates` holds the first bad commit, or several when skipped commits hide which one it is."""

    candidates: list[str]
    last_good: str
    tested: list[tuple[str, Outcome]] = field(default_factory=list)

    @property
    def first_bad(self) -> str | None:
        return self.candidates[0] if len(self.candidates) == 1 else None


def find_first_bad(
    good: str, commits: Sequence[str], test: Callable[[str], Outcome], known: dict[str, Outcome] | None = None
) -> SearchResult:
    """`commits` run from the commit after GOOD to BAD (oldest first); BAD is known to fail and GOOD to
    pass. Each step tests the commit nearest the middle of the open range that has not been skipped."""
    outcomes: dict[str, Outcome] = dict(known or {})
    tested: list[tuple[str, Outcome]] = []
    low, high = -1, len(commits) - 1  # commits[low] is good (-1: GOOD itself), commits[high] is bad
    while high - low > 1:
        index = _next_untested(low, high, commits, outcomes)
        if index is None:
            break
        sha = commits[index]
        outcome = test(sha)
        outcomes[sha] = outcome
        tested.append((sha, outcome))
        if outcome.verdict == BAD:
            high = index
        elif outcome.verdict == GOOD:
            low = index
    last_good = good if low < 0 else commits[low]
    return SearchResult(list(commits[low + 1 : high + 1]), last_good, tested)


def _next_untested(low: int, high: int, commits: Sequence[str], outcomes: dict[str, Outcome]) -> int | None:
    """Everything strictly between the bounds is untested or skipped; prefer the middle."""
    middle = (low + high + 1) // 2
    for distance in range(high - low):
        for index in (middle - distance, middle + distance):
            if low < index < high and outcomes.get(commits[index], Outcome(GOOD)).verdict != SKIP:
                return index
    return None
