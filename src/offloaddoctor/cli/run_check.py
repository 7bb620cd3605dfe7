"""`check` and `metrics`, the commands themselves: typer-free, so that both roads call them, typer's
(`cli/check.py`, `cli/measure.py`) and the fast one (`cli/fast_path.py`)."""

from __future__ import annotations

import sys
from pathlib import Path

from offloaddoctor.cli.common import (
    EXIT_CLEAN,
    EXIT_FINDINGS,
    CheckFormat,
    fail,
    load_catalog_or_fail,
    make_console,
    wants_terminal,
)
from offloaddoctor.errors import UserError
from offloaddoctor.render.formats import MetricsFormat


def run_check(
    *,
    config: list[str] | None,
    set_: list[str],
    select: list[str],
    no_defaults: bool,
    output_format: CheckFormat,
    signatures: list[Path],
    gpu: str | None,
    gpu_memory: str | None,
    world_size: int | None,
) -> int:
    from offloaddoctor.api import check

    catalog = load_catalog_or_fail(signatures)
    try:
        report = check(
            config or [],
            set_,
            catalog=catalog,
            only=select,
            use_defaults=not no_defaults,
            gpu=gpu,
            gpu_memory=gpu_memory,
            world_size=world_size,
        )
    except UserError as exc:
        fail(str(exc))
    if output_format is CheckFormat.json:
        from offloaddoctor.render.check_view import render_check_json

        sys.stdout.write(render_check_json(report))
    elif wants_terminal(output_format):
        from offloaddoctor.render.terminal import render_check_terminal

        render_check_terminal(report, make_console())
    else:
        from offloaddoctor.render.check_view import render_check_plain

        sys.stdout.write(render_check_plain(report))
    return EXIT_FINDINGS if report.violations else EXIT_CLEAN


def run_metrics(*, logs: list[str], output_format: MetricsFormat) -> int:
    from offloaddoctor.metrics import collect_metrics

    try:
        runs = collect_metrics(logs)
    except UserError as exc:
        fail(str(exc))
    if output_format is MetricsFormat.json:
        from offloaddoctor.render.metrics_json import render_metrics_json as render
    elif output_format is MetricsFormat.csv:
        from offloaddoctor.render.metrics_csv import render_metrics_csv as render
    else:
        from offloaddoctor.render.metrics_text import render_metrics_text as render
    sys.stdout.write(render(runs))
    return EXIT_CLEAN
