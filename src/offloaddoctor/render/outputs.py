"""One report, many formats: pick a renderer by name or by an output file's suffix."""

from __future__ import annotations

import os

from offloaddoctor.analysis.findings import Report
from offloaddoctor.catalog.model import Catalog
from offloaddoctor.errors import UserError
from offloaddoctor.policy import Policy
from offloaddoctor.render.formats import FILE_FORMATS

_SUFFIXES = {".json": "json", ".xml": "junit", ".md": "markdown", ".txt": "text", ".log": "text"}


def parse_output(spec: str) -> tuple[str, str]:
    """`FORMAT=PATH` or `PATH` (format from the suffix: .json, .xml → junit, .md, .txt)."""
    name, sep, path = spec.partition("=")
    if sep and name in FILE_FORMATS:
        return name, path
    suffix = os.path.splitext(spec)[1].lower()
    if suffix not in _SUFFIXES:
        raise UserError(
            f"--output {spec}: say the format as FORMAT=PATH ({', '.join(FILE_FORMATS)}) or use a .json, .xml, .md or .txt name"
        )
    return _SUFFIXES[suffix], spec


def render(report: Report, output_format: str, catalog: Catalog, policy: Policy, details: bool = False) -> str:
    if output_format == "json":
        from offloaddoctor.render.json_report import render_json

        return render_json(report)
    if output_format == "junit":
        from offloaddoctor.render.junit import render_junit

        return render_junit(report, catalog, {f.id for f in report.findings if policy.fails(f)}, report.suppressed)
    if output_format == "markdown":
        from offloaddoctor.render.markdown import render_markdown

        return render_markdown(report)
    if output_format == "github":
        from offloaddoctor.render.github import render_github

        return render_github(report)[0]  # a file gets the annotations; the step summary is emit_github's
    from offloaddoctor.render.plain import render_plain

    return render_plain(report, details)


def emit(report: Report, output_format: str, catalog: Catalog, policy: Policy, details: bool, write) -> None:
    """Standard output's share, through `write`. For `github` also the job summary, appended to
    $GITHUB_STEP_SUMMARY when the runner sets it, after the annotations are out (a `--output github=FILE`
    gets the annotations only)."""
    if output_format == "json":  # in parts: no copy of the whole text (200,000 rank logs: docs/performance.md)
        from offloaddoctor.render.json_report import json_parts

        for part in json_parts(report):
            write(part)
        return
    if output_format != "github":
        write(render(report, output_format, catalog, policy, details))
        return
    from offloaddoctor.render.github import render_github

    annotations, summary = render_github(report)
    write(annotations)
    summary_path = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary_path:
        try:
            with open(summary_path, "a", encoding="utf-8") as handle:
                handle.write(summary)
        except OSError as exc:
            raise UserError(f"GITHUB_STEP_SUMMARY {summary_path}: cannot write: {exc.strerror or exc}") from None
