"""What a bisection found, in every mode."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: bisecting two configs loads no git plumbing (start-up)
    from offloaddoctor.bisect.changes import KeyChange
    from offloaddoctor.bisect.git import Commit
    from offloaddoctor.bisect.search import Outcome


class Tested(NamedTuple):
    commit: Commit
    outcome: Outcome


@dataclass
class BisectResult:
    mode: str  # "config", "run" or "configs"
    target: str  # what makes a commit bad, in words
    first_bad: Commit | None = None
    candidates: list[Commit] = field(default_factory=list)  # >1 when skipped commits hide the first bad one
    last_good: Commit | None = None
    earliest_bad: Commit | None = None  # the first bad commit, or the earliest tested bad when skips hide it
    failing: tuple[str, ...] = ()  # signature ids that fail at earliest_bad (or in the bad config)
    changes: list[KeyChange] = field(default_factory=list)
    total_changes: int = 0  # configs mode: how many keys differed before minimising
    tested: list[Tested] = field(default_factory=list)
    commits_in_range: int = 0

    @property
    def skipped(self) -> list[Tested]:
        return [t for t in self.tested if t.outcome.verdict == "skip"]
