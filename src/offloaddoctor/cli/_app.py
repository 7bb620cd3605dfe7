"""The typer app and what every command shares: output choices, one-line errors, the catalogue."""

from __future__ import annotations

import difflib
import os
import sys
from enum import Enum
from pathlib import Path
from typing import Optional

import typer

from offloaddoctor import __version__

EXIT_CLEAN, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    help="Diagnose Megatron-Core / Megatron-Bridge runs that failed or slowed down because of CPU offloading "
    "and GPU-memory settings.",
)


class OutputFormat(str, Enum):
    auto = "auto"
    terminal = "terminal"
    text = "text"
    json = "json"
    junit = "junit"
    github = "github"
    markdown = "markdown"


class FailOn(str, Enum):
    error = "error"
    warning = "warning"
    never = "never"


def fail(message: str) -> None:
    from offloaddoctor.render.text_safety import safe_text

    # Messages name files found in directories: a name's newline or `::` must not become a runner command.
    shown = "\n".join(safe_text(line) for line in message.split("\n"))
    typer.echo(f"offloaddoctor: error: {shown}", err=True)
    raise typer.Exit(EXIT_USAGE)


def load_catalog_or_fail(signature_dirs: list[Path]):
    from offloaddoctor.catalog.loader import CatalogError, load_catalog

    try:
        return load_catalog(signature_dirs)
    except CatalogError as exc:
        fail(str(exc))


def wants_terminal(output_format: OutputFormat) -> bool:
    return output_format is OutputFormat.terminal or (output_format is OutputFormat.auto and sys.stdout.isatty())


def make_console():
    from rich.console import Console

    return Console(no_color=bool(os.environ.get("NO_COLOR")), highlight=False)


def did_you_mean(name: str, catalog) -> str:
    close = difflib.get_close_matches(name, catalog.ids, n=3)
    return f"; did you mean {', '.join(close)}?" if close else "; run `offloaddoctor signatures` for the list"


def _version(value: bool) -> None:
    if value:
        typer.echo(f"offloaddoctor {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    version: Optional[bool] = typer.Option(None, "--version", callback=_version, is_eager=True, help="Show the version."),
) -> None:
    """offloaddoctor: diagnose CPU-offloading and GPU-memory failures in Megatron runs."""

