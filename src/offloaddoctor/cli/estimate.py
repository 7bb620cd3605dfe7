"""`estimate`: will this config fit, which component is largest, what is the cheapest change that fits."""

import sys
from enum import Enum
from pathlib import Path
from typing import List, Optional

import typer

from offloaddoctor.cli._app import SET_VALUES, Command, app, examples
from offloaddoctor.cli.common import EXIT_CLEAN, EXIT_FINDINGS, fail, load_catalog_or_fail


class EstimateFormat(str, Enum):
    text = "text"
    json = "json"
    markdown = "markdown"


@app.command(
    cls=Command,
    short_help="Estimate peak GPU memory before launch: components, fits or not, the cheapest changes that fit.",
    epilog=examples(
        "offloaddoctor estimate run_config.yaml --gpu H100-80GB",
        "# a Bridge run_config.yaml without the sequence length or vocabulary: take them from the run's log",
        "offloaddoctor estimate run_config.yaml --log job.log --gpu H100-80GB --target 70GiB",
    ),
)
def estimate(
    config: List[str] = typer.Argument(
        None,
        metavar="[CONFIG]...",
        help="Bridge/Megatron YAML, launch script, or a training log (its arguments block).",
    ),
    set_: List[str] = SET_VALUES,
    gpu: Optional[str] = typer.Option(
        None, "--gpu", metavar="NAME", help="H100-80GB, H200, A100-80GB, A100-40GB, B200 or GB200."
    ),
    gpu_memory: Optional[str] = typer.Option(
        None, "--gpu-memory", metavar="SIZE", help="GPU memory, e.g. 80GiB (instead of --gpu)."
    ),
    target: Optional[str] = typer.Option(
        None, "--target", metavar="SIZE", help="Memory budget to fit in, e.g. 70GiB: lists the changes that fit it."
    ),
    host_memory: Optional[str] = typer.Option(
        None,
        "--host-memory",
        metavar="SIZE",
        help="A node's memory (what `free -g` says is available), e.g. 1000GiB: the host verdict for optimizer "
        "offloading, and changes that fit the GPU and the host.",
    ),
    log: List[str] = typer.Option(
        [],
        "--log",
        metavar="PATH",
        help="The run's log: what the config leaves out (sequence length, vocabulary) is read from its arguments "
        "block or Bridge's start-up summary; the config wins. Repeatable.",
    ),
    world_size: Optional[int] = typer.Option(
        None, "--world-size", metavar="N", help="GPUs in the job (when the config does not say)."
    ),
    output_format: EstimateFormat = typer.Option(EstimateFormat.text, "--format", "-f", help="text, json or markdown."),
    signatures: List[Path] = typer.Option(
        [],
        "--signatures",
        metavar="DIR",
        help="Extra signature directory (its constraints screen the advice). Repeatable.",
    ),
) -> None:
    """Estimate peak GPU memory before launch: components, fits or not, and the cheapest changes that fit.

    Exit 0 when it fits (or no GPU was given), 1 when it does not (the GPU or, with --host-memory, the host) or when
    `check` refuses the config, 2 on bad input."""
    from offloaddoctor.api import estimate as run_estimate
    from offloaddoctor.memory import MissingKeys

    catalog = load_catalog_or_fail(signatures)
    try:
        report = run_estimate(config or [], set_, gpu, gpu_memory, target, world_size, catalog, log, host_memory)
    except MissingKeys as exc:
        # A config without the model's sequence length or vocabulary (a Bridge YAML cut to a few sections):
        # the run's own log prints them, as `diagnose --config` reads it.
        fail(str(exc) + ("" if log else "; or give the run's log with --log LOG, which prints them"))
    if output_format is EstimateFormat.json:
        from offloaddoctor.render.estimate_view import render_estimate_json as render
    elif output_format is EstimateFormat.markdown:
        from offloaddoctor.render.estimate_view import render_estimate_markdown as render
    else:
        from offloaddoctor.render.estimate_view import render_estimate_text as render
    sys.stdout.write(render(report))
    raise typer.Exit(EXIT_FINDINGS if report.fits is False or report.refused_by else EXIT_CLEAN)
