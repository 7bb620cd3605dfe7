"""`metrics` and `compare`: numbers from logs, and runs against a baseline."""

import sys
from typing import List, Optional

import typer

from offloaddoctor.cli._app import Command, app, examples
from offloaddoctor.cli.common import EXIT_CLEAN, EXIT_FINDINGS, TextOrJson, fail
from offloaddoctor.render.formats import MetricsFormat


@app.command(
    cls=Command,
    short_help="Compare runs with other offload settings against a baseline: time, memory, loss; pass/fail per run.",
    epilog=examples("offloaddoctor compare baseline.log offload-025.log offload-050.log --plot curve.png"),
)
def compare(
    baseline: str = typer.Argument(
        ..., metavar="BASELINE", help="The baseline run's log (or directory of per-rank logs)."
    ),
    runs: List[str] = typer.Argument(
        ...,
        metavar="LOG...",
        help="Logs of runs with other offload settings; grouped into runs as diagnose does (logs of one job are one run).",
    ),
    run_config: List[str] = typer.Option(
        [],
        "--run-config",
        metavar="LOG=PATH",
        help="Offload settings for LOG from the config at PATH instead of its arguments block. Repeatable.",
    ),
    loss_tolerance: float = typer.Option(
        0.001,
        "--loss-tolerance",
        metavar="DELTA",
        min=0.0,
        help="Max |Δ loss| allowed; the CPU-offloading guide's is 0.001.",
    ),
    memory_tolerance: float = typer.Option(
        0.25,
        "--memory-tolerance",
        metavar="SHARE",
        min=0.0,
        help="Relative tolerance on the proportional memory saving.",
    ),
    output_format: TextOrJson = typer.Option(TextOrJson.text, "--format", "-f", help="text (default) or json."),
    plot: Optional[str] = typer.Option(
        None, "--plot", metavar="PATH.png", help="Also plot time and memory against the fraction (needs matplotlib)."
    ),
) -> None:
    """Compare runs with different offload settings against a baseline: time, memory, loss; pass/fail per run.

    Logs are grouped into runs by the rule diagnose uses: the logs of one job are one run however they are
    passed (and a directory holding several runs gives several); the baseline's logs must be one run."""
    from offloaddoctor.api import compare as run_compare
    from offloaddoctor.metrics.compare import Criteria

    run_configs: dict[str, list[str]] = {}
    for item in run_config:
        log, sep, path = item.partition("=")
        if not sep or not log or not path:
            fail(f"--run-config {item}: expected LOG=PATH, e.g. --run-config run.log=run_config.yaml")
        run_configs.setdefault(log, []).append(path)
    if plot:  # before the comparison: a plot asked for and not drawn is an error, which must not come last
        import importlib.util

        from offloaddoctor.render.outputs import check_output_path

        if importlib.util.find_spec("matplotlib") is None:
            fail("--plot needs matplotlib: pip install 'offloaddoctor[plot]'")
        # the PNG is written where asked, not over an input
        configs = [p for paths in run_configs.values() for p in paths]
        check_output_path(f"--plot {plot}", plot, [baseline, *runs], configs)
    comparison = run_compare(baseline, runs, run_configs, Criteria(loss_tolerance, memory_tolerance))
    from offloaddoctor.render.compare_view import render_compare_json, render_compare_plain

    sys.stdout.write(
        render_compare_json(comparison) if output_format is TextOrJson.json else render_compare_plain(comparison)
    )
    sys.stdout.flush()
    if plot:
        from offloaddoctor.render.compare_plot import write_plot

        write_plot(comparison, plot)
        typer.echo(f"offloaddoctor: plot written to {plot}", err=True)
    raise typer.Exit(EXIT_FINDINGS if comparison.failed else EXIT_CLEAN)


@app.command(
    cls=Command,
    short_help="Per-rank, per-iteration numbers from training logs, and a steady-state summary per run.",
    epilog=examples("offloaddoctor metrics job.log", "offloaddoctor metrics logs/ --format csv > iterations.csv"),
)
def metrics(
    logs: List[str] = typer.Argument(
        ...,
        metavar="LOG...",
        help="Log files, directories of per-rank logs, or -. Grouped into runs as diagnose does: logs of one job "
        "are one run, however passed; logs of different runs (arguments block, world size, model shape, ranks) one each.",
    ),
    output_format: MetricsFormat = typer.Option(
        MetricsFormat.text, "--format", "-f", help="text, json or csv (one row per rank and iteration)."
    ),
) -> None:
    """Per-rank, per-iteration numbers from training logs, and a steady-state summary per run.

    The logs are grouped into runs by the rule diagnose uses: the logs of one job are one run however they are
    passed, and a directory holding several runs gives one summary each."""
    from offloaddoctor.metrics import collect_metrics

    runs = collect_metrics(logs)
    if output_format is MetricsFormat.json:
        from offloaddoctor.render.metrics_json import render_metrics_json as render
    elif output_format is MetricsFormat.csv:
        from offloaddoctor.render.metrics_csv import render_metrics_csv as render
    else:
        from offloaddoctor.render.metrics_text import render_metrics_text as render
    sys.stdout.write(render(runs))
    raise typer.Exit(EXIT_CLEAN)
