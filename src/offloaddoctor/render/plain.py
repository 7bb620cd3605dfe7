"""Plain text for pipes, files and CI logs: no colour, no box drawing, stable for snapshots."""

from __future__ import annotations

import textwrap

from offloaddoctor import __version__
from offloaddoctor.scanning import format_ranks
from offloaddoctor.config.values import format_value
from offloaddoctor.lazy_pattern import lazy_compile
from offloaddoctor.render.facts import fact_lines
from offloaddoctor.text_safety import cut, safe_text

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: `check`'s text (finding_blocks) loads no run grouping (report/runs.py)
    from offloaddoctor.report import Finding, Report
    from offloaddoctor.scanning import Evidence

_LABEL_WIDTH = 11
_WIDTH = 100
SHOWN_EVIDENCE_GROUPS = 3


def headline(report: Report) -> str:
    lines = sum(s.lines for s in report.sources)
    logs = len(report.sources)
    count = len(report.findings)
    found = f"{count} finding{'s' if count != 1 else ''}" if count else "no known failure"
    if report.suppressed:  # as ruff's "N ignored": what is not shown is not absent
        found += f" ({len(report.suppressed)} suppressed)"
    ranks = f", {len(report.ranks_seen)} ranks" if len(report.ranks_seen) > 1 else ""
    empty = (": the log is empty" if logs == 1 else ": every log is empty") if all_empty(report) else ""
    runs = f": {len(report.runs)} runs, each diagnosed on its own" if report.runs else ""
    return f"offloaddoctor {__version__}: {found} in {logs} log{'s' if logs != 1 else ''} ({lines:,} lines{ranks}){empty}{runs}"


def run_heading(index: int, report: Report, of: int) -> str:
    """`run 2 of 3: 1 log: b.log; world_size 8` for a report of `Report.runs`."""
    from offloaddoctor.report import describe_run

    return f"run {index} of {of}: {safe_text(describe_run(report.run))}" if report.run else f"run {index} of {of}"


def suppressed_lines(report: Report) -> list[str]:
    """What --ignore or the project file left out, by which, and why; the project file read, if one was."""
    out = []
    for finding_id, reason in report.suppressed.items():
        count = report.suppressed_occurrences.get(finding_id, 0)
        times = f", {count} occurrence{'s' if count != 1 else ''}" if count else ""
        by = report.suppressed_by.get(finding_id, "--ignore")
        why = "" if reason == "--ignore on the command line" else f": {safe_text(reason)}"
        out.append(f"suppressed: {finding_id}{times}, by {safe_text(by)}{why}")
    return out + project_file_lines(report)


def project_file_lines(report: Report) -> list[str]:
    return [f"project settings: {safe_text(report.project_file)}"] if report.project_file else []


NOTHING_KNOWN = "The log shows no error that offloaddoctor knows, and no traceback."


def nothing_found_line(report: Report) -> str:
    """Said when no finding is left: never that the log is clean when a finding was only suppressed."""
    if report.suppressed:
        count = len(report.suppressed)
        return (
            f"No finding left to report: {count} finding{'s' if count != 1 else ''} suppressed "
            f"({', '.join(report.suppressed)}), listed below."
        )
    return NOTHING_KNOWN


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


# What differs between copies of one message on many ranks: rank tags, timestamps (glog `E1122 10:55:41.018`,
# ISO), the local GPU index, the process id.
_VARYING = lazy_compile(
    r"(?i)\[?\brank\s*[:=]?\s*\d+\]?|\[default\d+\]|\b\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?"
    r"|\b\d\d:\d\d:\d\d(?:[.,]\d+)?|\b[IWEF]\d{4}\b|\bGPU \d+\b|\bpid[ =:]*\d+"
)


def collapsed_evidence(evidence: list[Evidence]) -> list[tuple[str, str]]:
    """Evidence lines that differ only in rank, timestamp or GPU index become one (location, text) with every
    line number and the rank set; the same line is never listed twice. In order of first appearance."""
    groups: dict[str, tuple[dict[str, list[int]], set[int], str]] = {}
    seen: set[tuple[str, int | None]] = set()
    for item in evidence:
        if (item.path, item.line) in seen and item.line is not None:
            continue
        seen.add((item.path, item.line))
        text = safe_text(item.text)
        lines_by_path, ranks, _ = groups.setdefault(_VARYING.sub("#", text), ({}, set(), text))
        lines = lines_by_path.setdefault(item.path, [])
        if item.line is not None:
            lines.append(item.line)
        if item.rank is not None:
            ranks.add(item.rank)
    out = []
    for lines_by_path, ranks, text in groups.values():
        where = ", ".join(
            safe_text(path) + (":" + format_ranks(lines) if lines else "") for path, lines in lines_by_path.items()
        )
        if ranks:
            where += f" [rank{'s' if len(ranks) > 1 else ''} {format_ranks(ranks)}]"
        out.append((where, text))
    return out


