"""`check`: a config against every preflight constraint."""

from __future__ import annotations

from pathlib import Path
from typing import List

import typer

from offloaddoctor.cli._app import app
from offloaddoctor.cli.common import OutputFormat


@app.command()
def check(
    config: List[str] = typer.Argument(None, metavar="[CONFIG]...", help="Bridge/Megatron YAML or launch script(s) to validate."),
    set_: List[str] = typer.Option([], "--set", "-s", help="Override KEY=VALUE (Bridge CLI form). Repeatable."),
    signature: List[str] = typer.Option([], "--signature", help="Check only this constraint id. Repeatable."),
    no_defaults: bool = typer.Option(False, "--no-defaults", help="Leave unset keys unknown instead of taking megatron-core's defaults."),
    output_format: OutputFormat = typer.Option(OutputFormat.auto, "--format", "-f", help="auto: panels on a terminal, plain text otherwise."),
    signatures: List[Path] = typer.Option([], "--signatures", help="Extra signature directory. Repeatable."),
) -> None:
    """Validate a config before launch against every offloading/memory constraint, all violations at once."""
    from offloaddoctor.cli.run_check import run_check

    raise typer.Exit(run_check(config=config, set_=set_, signature=signature, no_defaults=no_defaults,
                               output_format=output_format, signatures=signatures))
