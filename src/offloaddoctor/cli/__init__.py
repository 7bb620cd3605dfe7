"""Command line: parse, call the library, render, map to an exit code. One module per job; importing them
registers their commands on `app`, in the order `--help` lists them."""

from __future__ import annotations

import sys

from offloaddoctor.cli import diagnose, check, bisect, measure, catalog  # noqa: F401,E402 - registration
from offloaddoctor.cli._app import app

__all__ = ["app", "main"]


def main() -> None:
    # Always UTF-8 (JSON and the JUnit declaration require it), and a character nothing can encode (a file
    # name's undecodable byte, kept by Python as a lone surrogate) is shown escaped: a Latin-1 or ASCII
    # locale, or strict stdio, must not end the run with UnicodeEncodeError.
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(encoding="utf-8", errors="backslashreplace")
    app()