def grouped_evidence(evidence: list[Evidence], details: bool = False) -> tuple[list[tuple[str, str]], int]:
    """Collapsed evidence; only the first SHOWN_EVIDENCE_GROUPS groups unless `details`. Returns the groups
    and how many evidence lines were left out."""
    groups = collapsed_evidence(evidence)
    shown = groups if details else groups[:SHOWN_EVIDENCE_GROUPS]
    return shown, len(groups) - len(shown)


def config_value_line(value) -> str:
    if not value.known:
        return f"{value.key} = (not known)"
    line = f"{value.key} = {safe_text(format_value(value.value))}  ({safe_text(value.source)})"
    for other in value.overridden:
        line += f"; overrides {safe_text(other)}"
    return line


def ranks_cell(finding: Finding) -> str:
    if finding.ranks:
        return format_ranks(finding.ranks)
    return {"config": "(config)", "metrics": "(numbers)"}.get(finding.trigger, "-")


def verdict_word(finding: Finding, report: Report) -> str:
    """The config column: confirmed / CONTRADICTED / unknown, `-` when the signature reads no config."""
    verdict = finding.config
    if verdict.verdict == "unknown" and not verdict.values:
        return "-"
    word = verdict.verdict.upper() if verdict.verdict == "contradicted" else verdict.verdict
    other_run = report.config_mismatch or "another run" in verdict.explanation
    if other_run and verdict.verdict != "unknown":
        word += " (other run?)"
    return word


def fix_line(finding: Finding) -> str:
    """The line to paste: Bridge overrides or Megatron-LM flags together (one command line), else the first
    line; with none, the fix's first sentence."""
    overrides = [safe_text(line) for line in finding.overrides]
    if overrides and (all(" " not in line for line in overrides) or all(line.startswith("--") for line in overrides)):
        return " ".join(overrides)
    if overrides:
        return overrides[0] + (f"  (+{len(overrides) - 1} more below)" if len(overrides) > 1 else "")
    summary = finding.fix_sentences[0] if finding.fix_sentences else ""
    return summary.split(". ")[0].rstrip(".") + "."


SUMMARY_HEADER = ("#", "severity", "finding", "ranks", "config", "fix")


def summary_rows(report: Report) -> list[tuple[str, ...]]:
    """One row per finding, root cause first (the report's order)."""
    return [
        (
            str(index),
            finding.signature.severity.upper(),
            finding.id,
            ranks_cell(finding),
            verdict_word(finding, report),
            fix_line(finding),
        )
        for index, finding in enumerate(report.findings, start=1)
    ]


def summary_table(report: Report) -> list[str]:
    rows = [SUMMARY_HEADER, *summary_rows(report)]
    widths = [max(len(row[column]) for row in rows) for column in range(len(SUMMARY_HEADER) - 1)]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)) + "  " + row[-1] for row in rows]


def shown_notes(report: Report, details: bool = False) -> list[str]:
    """Notes to print: config-vs-log disagreements only about keys a finding reads (all with `details`),
    the rest counted in one line. The 'another run' note is printed up front, not here."""
    read = {value.key for finding in report.findings for value in finding.config.values}
    notes, left_out = [], 0
    for note in report.notes:
        if note == report.config_mismatch:
            continue
        key = report.note_keys.get(note)
        if key is not None and key not in read and not details:
            left_out += 1
            continue
        notes.append(safe_text(note))
    if left_out:
        notes.append(
            f"{left_out} more config value{'s differ' if left_out != 1 else ' differs'} between the config and "
            "the log, for keys no finding reads (--details lists them)"
        )
    return notes


def up_front_lines(report: Report) -> list[str]:
    """Printed under the headline: what changes how far the report can be trusted."""
    return [f"warning: {safe_text(report.config_mismatch)}"] if report.config_mismatch else []


def all_empty(report: Report) -> bool:
    return bool(report.sources) and all(s.lines == 0 for s in report.sources)


DETAILS_HINT = "Details below; --details (-v) adds causes, confirmation steps and every note."


def finding_blocks(findings: list[Finding], details: bool = True) -> list[str]:
    """Numbered finding blocks, each followed by a blank line."""
    out: list[str] = []
    for index, finding in enumerate(findings, start=1):
        out.extend(finding_block(index, finding, details))
        out.append("")
    return out


