"""Point a finding at a known upstream bug when the run's config has the bug's shape, or the log names an
affected version. A config with the bug's shape contradicts the error itself, and the verdict says so."""

from __future__ import annotations

from typing import NamedTuple

from offloaddoctor.report.findings import CONTRADICTED, ConfigEvidence, Finding
from offloaddoctor.catalog.known_issues import VERSION_KEYS, KnownIssue
from offloaddoctor.catalog.predicates import names_in
from offloaddoctor.config.values import ConfigStore, format_value


class KnownIssueMatch(NamedTuple):
    issue: KnownIssue
    by_config: bool  # the config has the bug's shape
    version: str | None  # the affected version the log printed, if any

    def describe(self) -> str:
        issue = self.issue
        text = (
            f"known upstream bug {issue.id}: {issue.title} (affects {issue.package} "
            f"{', '.join(issue.versions)}; {issue.link}"
        )
        return text + (f"; fixed by {issue.fixed_by})" if issue.fixed_by else ")")


def apply_known_issues(findings: list[Finding], store: ConfigStore) -> None:
    for finding in findings:
        for issue in finding.signature.known_issues:
            found = match_known_issue(issue, store)
            if found is not None:
                finding.known_issues.append(found)
                _explain(finding, found, store)


def match_known_issue(issue: KnownIssue, store: ConfigStore) -> KnownIssueMatch | None:
    outcome = store.holds(issue.when)
    if outcome is False:  # the config rules the bug out, whatever the version
        return None
    by_config = outcome is True
    printed = store.resolve(VERSION_KEYS[issue.package])
    version = str(printed.value) if printed is not None and str(printed.value) in issue.versions else None
    if not by_config and version is None:
        return None
    return KnownIssueMatch(issue, by_config, version)


def _explain(finding: Finding, found: KnownIssueMatch, store: ConfigStore) -> None:
    verdict = finding.config
    if found.by_config:
        shown = {v.key for v in verdict.values}
        known = [(key, store.resolve(key)) for key in dict.fromkeys(names_in(found.issue.when, "key"))]
        for key, resolved in known:
            if key not in shown and resolved is not None:
                verdict.values.append(ConfigEvidence(key, True, resolved.value, str(resolved.source)))
        shape = ", ".join(f"{key} = {format_value(resolved.value)}" for key, resolved in known if resolved is not None)
        verdict.verdict = CONTRADICTED
        verdict.explanation = (
            f"the config contradicts this error ({shape}); this is the config shape of a " + found.describe()
        )
        if found.issue.workaround:  # the signature's fix is for the error's usual cause, which the config rules out
            finding.overrides = []
            finding.fix_note = found.issue.workaround
            finding.fix_note_replaces_summary = True
    else:
        verdict.explanation += f"; the log shows {found.issue.package} {found.version}, which has a " + found.describe()
