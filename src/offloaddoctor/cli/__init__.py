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
    sys.stdout = _GuardedStdout(sys.stdout)
    code: int | str | None
    try:
        from offloaddoctor.cli.fast_path import run

        code = run(sys.argv[1:])
        if code is None:
            try:
                typer_app()()
            except SystemExit as done:
                code = done.code
        sys.stdout.flush()  # here, not at exit: a full disk must be reported, not ignored
    except StdoutWriteError as exc:
        code = _stdout_failed(exc)
    sys.exit(code)


class StdoutWriteError(OSError):
    """Writing the output to standard output failed (a full disk, `> /dev/full`, a closed pipe)."""


class _GuardedStdout:
    """sys.stdout, with its write errors told apart from every other OSError (those stay bugs)."""

    def __init__(self, stream) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except OSError as exc:
            raise StdoutWriteError(exc.errno, exc.strerror) from None

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as exc:
            raise StdoutWriteError(exc.errno, exc.strerror) from None

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def _stdout_failed(exc: StdoutWriteError) -> int:
    import errno
    import os

    try:  # what is still buffered must not fail again when the interpreter flushes at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    if exc.errno == errno.EPIPE:  # `| head` stopped reading: exit 1 without a word, as click does
        return 1
    sys.stderr.write(f"offloaddoctor: error: cannot write the output to standard output: {exc.strerror or exc}\n")
    return 2
