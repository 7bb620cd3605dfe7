"""Plain text for pipes, files and CI logs: no colour, no box drawing, stable for snapshots."""

from __future__ import annotations

import textwrap

from offloaddoctor import __version__
from offloaddoctor.analysis.findings import Finding, Report
from offloaddoctor.analysis.ranks import format_ranks
from offloaddoctor.analysis.scanner import Evidence
from offloaddoctor.config.values import format_value
from offloaddoctor.render.facts import fact_lines
from offloaddoctor.render.text_safety import safe_text

_LABEL_WIDTH = 11
_WIDTH = 100
SHOWN_EVIDENCE_GROUPS = 3


def headline(report: Report) -> str:
    lines = sum(s.lines for s in report.sources)
    logs = len(report.sources)
    count = len(report.findings)
    found = f"{count} finding{'s' if count != 1 else ''}" if count else "no known failure"
    ranks = f", {len(report.ranks_seen)} ranks" if len(report.ranks_seen) > 1 else ""
    return f"offloaddoctor {__version__}: {found} in {logs} log{'s' if logs != 1 else ''} ({lines:,} lines{ranks})"


def evidence_location(evidence: Evidence) -> str:
    location = safe_text(evidence.path) + (f":{evidence.line}" if evidence.line else "")
    return location + (f" [rank {evidence.rank}]" if evidence.rank is not None else "")


def occurrence_summary(finding: Finding) -> str:
    parts = []
    if finding.ranks:
        parts.append(f"ranks {format_ranks(finding.ranks)}" if len(finding.ranks) > 1 else f"rank {finding.ranks[0]}")
    if finding.occurrences > 1:
        parts.append(f"{finding.occurrences} occurrences")
    if len(finding.files) > 1:
        parts.append(f"in {len(finding.files)} files")
    if finding.trigger != "log":
        parts.append("from the run's config" if finding.trigger == "config" else "from the run's numbers")
    return ", ".join(parts)


def grouped_evidence(evidence: list[Evidence]) -> tuple[list[tuple[list[str], str]], int]:
    """Evidence lines with the same text (one message on many ranks) share one printed text; only the
    first SHOWN_EVIDENCE_GROUPS groups are shown. Returns the groups and how many lines were left out."""
    groups: list[tuple[list[str], str]] = []
    for item in evidence:
        text = safe_text(item.text)
        if groups and groups[-1][1] == text:
            groups[-1][0].append(evidence_location(item))
        else:
            groups.append(([evidence_location(item)], text))
    shown = groups[:SHOWN_EVIDENCE_GROUPS]
    return shown, len(evidence) - sum(len(locations) for locations, _ in shown)


def config_value_line(value) -> str:
    if not value.known:
        return f"{value.key} = (not known)"
    line = f"{value.key} = {safe_text(format_value(value.value))}  ({safe_text(value.source)})"
    for other in value.overridden:
        line += f"; overrides {safe_text(other)}"
    return line


def finding_blocks(findings: list[Finding]) -> list[str]:
    """Numbered finding blocks, each followed by a blank line."""
    out: list[str] = []
    for index, finding in enumerate(findings, start=1):
        out.extend(finding_block(index, finding))
        out.append("")
    return out


def render_plain(report: Report) -> str:
    out = [headline(report), "", *finding_blocks(report.findings)]
    if report.unmatched:
        out.append("No signature explains this failure line (the most likely cause):" if report.findings else
                   "No known failure matched. The most likely failure line:")
        out.append(f"  {evidence_location(report.unmatched)}")
        out.append(f"  {safe_text(report.unmatched.text)}")
        out.append("")
    elif not report.findings:
        out.append("The log shows no error that offloaddoctor knows, and no traceback.")
        out.append("")
    for note in report.notes:
        out.append(f"note: {safe_text(note)}")
    return "\n".join(out).rstrip() + "\n"


def finding_block(index: int, finding: Finding) -> list[str]:
    signature = finding.signature
    lines = [f"{index}. {signature.severity.upper()}  {signature.id}  {signature.title}"]

    def field(label: str, rows: list[str]) -> None:
        for number, row in enumerate(rows):
            prefix = (label if number == 0 else "").ljust(_LABEL_WIDTH)
            lines.append(f"   {prefix}{row}")

    summary = occurrence_summary(finding)
    evidence_rows = []
    groups, hidden = grouped_evidence(finding.evidence)
    for locations, text in groups:
        evidence_rows.append(", ".join(locations))
        evidence_rows.append(f"  {text}")
    if hidden:
        evidence_rows.append(f"(+{hidden} more evidence line{'s' if hidden != 1 else ''} in --format json)")
    field("Evidence", ([summary] if summary else []) + evidence_rows)
    if finding.facts:
        field("Numbers", [f"{label}: {value}" for label, value in fact_lines(finding.facts)])
    field("Cause", _wrap(signature.cause))
    verdict = finding.config
    field("Config", [f"{verdict.verdict.upper()}: {verdict.explanation}"] + [config_value_line(v) for v in verdict.values])
    field("Confirm", [f"- {step}" for step in signature.confirm])
    field("Fix", _wrap(signature.fix.summary) + [f"  {line}" for line in finding.overrides])
    return lines


def _wrap(text: str) -> list[str]:
    return textwrap.wrap(" ".join(text.split()), width=_WIDTH - _LABEL_WIDTH - 3) or [""]