def render_plain(report: Report, details: bool = False) -> str:
    if report.runs:
        from offloaddoctor.report import notes_for_all_runs

        out = [headline(report), ""]
        for index, run in enumerate(report.runs, start=1):
            out += [f"=== {run_heading(index, run, len(report.runs))} ===", render_plain(run, details)]
        out += [f"note: {safe_text(note)}" for note in notes_for_all_runs(report)]
        out += project_file_lines(report)
        return "\n".join(out).rstrip() + "\n"
    out = [headline(report), *up_front_lines(report), ""]
    if report.findings:
        out += [*summary_table(report), ""]
    if report.unmatched:
        out.append(
            "No signature explains this failure line (the most likely cause):"
            if report.findings
            else "No known failure matched. The most likely failure line:"
        )
        out.append(f"  {evidence_location(report.unmatched)}")
        out.append(f"  {safe_text(report.unmatched.text)}")
        out.append("")
    elif not report.findings and not all_empty(report):
        out.append(nothing_found_line(report))
        out.append("")
    if report.findings:
        if not details:
            out += [DETAILS_HINT, ""]
        out += finding_blocks(report.findings, details)
    for note in shown_notes(report, details):
        out.append(f"note: {note}")
    out += suppressed_lines(report)
    return "\n".join(out).rstrip() + "\n"


def finding_block(index: int, finding: Finding, details: bool = True) -> list[str]:
    signature = finding.signature
    lines = [f"{index}. {signature.severity.upper()}  {signature.id}  {signature.title}"]

    def field(label: str, rows: list[str]) -> None:
        for number, row in enumerate(rows):
            prefix = (label if number == 0 else "").ljust(_LABEL_WIDTH)
            lines.append(f"   {prefix}{row}")

    summary = occurrence_summary(finding)
    evidence_rows = []
    groups, hidden = grouped_evidence(finding.evidence, details)
    for where, text in groups:
        evidence_rows.append(where)
        evidence_rows.append(f"  {text if details else cut_evidence(text, _WIDTH - _LABEL_WIDTH - 5)}")
    if hidden:
        evidence_rows.append(f"(+{hidden} more: --details)")
    field("Evidence", ([summary] if summary else []) + evidence_rows)
    if finding.facts:
        field("Numbers", [f"{label}: {value}" for label, value in fact_lines(finding.facts)])
    if details:
        field("Cause", _wrap(signature.cause))
    verdict = finding.config
    field(
        "Config", [f"{verdict.verdict.upper()}: {verdict.explanation}"] + [config_value_line(v) for v in verdict.values]
    )
    if details:
        field("Confirm", [f"- {step}" for step in signature.confirm])
    fix_rows = [row for sentence in finding.fix_sentences for row in _wrap(sentence)]
    field("Fix", fix_rows + [f"  {safe_text(line)}" for line in finding.overrides])
    return lines


# The fields of a Megatron iteration line that a finding's numbers come from (the slowdown's iteration time,
# the throughput): kept when the line is cut, wherever they stand in it.
KEY_FIELDS = ("elapsed time per iteration", "throughput per GPU")
_FIELD_SEPARATOR = " | "


def cut_evidence(text: str, width: int) -> str:
    """An evidence line in at most `width` characters (the whole one is in --details and JSON). Alignment
    padding goes first; a line of ` | ` fields (Megatron's iteration lines) keeps its key fields (KEY_FIELDS, in
    that order, as many as fit, the first always), then its first field and the others in order while they fit,
    with `…` where fields were left out; any other line is cut at its end."""
    if len(text) <= width:
        return text
    text = " ".join(text.split())
    if len(text) <= width or _FIELD_SEPARATOR not in text:
        return cut(text, width)
    fields = [field for field in text.split(_FIELD_SEPARATOR) if field]
    keys = [next((i for i, field in enumerate(fields) if name in field), None) for name in KEY_FIELDS]
    kept: set[int] = set()
    for index in [i for i in keys if i is not None] + list(range(len(fields))):
        if index not in kept:
            if kept and len(_joined(fields, kept | {index})) > width:
                if index in keys:
                    continue  # a key field too long to join: the first field and the rest may still fit
                break
            kept.add(index)
    joined = _joined(fields, kept)
    return joined if len(joined) <= width else cut(joined, width)


def _joined(fields: list[str], kept: set[int]) -> str:
    parts: list[str] = []
    for index, field in enumerate(fields):
        if index in kept:
            parts.append(field)
        elif not parts or parts[-1] != "…":
            parts.append("…")
    return _FIELD_SEPARATOR.join(parts)


def _wrap(text: str) -> list[str]:
    return textwrap.wrap(" ".join(text.split()), width=_WIDTH - _LABEL_WIDTH - 3) or [""]
