"""Rich panels for a person at a terminal. Every piece of log or config text goes in as a `Text`
object, never as markup, so `[bold red]` in a log is shown as written."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console, Group
from rich.padding import Padding
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from offloaddoctor.report import Finding, Report, notes_for_all_runs
from offloaddoctor.render.facts import fact_lines
from offloaddoctor.render.plain import (
    DETAILS_HINT,
    SUMMARY_HEADER,
    all_empty,
    config_value_line,
    cut_evidence,
    evidence_location,
    grouped_evidence,
    headline,
    nothing_found_line,
    occurrence_summary,
    project_file_lines,
    run_heading,
    shown_notes,
    summary_rows,
    suppressed_lines,
    up_front_lines,
)
from offloaddoctor.text_safety import safe_text

_SEVERITY_STYLE = {"error": "bold red", "warning": "bold yellow", "info": "bold blue"}
_VERDICT_STYLE = {"confirmed": "green", "contradicted": "bold magenta", "unknown": "dim"}
# A printed line that opens with `::` (after colour codes and blanks) would be a runner command.
_RUNNER_OPENER = re.compile(r"^((?:\x1b\[[0-9;]*m|[ \t])*):(?=:)", re.MULTILINE)
# The width when the terminal's is unknown: rich takes COLUMNS=0 as a width of 0 and prints nothing at all.
DEFAULT_WIDTH = 80


@contextmanager
def _guarded(console: Console) -> Iterator[None]:
    """Rich wraps long lines, so log text that safe_text left mid-line (`x ::error::y`) can start a printed
    line; escape that opener on the lines as printed."""
    if console.width <= 0:
        console.width = DEFAULT_WIDTH
    with console.capture() as captured:
        yield
    console.file.write(_RUNNER_OPENER.sub(r"\1\\x3a", captured.get()))
    console.file.flush()


def render_terminal(report: Report, console: Console, details: bool = False) -> None:
    with _guarded(console):
        _render_report(report, console, details)


def print_summary(report: Report, console: Console) -> None:
    """One line per finding, root cause first: what failed, where, whether the config confirms it, the fix.
    A fix that does not fit beside its row (an 80-column terminal) goes on the line below it, wrapped between
    override items rather than inside them."""
    rows = summary_rows(report)
    widths = [max(len(row[column]) for row in [SUMMARY_HEADER, *rows]) for column in range(len(SUMMARY_HEADER) - 1)]
    lead = sum(widths) + 2 * len(widths)
    fits = [lead + len(row[-1]) <= console.width for row in rows]
    header = list(SUMMARY_HEADER) if fits[0] else list(SUMMARY_HEADER[:-1])
    console.print(
        Text("  ".join(cell.ljust(width) for cell, width in zip(header, widths + [0])).rstrip(), style="bold"),
        overflow="fold",
    )
    for finding, row, one_line in zip(report.findings, rows, fits):
        verdict_style = _VERDICT_STYLE.get(finding.config.verdict, "") if row[4] != "-" else "dim"
        styles = ("", _SEVERITY_STYLE[finding.signature.severity], "bold", "cyan", verdict_style)
        line = Text()
        for cell, width, style in zip(row, widths, styles):
            line.append(cell.ljust(width) + "  ", style=style)
        fix = Text(row[-1], style="bold green")
        if one_line:
            console.print(line + fix, no_wrap=True, overflow="fold")
        else:
            line.rstrip()  # in place
            console.print(line, overflow="fold")
            indent = len(row[0]) + 2
            if max(map(len, row[-1].split()), default=0) > console.width - indent - len("fix: "):
                # A narrow terminal: an override wider than the column would be cut with "…". Each piece goes
                # on a line of its own, never cut (the terminal wraps it; a copy of the line is whole).
                console.print(" " * indent + "fix:")
                for piece in _packed(row[-1].split(), console.width - 2):
                    console.print(Text("  " + piece, style="bold green"), no_wrap=True, overflow="ignore", crop=False)
                continue
            below = Table.grid(padding=(0, 1))
            below.add_column(no_wrap=True)
            below.add_column()
            below.add_row("fix:", fix)
            console.print(Padding(below, (0, 0, 0, indent), expand=False))


def _packed(pieces: list[str], width: int) -> list[str]:
    """Pieces joined by spaces into lines of at most `width`; a longer piece is a line of its own."""
    lines: list[str] = []
    for piece in pieces:
        if lines and len(lines[-1]) + 1 + len(piece) <= width:
            lines[-1] += " " + piece
        else:
            lines.append(piece)
    return lines


def _render_report(report: Report, console: Console, details: bool = False) -> None:
    if report.runs:
        console.print(Text(headline(report), style="bold"))
        for index, run in enumerate(report.runs, start=1):
            console.rule(Text(run_heading(index, run, len(report.runs)), style="bold"), align="left")
            _render_report(run, console, details)
        for note in notes_for_all_runs(report):
            console.print(Text("note: " + safe_text(note), style="dim"))
        for line in project_file_lines(report):
            console.print(Text(line, style="dim"))
        return
    console.print(Text(headline(report), style="bold"))
    for line in up_front_lines(report):
        console.print(Text(line, style="bold yellow"))
    if report.findings:
        print_summary(report, console)
    if report.unmatched:
        title = "No signature explains this failure line" if report.findings else "No known failure matched"
        body = Text(evidence_location(report.unmatched) + "\n", style="cyan")
        body.append(safe_text(report.unmatched.text))
        console.print(Panel(body, title=title, title_align="left", border_style="yellow"))
    elif not report.findings and not all_empty(report):
        console.print(Text(nothing_found_line(report), style="yellow" if report.suppressed else "green"))
    if report.findings and not details:
        console.print(Text(DETAILS_HINT, style="dim"))
    for index, finding in enumerate(report.findings, start=1):
        console.print(finding_panel(index, finding, details, console.width))
    for note in shown_notes(report, details):
        console.print(Text("note: " + note, style="dim"))
    for line in suppressed_lines(report):
        console.print(Text(line, style="yellow" if line.startswith("suppressed") else "dim"))


# What a panel takes from the console's width before an evidence line: borders and padding (4), the label
# column and its gap (9), the evidence indent (2).
_PANEL_MARGIN = 15
# ... and before a title: the corners, the rule before it and the spaces either side (rich's Panel).
_TITLE_MARGIN = 6


def finding_panel(index: int, finding: Finding, details: bool = True, width: int | None = None) -> Panel:
    signature = finding.signature
    grid = Table.grid(padding=(0, 1))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column()

    summary = occurrence_summary(finding)
    groups, hidden = grouped_evidence(finding.evidence, details)
    rows = [Text(summary, style="dim")] if summary else []
    for where, text in groups:
        rows.append(Text(where, style="cyan"))
        # Without --details a log line is one screen line: the whole text is in --details and --format json.
        if not details and width is not None:
            text = cut_evidence(text, width - _PANEL_MARGIN)
        rows.append(Text("  " + text, no_wrap=not details, overflow="fold" if details else "ellipsis"))
    if hidden:
        rows.append(Text(f"(+{hidden} more: --details)", style="dim"))
    grid.add_row("Evidence", Group(*rows))
    if finding.facts:
        grid.add_row("Numbers", Text("\n".join(f"{label}: {value}" for label, value in fact_lines(finding.facts))))
    if details:
        grid.add_row("Cause", Text(" ".join(signature.cause.split())))
    verdict = Text(finding.config.verdict.upper(), style=_VERDICT_STYLE[finding.config.verdict])
    verdict.append(": " + finding.config.explanation)
    for value in finding.config.values:
        verdict.append("\n" + config_value_line(value), style="" if value.known else "dim")
    grid.add_row("Config", verdict)
    if details:
        grid.add_row("Confirm", Text("\n".join(f"- {step}" for step in signature.confirm)))
    fix = Text(overflow="fold")  # an override wider than the panel folds onto the next line: never cut with "…"
    sentences = finding.fix_sentences
    for number, sentence in enumerate(sentences):
        last = number == len(sentences) - 1
        fix.append(sentence + ("" if last else "\n"), style="yellow" if finding.fix_note and number == 0 else "")
    for line in finding.overrides:
        fix.append("\n  " + safe_text(line), style="bold green")
    grid.add_row("Fix", fix)

    title = Text(f"{index}. ")
    title.append(signature.severity.upper(), style=_SEVERITY_STYLE[signature.severity])
    title.append(f"  {signature.id}  ", style="bold")
    title.append(signature.title)
    if width:  # rich cuts a title too wide for the border mid-word; cut it with an ellipsis instead
        title.truncate(max(10, width - _TITLE_MARGIN), overflow="ellipsis")
    return Panel(
        Group(grid), title=title, title_align="left", border_style=_SEVERITY_STYLE[signature.severity].split()[-1]
    )


def render_check_terminal(report, console: Console) -> None:
    with _guarded(console):
        _render_check(report, console)


def _render_check(report, console: Console) -> None:
    from offloaddoctor.render.check_view import check_headline, unchecked_lines

    console.print(Text(check_headline(report), style="bold"))
    for index, violation in enumerate(report.violations, start=1):
        console.print(finding_panel(index, violation))
    if not report.violations:
        console.print(Text("The config satisfies every constraint that could be checked.", style="green"))
    for line in unchecked_lines(report):
        console.print(Text(line, style="dim"))
    for note in report.notes:
        console.print(Text("note: " + safe_text(note), style="dim"))
