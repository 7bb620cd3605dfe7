"""Bisect results as plain text and as versioned JSON (`first_bad` holds the commit)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from offloaddoctor.bisect.changes import ABSENT, KeyChange
from offloaddoctor.render.json_report import SCHEMA_VERSION
from offloaddoctor.text_safety import json_document, safe_text

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: two configs' bisection loads no git plumbing (start-up)
    from offloaddoctor.bisect.git import Commit
    from offloaddoctor.bisect.result import BisectResult

_MODE_NAMES = {"config": "config mode", "run": "run mode", "configs": "two configs"}


def _short(commit: Commit | None) -> str:
    return commit.short if commit is not None else "?"  # a commit search always sets it


def render_bisect_plain(result: BisectResult) -> str:
    out = [f"offloaddoctor bisect ({_MODE_NAMES[result.mode]}): bad = {result.target}", ""]
    if result.mode == "configs":
        out.append(
            f"{len(result.changes)} of {result.total_changes} differing keys are enough to fail "
            f"({', '.join(result.failing)}); undoing any one of them makes the config pass:"
        )
        out.extend(_change_lines(result.changes))
        return "\n".join(out) + "\n"
    if result.first_bad:
        out.append(f"First bad commit  {_commit_line(result.first_bad)}")
        out.append(f"                  {safe_text(result.first_bad.subject)}")
        if result.failing:
            out.append(f"Fails             {', '.join(result.failing)}")
    else:
        out.append("The first bad commit is one of these (skipped commits hide which):")
        out.extend(f"  {_commit_line(c)}  {safe_text(c.subject)}" for c in result.candidates)
        if result.failing:
            out.append(f"Fails             {', '.join(result.failing)} (at {_short(result.earliest_bad)})")
    if result.last_good:
        out.append(f"Last good         {_commit_line(result.last_good)}  {safe_text(result.last_good.subject)}")
    if result.changes:
        out.append("")
        upto = "first bad" if result.first_bad else f"the earliest tested bad ({_short(result.earliest_bad)})"
        out.append(f"Config keys changed from last good to {upto} (* = read by the failing constraint):")
        out.extend(_change_lines(result.changes))
    elif result.first_bad and result.mode == "config":
        out.append("")
        out.append("No config key changed between them as written: the difference is in how they are read.")
    skipped = result.skipped
    out.append("")
    out.append(
        f"Tested {len(result.tested)} commits (both ends and {len(result.tested) - 2} of "
        f"{result.commits_in_range - 1} in between), {len(skipped)} skipped" + (":" if skipped else ".")
    )
    out.extend(f"  {t.commit.short} skipped: {safe_text(t.outcome.reason)}" for t in skipped)
    return "\n".join(out) + "\n"


def _commit_line(commit: Commit) -> str:
    return f"{commit.short}  {safe_text(commit.author)}  {commit.date}"


def _change_lines(changes: list[KeyChange]) -> list[str]:
    lines = []
    for change in changes:
        mark = "*" if change.read_by_failing_rule else " "
        sources = " -> ".join(s for s in (change.before_source, change.after_source) if s)
        lines.append(f"  {mark} {safe_text(change.describe())}   ({safe_text(sources)})")
    return lines


def render_bisect_json(result: BisectResult) -> str:
    def commit(value: Commit | None) -> dict[str, Any] | None:
        return asdict(value) if value else None

    return json_document(
        {
            "schema_version": SCHEMA_VERSION,
            "mode": result.mode,
            "target": result.target,
            "first_bad": commit(result.first_bad),
            "candidates": [commit(c) for c in result.candidates],
            "last_good": commit(result.last_good),
            "earliest_bad": commit(result.earliest_bad),
            "failing": list(result.failing),
            "changed_keys": [_change(c) for c in result.changes],
            "total_changes": result.total_changes or len(result.changes),
            "tested": [
                {"sha": t.commit.sha, "verdict": t.outcome.verdict, "reason": t.outcome.reason} for t in result.tested
            ],
            "skipped": [{"sha": t.commit.sha, "reason": t.outcome.reason} for t in result.skipped],
        }
    )


def _change(change: KeyChange) -> dict[str, Any]:
    kind = "added" if change.before is ABSENT else "removed" if change.after is ABSENT else "changed"
    return {
        "key": change.key,
        "change": kind,
        "before": None if change.before is ABSENT else change.before,
        "after": None if change.after is ABSENT else change.after,
        "before_source": change.before_source,
        "after_source": change.after_source,
        "read_by_failing_rule": change.read_by_failing_rule,
    }
