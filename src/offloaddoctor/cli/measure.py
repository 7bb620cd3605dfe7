"""`metrics` and `compare`: numbers from logs, and runs against a baseline."""

from __future__ import annotations

import sys
from typing import List, Optional

import typer

from offloaddoctor.cli._app import app
from offloaddoctor.cli.common import EXIT_CLEAN, EXIT_FINDINGS, OutputFormat, fail
from offloaddoctor.errors import UserError
from offloaddoctor.render.formats import MetricsFormat


@app.command()
def compare(
    baseline: str = typer.Argument(..., help="The baseline run's log (or directory of per-rank logs)."),
    runs: List[str] = typer.Argument(..., help="Logs of runs with other offload settings."),
    config: List[str] = typer.Option([], "--config", "-c", metavar="LOG=CONFIG", help="Offload settings for LOG from CONFIG instead of its arguments block. Repeatable."),
    loss_tolerance: float = typer.Option(0.001, "--loss-tolerance", min=0.0, help="Max |Δ loss| allowed (the guide's 0.001)."),
    memory_tolerance: float = typer.Option(0.25, "--memory-tolerance", min=0.0, help="Relative tolerance on the proportional memory saving."),
    output_format: OutputFormat = typer.Option(OutputFormat.text, "--format", "-f", help="text (default) or json."),
    plot: Optional[str] = typer.Option(None, "--plot", metavar="FILE.png", help="Also plot time and memory against the fraction (needs matplotlib)."),
) -> None:
    """Compare runs with different offload settings against a baseline: time, memory, loss; pass/fail per run."""
    from offloaddoctor.api import compare as run_compare
    from offloaddoctor.metrics.compare import Criteria

    run_configs: dict[str, list[str]] = {}
    for item in config:
        log, sep, path = item.partition("=")
        if not sep or not log or not path:
            fail(f"--config {item}: expected LOG=CONFIG, e.g. --config run.log=run_config.yaml")
        run_configs.setdefault(log, []).append(path)
    try:
        comparison = run_compare(baseline, runs, run_configs, Criteria(loss_tolerance, memory_tolerance))
        if plot:
            from offloaddoctor.render.compare_plot import write_plot

            write_plot(comparison, plot)
    except UserError as exc:
        fail(str(exc))
    from offloaddoctor.render.compare_view import render_compare_json, render_compare_plain

    sys.stdout.write(render_compare_json(comparison) if output_format is OutputFormat.json else render_compare_plain(comparison))
    raise typer.Exit(EXIT_FINDINGS if comparison.failed else EXIT_CLEAN)


@app.command()
def metrics(
    logs: List[str] = typer.Argument(..., help="One run each: a log file, a directory of its per-rank logs, or -."),
    output_format: MetricsFormat = typer.Option(MetricsFormat.text, "--format", "-f", help="text, json or csv (one row per rank and iteration)."),
) -> None:
    """Per-rank, per-iteration numbers from training logs, and a steady-state summary per run."""
    from offloaddoctor.cli.run_check import run_metrics

    raise typer.Exit(run_metrics(logs=logs, output_format=output_format))
