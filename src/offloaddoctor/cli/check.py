"""`check`: a config against every preflight constraint."""

import sys
from pathlib import Path
from typing import List, Optional

import typer

from offloaddoctor.cli._app import SET_VALUES, SIGNATURE_DIRS, Command, app, examples
from offloaddoctor.cli.common import (
    EXIT_CLEAN,
    EXIT_FINDINGS,
    CheckFormat,
    load_catalog_or_fail,
    make_console,
    wants_terminal,
)


@app.command(
    cls=Command,
    short_help="Validate a config before launch: every offloading/memory constraint, all violations at once.",
    epilog=examples(
        "offloaddoctor check run_config.yaml --set model.pipeline_model_parallel_size=2",
        "offloaddoctor check launch.sh --gpu H100-80GB",
    ),
)
def check(
    config: List[str] = typer.Argument(
        None, metavar="[CONFIG]...", help="Bridge/Megatron YAML or launch script(s) to validate."
    ),
    set_: List[str] = SET_VALUES,
    select: List[str] = typer.Option([], "--select", metavar="ID", help="Check only this constraint id. Repeatable."),
    no_defaults: bool = typer.Option(
        False, "--no-defaults", help="Leave unset keys unknown instead of taking megatron-core's defaults."
    ),
    output_format: CheckFormat = typer.Option(
        CheckFormat.auto, "--format", "-f", help="auto: panels on a terminal, plain text otherwise."
    ),
    signatures: List[Path] = SIGNATURE_DIRS,
    gpu: Optional[str] = typer.Option(
        None,
        "--gpu",
        metavar="NAME",
        help="Also check the memory estimate against this GPU (H100-80GB, H200, A100-80GB, ...).",
    ),
    gpu_memory: Optional[str] = typer.Option(
        None, "--gpu-memory", metavar="SIZE", help="Like --gpu, by size: e.g. 80GiB."
    ),
    world_size: Optional[int] = typer.Option(
        None, "--world-size", metavar="N", help="GPUs in the job, for the memory estimate and the expert grid."
    ),
    host_memory: Optional[str] = typer.Option(
        None,
        "--host-memory",
        metavar="SIZE",
        help="A node's memory, e.g. 1000GiB: also check optimizer offloading's host memory against it.",
    ),
) -> None:
    """Validate a config before launch against every offloading/memory constraint, all violations at once."""
    from offloaddoctor.api import check as run_check

    catalog = load_catalog_or_fail(signatures)
    report = run_check(
        config or [],
        set_,
        catalog=catalog,
        only=list(select),
        use_defaults=not no_defaults,
        gpu=gpu,
        gpu_memory=gpu_memory,
        world_size=world_size,
        host_memory=host_memory,
    )
    if output_format is CheckFormat.json:
        from offloaddoctor.render.check_view import render_check_json

        sys.stdout.write(render_check_json(report))
    elif wants_terminal(output_format):
        from offloaddoctor.render.terminal import render_check_terminal

        render_check_terminal(report, make_console())
    else:
        from offloaddoctor.render.check_view import render_check_plain

        sys.stdout.write(render_check_plain(report))
    raise typer.Exit(EXIT_FINDINGS if report.violations else EXIT_CLEAN)
