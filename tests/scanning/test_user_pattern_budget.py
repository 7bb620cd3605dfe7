"""Issue 27 point 10: a team's pattern that backtracks polynomially, `(.*,){20}X`, takes ~30 ms a line without
ever giving up, and only searches that gave up counted against the user patterns' 1 s budget: 230 s for a
1.3 MB log. Every user search now counts; past the budget, a user signature whose own searches are slow is
switched off with a note. A team's fast pattern is never switched off."""

from __future__ import annotations

from offloaddoctor.scanning import scanner
from offloaddoctor.scanning.scanner import Matcher, Scanner
from offloaddoctor.catalog.model import MatchSpec


class CountingMatcher(Matcher):
    searches = 0

    def search(self, text, timeout=scanner.SEARCH_TIMEOUT_S):
        type(self).searches += 1
        return super().search(text, timeout)


def test_a_slow_user_pattern_that_never_gives_up_is_switched_off_once_the_budget_is_spent():
    slow = CountingMatcher("team-polynomial", MatchSpec(("Error x",), (r"(.*,){20}X",)), user=True)
    fast = Matcher("team-disk", MatchSpec(("No space left",), (r"No space left on device",)), user=True)
    near_miss = "Error x" + ",abc" * 40  # ~30 ms a search here, far under the 0.25 s give-up limit
    lines = [near_miss] * 400 + ["OSError: [Errno 28] No space left on device"] * 3
    result = Scanner([slow, fast]).scan_lines("job.log", lines)
    # Before: all 400 searches (~12 s). Now the budget (1 s) is spent after a few dozen, whatever the load.
    assert CountingMatcher.searches < 400
    [note] = [w for w in result.warnings if "team-polynomial" in w]
    assert "switched off for the rest of the scan" in note
    assert not any("team-disk" in w for w in result.warnings)
    assert [a.matcher_id for a in result.aggregates] == ["team-disk"]


def test_fast_user_patterns_over_many_lines_are_never_switched_off(monkeypatch):
    monkeypatch.setattr(scanner, "USER_PATTERN_BUDGET_S", 0.0)  # as if a long log had spent it already
    fast = Matcher("team-disk", MatchSpec(("No space left",), (r"No space left on (?P<device>\w+)",)), user=True)
    lines = ["OSError: [Errno 28] No space left on something else entirely " + "x" * 100] * 5000
    result = Scanner([fast]).scan_lines("job.log", [*lines, "OSError: No space left on nvme0"])
    assert not result.warnings
    assert {a.matcher_id for a in result.aggregates} == {"team-disk"}
    assert sum(a.count for a in result.aggregates) == 5001  # every line searched: none was skipped
