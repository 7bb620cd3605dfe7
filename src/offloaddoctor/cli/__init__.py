"""Command line: parse, call the library, render, map to an exit code. One module per job; importing them
registers their commands on the typer app, in the order `--help` lists them. `diagnose` with ordinary
arguments takes the fast road (`fast_path`), which does not import typer at all."""

from __future__ import annotations

import sys

__all__ = ["app", "main", "typer_app"]


def typer_app():
    from offloaddoctor.cli import diagnose, check, estimate, bisect, measure, catalog  # noqa: F401 - registration
    from offloaddoctor.cli._app import app

    return app


def __getattr__(name: str):
    if name == "app":  # `from offloaddoctor.cli import app` (tests, embedding) still gets the typer app
        return typer_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:
    # Always UTF-8 (JSON and the JUnit declaration require it), and a character nothing can encode (a file
    # name's undecodable byte, kept by Python as a lone surrogate) is shown escaped: a Latin-1 or ASCII
    # locale, or strict stdio, must not end the run with UnicodeEncodeError.
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(encoding="utf-8", errors="backslashreplace")
    from offloaddoctor.cli.fast_path import run

    code = run(sys.argv[1:])
    if code is not None:
        sys.exit(code)
    typer_app()()
