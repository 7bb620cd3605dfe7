"""GitHub Actions: workflow-command annotations for the most important findings, the rest in the job
summary (Markdown, appended to $GITHUB_STEP_SUMMARY when set).

Every value is escaped the way the runner unescapes it (data: `%`, CR, LF; properties also `:` and
`,`), and log text has already had runner-command openers neutralised by safe_text, so nothing from a
log can become a command of its own.
"""

from __future__ import annotations

from offloaddoctor.report import Finding, Report
from offloaddoctor.render.markdown import render_markdown
from offloaddoctor.render.plain import headline, occurrence_summary
from offloaddoctor.text_safety import safe_text

MAX_ANNOTATIONS = 10
_LEVEL = {"error": "error", "warning": "warning", "info": "notice"}


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(finding: Finding, run: str = "") -> str:
    """`run`: `run 2 of 3: ` when the logs hold several runs."""
    signature = finding.signature
    properties = [f"title={escape_property(safe_text(f'{run}{finding.id}: {signature.title}'))}"]
    first = finding.evidence[0] if finding.evidence else None
    if first is not None and first.line:
        properties = [f"file={escape_property(safe_text(first.path))}", f"line={first.line}"] + properties
    lines = [part for part in (occurrence_summary(finding), safe_text(first.text) if first else "") if part]
    lines.append(
        f"Config: {finding.config.verdict}: {finding.config.explanation}. Fix: {' '.join(finding.fix_sentences)}"
    )
    lines += [f"  {safe_text(line)}" for line in finding.overrides]
    return f"::{_LEVEL[signature.severity]} {','.join(properties)}::{escape_data(chr(10).join(lines))}"


def render_github(report: Report) -> tuple[str, str]:
    """Returns (stdout: annotations and a one-line headline, Markdown for the job summary)."""
    shown = [f for f in report.findings if f.signature.severity in ("error", "warning")][:MAX_ANNOTATIONS]
    run_of = {
        id(f): f"run {index} of {len(report.runs)}: " for index, run in enumerate(report.runs, 1) for f in run.findings
    }
    out = [annotation(f, run_of.get(id(f), "")) for f in shown]
    rest = len(report.findings) - len(shown)
    out.append(safe_text(headline(report)) + (f" ({rest} more in the job summary)" if rest > 0 else ""))
    return "\n".join(out) + "\n", render_markdown(report)
