"""What a signature is, once loaded and validated."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import NamedTuple

from offloaddoctor.catalog.predicates import Predicate

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: typing costs start-up time
    from typing import Any

    from offloaddoctor.catalog.known_issues import KnownIssue

SEVERITIES = ("error", "warning", "info")


@dataclass(frozen=True)
class MatchSpec:
    """Lines containing any literal are tried against the patterns; `facts` names a parser for numbers."""

    literals: tuple[str, ...]
    pattern_sources: tuple[str, ...]
    facts: str | None = None

    @cached_property
    def patterns(self) -> tuple[Any, ...]:
        """Compiled on first use: most runs touch a few signatures, and `regex` costs start-up time."""
        import regex

        return tuple(regex.compile(source) for source in self.pattern_sources)


class FixInstead(NamedTuple):
    """Lines that replace the fix's where `when` holds on the run's config (Transformer Engine not installed)."""

    when: Predicate
    note: str
    overrides: tuple[str, ...] = ()


class Fix(NamedTuple):
    summary: str
    overrides: tuple[str, ...] = ()
    tried: tuple[str, ...] = ()  # real runs of this fix, each naming its fixtures (docs only)
    instead: tuple[FixInstead, ...] = ()  # the first whose `when` holds replaces `overrides`


@dataclass(frozen=True)
class Example:
    expect: str  # "match" or "no_match"
    log: str
    config: dict[str, Any] = field(default_factory=dict)
    verdict: str | None = None
    name: str = ""


class Signature(NamedTuple):
    id: str
    title: str
    severity: str
    priority: int
    symptom: str
    cause: str
    match: MatchSpec | None
    shares_match_of: str | None  # `match: {same_as: ID}`: one matcher, the best passing `when` wins
    when: Predicate | None
    config: Predicate | None
    preflight: bool
    confirm: tuple[str, ...]
    fix: Fix
    references: tuple[dict[str, str], ...]
    examples: tuple[Example, ...]
    path: str
    # `known_issues` entries as validated at load time; built when asked (most runs never need them)
    known_issue_entries: tuple[dict[str, Any], ...] = ()

    @property
    def known_issues(self) -> tuple[KnownIssue, ...]:
        """Upstream bugs known to produce this failure (catalog/known_issues.py)."""
        if not self.known_issue_entries:
            return ()
        from offloaddoctor.catalog.known_issues import build_known_issues

        return build_known_issues(self.known_issue_entries)

    @property
    def severity_rank(self) -> int:
        return SEVERITIES.index(self.severity)


class Catalog(NamedTuple):
    signatures: tuple[Signature, ...]

    def get(self, signature_id: str) -> Signature | None:
        return next((s for s in self.signatures if s.id == signature_id), None)

    @property
    def ids(self) -> list[str]:
        return [s.id for s in self.signatures]


# The source documents the signatures cite by their file in the project's reference set, as a user finds them.
PUBLISHED = {
    "seeds/skill-cpu-offloading.txt": "the CPU-offloading guide (Megatron-Bridge docs/training/cpu-offloading.md; "
    "NVIDIA skill nemo-mbridge-perf-cpu-offloading)",
    "seeds/skill-memory-tuning.txt": "the memory-tuning guide (Megatron-Bridge docs/parallelisms.md; NVIDIA skill "
    "nemo-mbridge-perf-memory-tuning)",
    "seeds/megatron-lm-pr-2811-optimizer-state-offloading.txt": "Megatron-LM pull request #2811 (optimizer state "
    "and master weight offloading)",
}


def reference_text(reference: dict[str, str]) -> str:
    """A signature's reference as `explain` and the signature pages print it: a cited document as published."""
    return ", ".join(
        f"{key}: {PUBLISHED.get(value, value) if key == 'doc' else value}" for key, value in reference.items()
    )
