"""Markdown for review comments and GitHub's job summary. Log text only ever appears inside code
fences (longer than any backtick run in it), so a log cannot inject links, HTML or formatting."""

from __future__ import annotations

from offloaddoctor.report import Finding, Report, notes_for_all_runs
from offloaddoctor.render.facts import fact_lines
from offloaddoctor.render.plain import (
    config_value_line,
    evidence_location,
    grouped_evidence,
    headline,
    nothing_found_line,
    occurrence_summary,
    project_file_lines,
    run_heading,
    suppressed_lines,
)
from offloaddoctor.text_safety import safe_text

_CELL_ESCAPES = str.maketrans(
    {"|": "\\|", "`": "\\`", "<": "&lt;", ">": "&gt;", "[": "\\[", "]": "\\]", "*": "\\*", "_": "\\_"}
)


def cell(text: object) -> str:
    return safe_text(text).translate(_CELL_ESCAPES)


def fenced(lines: list[str], language: str = "") -> list[str]:
    fence = "`" * max(3, _longest_backtick_run(lines) + 1)
    return [fence + language, *lines, fence]


def _longest_backtick_run(lines: list[str]) -> int:
    longest = 0
    for line in lines:
        run = 0
        for char in line:
            run = run + 1 if char == "`" else 0
            longest = max(longest, run)
    return longest


def render_markdown(report: Report, title: str = "offloaddoctor") -> str:
    if report.runs:
        out = [f"## {title}", "", cell(headline(report)), ""]
        for index, run in enumerate(report.runs, start=1):
            out.append(render_markdown(run, title=f"{title}: {cell(run_heading(index, run, len(report.runs)))}"))
        out += [f"- note: {cell(note)}" for note in notes_for_all_runs(report)]
        out += [f"- {cell(line)}" for line in project_file_lines(report)]
        return "\n".join(out).rstrip() + "\n"
    findings = report.findings
    out = [f"## {title}", "", cell(headline(report)), ""]
    if findings:
        out += ["| # | severity | id | title | where |", "| --- | --- | --- | --- | --- |"]
        for index, finding in enumerate(findings, start=1):
            where = occurrence_summary(finding) or (evidence_location(finding.evidence[0]) if finding.evidence else "")
            out.append(
                f"| {index} | {finding.signature.severity} | `{finding.id}` | {cell(finding.signature.title)} | {cell(where)} |"
            )
        out.append("")
    for index, finding in enumerate(findings, start=1):
        out += _finding_section(index, finding)
    if report.unmatched:
        out += ["### No signature explains this failure line", "", cell(evidence_location(report.unmatched)), ""]
        out += fenced([safe_text(report.unmatched.text)], "text") + [""]
    elif not findings:
        out += [
            cell(nothing_found_line(report)) if report.suppressed else "No known failure and no traceback in the logs.",
            "",
        ]
    out += [f"- note: {cell(note)}" for note in report.notes]
    out += [f"- {cell(line)}" for line in suppressed_lines(report)]
    return "\n".join(out).rstrip() + "\n"


def _finding_section(index: int, finding: Finding) -> list[str]:
    signature = finding.signature
    out = [f"### {index}. {signature.severity.upper()} `{finding.id}`: {cell(signature.title)}", ""]
    groups, hidden = grouped_evidence(finding.evidence)
    evidence = []
    for where, text in groups:
        evidence += [where, f"  {text}"]
    if hidden:
        evidence.append(f"(+{hidden} more in --format json)")
    out += fenced(evidence, "text") + [""]
    if finding.facts:
        out += [f"- {cell(label)}: {cell(value)}" for label, value in fact_lines(finding.facts)] + [""]
    out += [f"**Cause.** {cell(' '.join(signature.cause.split()))}", ""]
    out += [f"**Config: {finding.config.verdict}.** {cell(finding.config.explanation)}", ""]
    out += [f"- {cell(config_value_line(v))}" for v in finding.config.values] + [""]
    out += ["**Confirm.**", ""] + [f"- {cell(step)}" for step in signature.confirm] + [""]
    out += [f"**Fix.** {cell(' '.join(finding.fix_sentences))}", ""]
    if finding.overrides:
        out += fenced([safe_text(line) for line in finding.overrides], "text") + [""]
    return out
