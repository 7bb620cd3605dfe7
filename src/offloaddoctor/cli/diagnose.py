"""`diagnose` as typer declares it; the command itself is `run_diagnose` (shared with the fast road)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from offloaddoctor.cli._app import Command, app, examples
from offloaddoctor.cli.common import FailOn, OutputFormat


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
    set_: List[str] = typer.Option(
        [], "--set", "-s", metavar="KEY=VALUE", help="Override a config value (Bridge CLI form). Repeatable."
    ),
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
    signatures: List[Path] = typer.Option(
        [], "--signatures", metavar="DIR", help="Extra signature directory. Repeatable."
    ),
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
    from offloaddoctor.cli.run_diagnose import run_diagnose

    raise typer.Exit(
        run_diagnose(
            logs=logs,
            config=config,
            set_=set_,
            output_format=output_format,
            output=output,
            fail_on=fail_on,
            ignore=ignore,
            signatures=signatures,
            baseline=baseline,
            recursive=recursive,
            details=details,
        )
    )
