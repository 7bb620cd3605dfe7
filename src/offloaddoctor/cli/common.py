"""What every command shares, without typer: exit codes, output choices, one-line errors, the catalogue.
Typer-free so that the fast road (`fast_path`) can run a command without importing it."""

from __future__ import annotations

import os
import sys
from enum import Enum
from pathlib import Path

EXIT_CLEAN, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT), as shells report it; never 1, which means "findings"


class OutputFormat(str, Enum):
    auto = "auto"
    terminal = "terminal"
    text = "text"
    json = "json"
    junit = "junit"
    github = "github"
    markdown = "markdown"


class CheckFormat(str, Enum):
    """What `check` renders (no CI formats: those belong to `diagnose`)."""

    auto = "auto"
    terminal = "terminal"
    text = "text"
    json = "json"


class TextOrJson(str, Enum):
    text = "text"
    json = "json"


class FailOn(str, Enum):
    error = "error"
    warning = "warning"
    unknown = "unknown"  # errors, and a failure line no signature explains
    never = "never"


def fail(message: str) -> None:
    from offloaddoctor.render.text_safety import safe_text

    # Messages name files found in directories: a name's newline or `::` must not become a runner command.
    shown = "\n".join(safe_text(line) for line in message.split("\n"))
    sys.stderr.write(f"offloaddoctor: error: {shown}\n")
    raise SystemExit(EXIT_USAGE)


def load_catalog_or_fail(signature_dirs: list[Path]):
    from offloaddoctor.catalog.loader import CatalogError, load_catalog

    try:
        return load_catalog(signature_dirs)
    except CatalogError as exc:
        fail(str(exc))


def wants_terminal(output_format) -> bool:
    return output_format.value == "terminal" or (output_format.value == "auto" and sys.stdout.isatty())


def make_console():
    from rich.console import Console

    return Console(no_color=bool(os.environ.get("NO_COLOR")), highlight=False)


def did_you_mean(name: str, catalog) -> str:
    import difflib

    close = difflib.get_close_matches(name, catalog.ids, n=3)
    return f"; did you mean {', '.join(close)}?" if close else "; run `offloaddoctor signatures` for the list"
