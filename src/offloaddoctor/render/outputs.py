"""One report, many formats: pick a renderer by name or by an output file's suffix."""

from __future__ import annotations

import os
from collections.abc import Sequence

from offloaddoctor.report import Report
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


def check_outputs(
    outputs: list[tuple[str, str]], logs: Sequence[str], other_inputs: Sequence[str] = (), recursive: bool = False
) -> None:
    """Refuse, before anything is scanned, an output that cannot be written (its directory missing or not
    writable, a directory itself, `-`) or that is an input: a log, a config, or a file a log directory would
    list (a report written there is read back as a log next run)."""
    for output_format, path in outputs:
        shown = f"--output {output_format}={path}"
        if path in ("", "-"):
            raise UserError(f"{shown}: name a file (standard output is --format's: use --format {output_format})")
        check_output_path(shown, path, logs, other_inputs, recursive)


def check_output_path(
    shown: str, path: str, logs: Sequence[str], other_inputs: Sequence[str] = (), recursive: bool = False
) -> None:
    """One output file (`shown`: the option as the user wrote it): see check_outputs."""
    if path in ("", "-"):
        raise UserError(f"{shown}: name a file")
    if os.path.isdir(path):
        raise UserError(f"{shown}: is a directory; name a file in it")
    parent = os.path.dirname(path) or "."
    if not os.path.isdir(parent):
        raise UserError(f"{shown}: cannot write: directory {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise UserError(f"{shown}: cannot write: permission denied")
    read = _input_it_would_overwrite(path, logs, other_inputs, recursive)
    if read is not None:
        raise UserError(f"{shown}: {read}; name another file")


def _input_it_would_overwrite(
    path: str, logs: Sequence[str], other_inputs: Sequence[str], recursive: bool
) -> str | None:
    """What `path` is among the inputs: the same file as one (by inode, or by real path when it does not exist
    yet), or a log file one of the log directories would list."""
    from offloaddoctor.logs.sources import is_log_name

    real = os.path.realpath(path)
    for given in [*logs, *other_inputs]:
        if given == "-":
            continue
        if given in logs and _is_pattern(given):
            import fnmatch
            import glob

            if fnmatch.fnmatch(os.path.normpath(path), os.path.normpath(given)) or any(
                _same_file(path, real, match) for match in glob.glob(given, recursive=True)
            ):
                return f"the input pattern {given} would read it as a log"
        elif os.path.isdir(given) and given in logs:
            directory = os.path.realpath(given)
            within = (
                os.path.commonpath([directory, real]) == directory if recursive else os.path.dirname(real) == directory
            )
            if within and is_log_name(os.path.basename(real)):
                return f"it would be read as a log of the input directory {given}"
        elif _same_file(path, real, given):
            return f"it is the input {given}: it would be overwritten"
    return None


def _is_pattern(given: str) -> bool:
    return any(c in given for c in "*?[") and not os.path.exists(given)  # as logs/sources.py reads it


def _same_file(path: str, real: str, given: str) -> bool:
    try:
        return os.path.samefile(path, given)
    except OSError:  # the output does not exist yet (or the input is gone): compare where they lead
        return real == os.path.realpath(given)


def render(report: Report, output_format: str, catalog: Catalog, policy: Policy, details: bool = False) -> str:
    if output_format == "json":
        from offloaddoctor.render.json_report import render_json

        return render_json(report)
    if output_format == "junit":
        from offloaddoctor.render.junit import render_junit

        return render_junit(report, catalog, {f.id for f in report.findings if policy.fails(f)})
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
