"""Bisect a commit range with any good/bad test: verify both ends, then binary-search."""

from __future__ import annotations

import math
from collections.abc import Callable

from offloaddoctor.bisect.git import Repo
from offloaddoctor.bisect.result import BisectResult, Tested
from offloaddoctor.bisect.search import BAD, GOOD, SKIP, Outcome, find_first_bad
from offloaddoctor.errors import UserError

Progress = Callable[[str], None]
_DECIDED = {SKIP: "skipped"}  # "good: exit 0, ...", "bad: log shows ...", "skipped: exit 127, ..."


def bisect_commits(
    repo: Repo,
    good_rev: str,
    bad_rev: str,
    test: Callable[[str], Outcome],
    mode: str,
    target: str,
    progress: Progress | None = None,
) -> BisectResult:
    good, bad = repo.resolve(good_rev), repo.resolve(bad_rev)
    if good == bad:
        raise UserError(f"--good {good_rev} and --bad {bad_rev} are the same commit")
    if not repo.is_ancestor(good, bad):
        raise UserError(
            f"--good {good_rev} is not an ancestor of --bad {bad_rev}: bisect needs GOOD to come before BAD"
        )
    commits = repo.commits_between(good, bad)
    say = progress or (lambda message: None)
    steps = max(1, math.ceil(math.log2(len(commits) + 1)))
    tested: list[Tested] = []

    def run_test(sha: str, label: str) -> Outcome:
        commit = repo.commit(sha)
        say(f"{label} {commit.short} {commit.subject}")
        outcome = test(sha)
        tested.append(Tested(commit, outcome))
        say(f"  {_DECIDED.get(outcome.verdict, outcome.verdict)}: {outcome.reason}")
        return outcome

    first = run_test(good, "[good end]")
    if first.verdict != GOOD:
        raise UserError(f"--good {good_rev} does not pass ({first.verdict}: {first.reason}); pick an older good commit")
    last = run_test(bad, "[bad end]")
    if last.verdict != BAD:
        raise UserError(
            f"--bad {bad_rev} does not fail ({last.verdict}: {last.reason}); nothing to bisect for {target}"
        )
    counter = iter(range(1, len(commits) + 1))
    search = find_first_bad(
        good, commits, lambda sha: run_test(sha, f"[step {next(counter)}/~{steps}]"), known={bad: last}
    )
    result = BisectResult(mode, target, tested=tested, commits_in_range=len(commits))
    result.candidates = [repo.commit(sha) for sha in search.candidates]
    result.last_good = repo.commit(search.last_good)
    result.earliest_bad = result.candidates[-1]
    if search.first_bad:
        result.first_bad = result.earliest_bad
    result.failing = next(t.outcome for t in reversed(tested) if t.commit.sha == result.earliest_bad.sha).detail
    return result
