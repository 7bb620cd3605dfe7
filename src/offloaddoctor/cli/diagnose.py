"""`diagnose`: logs in, findings out in every format, exit code by --fail-on."""

import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import List, Optional

import typer

from offloaddoctor.cli._app import SET_VALUES, SIGNATURE_DIRS, Command, app, examples
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


@app.command(
    cls=Command,
    short_help="Find known offloading/memory failures in logs; check them against the config.",
    epilog=examples(
        "offloaddoctor diagnose job.log --config run_config.yaml",
        "# a directory of per-rank logs, .gz included; exit 1 on an error finding",
        "offloaddoctor diagnose logs/ --format json --output junit.xml",
    ),
)
def diagnose(
    logs: List[str] = typer.Argument(
        ...,
        metavar="LOG...",
        help="Log files, directories of logs, or - for standard input. Logs of one job (its rank logs) make one "
        "report; logs of different runs (told apart by arguments block, world size, model shape, ranks) one each.",
    ),
    config: List[str] = typer.Option(
        [], "--config", "-c", metavar="PATH", help="Run config: Bridge/Megatron YAML or a launch script. Repeatable."
    ),
    set_: List[str] = SET_VALUES,
    output_format: OutputFormat = typer.Option(
        OutputFormat.auto,
        "--format",
        "-f",
        help="Standard output. auto: github under GitHub Actions, panels on a terminal, plain text otherwise.",
    ),
    output: List[str] = typer.Option(
        [],
        "--output",
        "-o",
        metavar="FORMAT=PATH",
        help="Also write FORMAT=PATH (or PATH.json/.xml/.md/.txt). Repeatable.",
    ),
    fail_on: Optional[FailOn] = typer.Option(
        None,
        "--fail-on",
        help="Exit 1 on findings of this severity or worse (default: error); unknown: also on a failure no signature explains.",
    ),
    ignore: List[str] = typer.Option(
        [], "--ignore", metavar="ID", help="Suppress a signature id (the report says what it left out). Repeatable."
    ),
    signatures: List[Path] = SIGNATURE_DIRS,
    baseline: Optional[str] = typer.Option(
        None,
        "--baseline",
        metavar="LOG",
        help="A healthy run's log: the slowdown measured against it is always reported.",
    ),
    recursive: bool = typer.Option(False, "--recursive", "-r", help="Also read log files in subdirectories."),
    details: bool = typer.Option(
        False,
        "--details",
        "-v",
        help="Text and terminal: every evidence line, causes, confirmation steps and every note.",
    ),
) -> None:
    """Find known offloading/memory failures in training logs and check them against the run's config.

    Logs of one job (per-rank logs, a restarted job's log) are one run and one report. Logs of different runs
    (a different arguments block, world size or model shape, or the same rank twice with different content)
    are never merged into one config: each run gets its own report (in json, junit, github and markdown, the
    findings are grouped per run). A log that prints no config joins the others only if they are one run."""
    from offloaddoctor.api import diagnose as run_diagnose
    from offloaddoctor.policy import load_policy
    from offloaddoctor.render.outputs import check_outputs, parse_output

    policy = load_policy().add_command_line(fail_on.value if fail_on is not None else None, ignore)
    outputs = [parse_output(spec) for spec in output]
    # before the scan: a failure to write after the report printed would exit 2 and hide its exit 1
    check_outputs(outputs, logs, [*config, *([baseline] if baseline else [])], recursive)
    catalog = load_catalog_or_fail(signatures, policy)
    with _progress_bar(logs, output_format) as progress:
        report = run_diagnose(
            logs,
            config,
            set_,
            catalog=catalog,
            baseline=baseline,
            progress=progress,
            recursive=recursive,
            policy=policy,
        )
    _emit(report, output_format, catalog, policy, details)
    _write_outputs(report, outputs, catalog, policy, details)
    raise typer.Exit(EXIT_FINDINGS if policy.failed(report) else EXIT_CLEAN)


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

    emit(report, output_format.value, catalog, policy, details, sys.stdout.write)
