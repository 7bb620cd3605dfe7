"""`diagnose`, the command itself: logs in, findings out in every format, exit code by --fail-on. Typer-free:
both roads call it, typer's (`cli/diagnose.py`) and the fast one (`cli/fast_path.py`)."""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from pathlib import Path

from offloaddoctor.cli.common import (
    EXIT_CLEAN,
    EXIT_FINDINGS,
    FailOn,
    OutputFormat,
    fail,
    load_catalog_or_fail,
    make_console,
    wants_terminal,
)
from offloaddoctor.errors import UserError


def run_diagnose(
    *,
    logs: list[str],
    config: list[str],
    set_: list[str],
    output_format: OutputFormat,
    output: list[str],
    fail_on: FailOn | None,
    ignore: list[str],
    signatures: list[Path],
    baseline: str | None,
    recursive: bool,
    details: bool = False,
) -> int:
    """Returns the exit code; a usage error exits with EXIT_USAGE after one line on stderr."""
    from offloaddoctor.api import diagnose
    from offloaddoctor.policy import load_policy
    from offloaddoctor.render.outputs import check_outputs, parse_output

    try:
        policy = load_policy().add_command_line(fail_on.value if fail_on is not None else None, ignore)
        outputs = [parse_output(spec) for spec in output]
        # before the scan: a failure to write after the report printed would exit 2 and hide its exit 1
        check_outputs(outputs, logs, [*config, *([baseline] if baseline else [])], recursive)
    except UserError as exc:
        fail(str(exc))
    catalog = load_catalog_or_fail(signatures, policy)
    try:
        with _progress_bar(logs, output_format) as progress:
            report = diagnose(
                logs,
                config,
                set_,
                catalog=catalog,
                baseline=baseline,
                progress=progress,
                recursive=recursive,
                policy=policy,
            )
    except UserError as exc:
        fail(str(exc))
    _emit(report, output_format, catalog, policy, details)
    _write_outputs(report, outputs, catalog, policy, details)
    return EXIT_FINDINGS if policy.failed(report) else EXIT_CLEAN


PROGRESS_MIN_BYTES = 64 * 1024 * 1024


@contextmanager
def _progress_bar(logs: list[str], output_format: OutputFormat):
    """A rich bar on stderr for long scans (PROGRESS_MIN_BYTES or more) by a person at a terminal; never in CI
    or machine formats. It starts only once the scan is known to be long: a short scan prints nothing."""
    from offloaddoctor.render.formats import MACHINE_FORMATS

    machine = output_format in MACHINE_FORMATS
    if machine or os.environ.get("CI") or os.environ.get("GITHUB_ACTIONS") or not sys.stderr.isatty():
        yield None
        return
    state: dict = {}

    def update(done: int, total: int) -> None:
        if total < PROGRESS_MIN_BYTES:
            return
        if "bar" not in state:
            from rich.console import Console
            from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn

            state["bar"] = Progress(
                "scanning",
                BarColumn(),
                DownloadColumn(),
                TimeRemainingColumn(),
                console=Console(stderr=True),
                transient=True,
            )
            state["bar"].start()
            state["task"] = state["bar"].add_task("scan", total=total)
        state["bar"].update(state["task"], completed=done, total=total)

    try:
        yield update
    finally:
        if "bar" in state:
            state["bar"].stop()


def _write_outputs(report, outputs: list[tuple[str, str]], catalog, policy, details: bool) -> None:
    from offloaddoctor.render.outputs import render

    for output_format, path in outputs:
        try:
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(render(report, output_format, catalog, policy, details))
        except OSError as exc:
            fail(f"--output {path}: cannot write: {exc.strerror or exc}")


def _emit(report, output_format: OutputFormat, catalog, policy, details: bool) -> None:
    if output_format is OutputFormat.auto and os.environ.get("GITHUB_ACTIONS") == "true":
        output_format = OutputFormat.github
    if output_format is not OutputFormat.github and wants_terminal(output_format):
        from offloaddoctor.render.terminal import render_terminal

        render_terminal(report, make_console(), details)
        return
    from offloaddoctor.render.outputs import emit

    try:
        emit(report, output_format.value, catalog, policy, details, sys.stdout.write)
    except UserError as exc:
        fail(str(exc))
