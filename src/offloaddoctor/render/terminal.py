"""Rich panels for a person at a terminal. Every piece of log or config text goes in as a `Text`
object, never as markup, so `[bold red]` in a log is shown as written."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from offloaddoctor.analysis.findings import Finding, Report
from offloaddoctor.render.facts import fact_lines
from offloaddoctor.render.plain import (
    config_value_line, evidence_location, grouped_evidence, headline, occurrence_summary,
)
from offloaddoctor.render.text_safety import safe_text

_SEVERITY_STYLE = {"error": "bold red", "warning": "bold yellow", "info": "bold blue"}
_VERDICT_STYLE = {"confirmed": "green", "contradicted": "bold magenta", "unknown": "dim"}
# A printed line that opens with `::` (after colour codes and blanks) would be a runner command.
_RUNNER_OPENER = re.compile(r"^((?:\x1b\[[0-9;]*m|[ \t])*):(?=:)", re.MULTILINE)


@contextmanager
def _guarded(console: Console) -> Iterator[None]:
    """Rich wraps long lines, so log text that safe_text left mid-line (`x ::error::y`) can start a printed
    line; escape that opener on the lines as printed."""
    with console.capture() as captured:
        yield
    console.file.write(_RUNNER_OPENER.sub(r"\1\\x3a", captured.get()))
    console.file.flush()


def render_terminal(report: Report, console: Console) -> None:
    with _guarded(console):
        _render_report(report, console)


def _render_report(report: Report, console: Console) -> None:
    console.print(Text(headline(report), style="bold"))
    for index, finding in enumerate(report.findings, start=1):
        console.print(finding_panel(index, finding))
    if report.unmatched:
        title = "No signature explains this failure line" if report.findings else "No known failure matched"
        body = Text(evidence_location(report.unmatched) + "\n", style="cyan")
        body.append(safe_text(report.unmatched.text))
        console.print(Panel(body, title=title, title_align="left", border_style="yellow"))
    elif not report.findings:
        console.print(Text("The log shows no error that offloaddoctor knows, and no traceback.", style="green"))
    for note in report.notes:
        console.print(Text("note: " + safe_text(note), style="dim"))


def finding_panel(index: int, finding: Finding) -> Panel:
    signature = finding.signature
    grid = Table.grid(padding=(0, 1))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column()

    evidence = Text()
    summary = occurrence_summary(finding)
    if summary:
        evidence.append(summary + "\n", style="dim")
    groups, hidden = grouped_evidence(finding.evidence)
    for locations, text in groups:
        evidence.append(", ".join(locations) + "\n", style="cyan")
        evidence.append("  " + text + "\n")
    if hidden:
        evidence.append(f"(+{hidden} more evidence line{'s' if hidden != 1 else ''} in --format json)\n", style="dim")
    grid.add_row("Evidence", evidence)
    if finding.facts:
        grid.add_row("Numbers", Text("\n".join(f"{label}: {value}" for label, value in fact_lines(finding.facts))))
    grid.add_row("Cause", Text(" ".join(signature.cause.split())))
    verdict = Text(finding.config.verdict.upper(), style=_VERDICT_STYLE[finding.config.verdict])
    verdict.append(": " + finding.config.explanation)
    for value in finding.config.values:
        verdict.append("\n" + config_value_line(value), style="" if value.known else "dim")
    grid.add_row("Config", verdict)
    grid.add_row("Confirm", Text("\n".join(f"- {step}" for step in signature.confirm)))
    fix = Text(" ".join(signature.fix.summary.split()))
    for line in finding.overrides:
        fix.append("\n  " + safe_text(line), style="bold green")
    grid.add_row("Fix", fix)

    title = Text(f"{index}. ")
    title.append(signature.severity.upper(), style=_SEVERITY_STYLE[signature.severity])
    title.append(f"  {signature.id}  ", style="bold")
    title.append(signature.title)
    return Panel(Group(grid), title=title, title_align="left", border_style=_SEVERITY_STYLE[signature.severity].split()[-1])


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
