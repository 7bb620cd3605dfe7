"""`diagnose` as typer declares it; the command itself is `run_diagnose` (shared with the fast road)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from offloaddoctor.cli._app import app
from offloaddoctor.cli.common import FailOn, OutputFormat


@app.command()
def diagnose(
    logs: List[str] = typer.Argument(..., help="Log files, directories of logs, or - for standard input."),
    config: List[str] = typer.Option([], "--config", "-c", help="Run config: Bridge/Megatron YAML or a launch script. Repeatable."),
    set_: List[str] = typer.Option([], "--set", "-s", help="Override KEY=VALUE (Bridge CLI form). Repeatable."),
    output_format: OutputFormat = typer.Option(
        OutputFormat.auto, "--format", "-f",
        help="Standard output. auto: github under GitHub Actions, panels on a terminal, plain text otherwise.",
    ),
    output: List[str] = typer.Option([], "--output", "-o", help="Also write FORMAT=PATH (or PATH.json/.xml/.md/.txt). Repeatable."),
    fail_on: Optional[FailOn] = typer.Option(None, "--fail-on", help="Exit 1 on findings of this severity or worse (default: error)."),
    ignore: List[str] = typer.Option([], "--ignore", help="Suppress a signature id. Repeatable."),
    signatures: List[Path] = typer.Option([], "--signatures", help="Extra signature directory. Repeatable."),
    baseline: Optional[str] = typer.Option(None, "--baseline", metavar="BASE.log", help="A healthy run's log: decide the slowdown from measured iteration times."),
    recursive: bool = typer.Option(False, "--recursive", "-r", help="Also read log files in subdirectories."),
) -> None:
    """Find known offloading/memory failures in training logs and check them against the run's config."""
    from offloaddoctor.cli.run_diagnose import run_diagnose

    raise typer.Exit(run_diagnose(
        logs=logs, config=config, set_=set_, output_format=output_format, output=output, fail_on=fail_on, ignore=ignore,
        signatures=signatures, baseline=baseline, recursive=recursive,
    ))
