"""The lines a finding cites, and the rule for how many: at most MAX_EVIDENCE, one per rank (lines without
a rank are always taken while there is room). Shared by the scanner's aggregates and the engine's findings."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

MAX_EVIDENCE = 5


class Evidence(NamedTuple):
    path: str
    line: int | None
    rank: int | None
    text: str


def keep_evidence(kept: list[Evidence], evidence: Evidence) -> None:
    """Add `evidence` to `kept` if there is room and no kept line has its rank (a rankless line always fits)."""
    if len(kept) < MAX_EVIDENCE and (evidence.rank is None or all(e.rank != evidence.rank for e in kept)):
        kept.append(evidence)


@dataclass
class Aggregate:
    """Every hit of one matcher with identical parsed facts: one entry per failure, however many ranks."""

    matcher_id: str
    facts: dict
    first_seen: int
    evidence: list[Evidence] = field(default_factory=list)
    ranks: set[int] = field(default_factory=set)
    paths: set[str] = field(default_factory=set)  # every file the failure appeared in
    count: int = 0

    def add(self, evidence: Evidence) -> None:
        self.count += 1
        self.paths.add(evidence.path)
        if evidence.rank is not None:
            self.ranks.add(evidence.rank)
        keep_evidence(self.evidence, evidence)

    def absorb(self, other: Aggregate) -> None:
        """Take in the hits of the same failure found in another part of the logs (a parallel scan)."""
        self.count += other.count
        self.ranks |= other.ranks
        self.paths |= other.paths
        for evidence in other.evidence:
            keep_evidence(self.evidence, evidence)


class Aggregates:
    """Aggregates by key, numbered in the order their failures were first seen."""

    def __init__(self):
        self._by_key: dict[tuple, Aggregate] = {}

    def get(self, matcher_id: str, facts: dict) -> Aggregate:
        # (a list, not a generator: asked for each of 20,000 rank logs' failure lines, most with no facts at all)
        key = (matcher_id, tuple(sorted([(k, repr(v)) for k, v in facts.items()])) if facts else ())
        aggregate = self._by_key.get(key)
        if aggregate is None:
            aggregate = self._by_key[key] = Aggregate(matcher_id, facts, len(self._by_key) + 1)
        return aggregate

    def ordered(self) -> list[Aggregate]:
        return sorted(self._by_key.values(), key=lambda a: a.first_seen)
