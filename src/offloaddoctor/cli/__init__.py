"""Command line: parse, call the library, render, map to an exit code. One module per job; importing them
registers their commands on `app`, in the order `--help` lists them."""

from __future__ import annotations

from offloaddoctor.cli import diagnose, check, bisect, measure, catalog  # noqa: F401,E402 - registration
from offloaddoctor.cli._app import app

__all__ = ["app", "main"]


def main() -> None:
    app()
