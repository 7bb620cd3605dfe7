"""Command line: parse, call the library, render, map to an exit code. One module per job; importing them
registers their commands on the typer app, in the order `--help` lists them. Start-up: a command module
imports only typer and light names at module level; the library, rich and yaml are imported inside the
command that needs them (docs/performance.md, "start-up"). The command modules do not postpone their
annotations (`from __future__ import annotations`): typer reads each parameter's with get_type_hints, which
compiles every string annotation (~20 M instructions of `--help`'s ~300 M)."""

from __future__ import annotations

import gc
import sys

from offloaddoctor.errors import StdoutWriteError

__all__ = ["app", "main", "typer_app"]


# The module that declares each command, in the order `--help` lists them.
COMMAND_MODULES = {
    "diagnose": "diagnose",
    "check": "check",
    "estimate": "estimate",
    "bisect": "bisect",
    "bisect-step": "bisect",
    "compare": "measure",
    "metrics": "measure",
    "explain": "catalog",
    "signatures": "catalog",
}


def typer_app(command: str | None = None):
    """The typer app with every command registered; only `command`'s module when a command is named, none for ""
    (`--version`): typer builds a click command of every registered one (docs/performance.md, "start-up")."""
    import importlib

    from offloaddoctor.cli._app import app

    wanted = (
        [COMMAND_MODULES[command]] if command in COMMAND_MODULES else [] if command == "" else COMMAND_MODULES.values()
    )
    for module in dict.fromkeys(wanted):
        importlib.import_module(f"offloaddoctor.cli.{module}")
    # in one process, modules imported one by one (tests, embedding) register out of order: list them as declared
    order = list(COMMAND_MODULES)
    app.registered_commands.sort(key=lambda info: order.index(_command_name(info)))
    return app


def _command_name(info) -> str:
    """The name typer gives a registered command: its own, or its function's with `-` for `_`."""
    return info.name or info.callback.__name__.replace("_", "-")


def __getattr__(name: str):
    if name == "app":  # `from offloaddoctor.cli import app` (tests, embedding) still gets the typer app
        return typer_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


GC_THRESHOLD = 100_000


def main() -> None:
    _fill_closed_standard_streams()
    # Always UTF-8 (JSON and the JUnit declaration require it), and a character nothing can encode (a file
    # name's undecodable byte, kept by Python as a lone surrogate) is shown escaped: a Latin-1 or ASCII
    # locale, or strict stdio, must not end the run with UnicodeEncodeError.
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(encoding="utf-8", errors="backslashreplace")
    sys.stdout = _GuardedStdout(sys.stdout)
    # A scan makes a few small objects per line and per file and keeps many (200,000 rank logs: a source,
    # a summary, records each); at the default threshold (700) the cycle collector traverses that growing
    # heap over and over (~25 % of the CPU at 200,000 files). Little here makes cycles; collect less often.
    gc.set_threshold(GC_THRESHOLD, *gc.get_threshold()[1:])
    code: int | str | None
    try:
        code = run_typer(sys.argv[1:])
        sys.stdout.flush()  # here, not at exit: a full disk must be reported, not ignored
    except StdoutWriteError as exc:
        code = _stdout_failed(exc)
    sys.exit(code)


def _fill_closed_standard_streams() -> None:
    """A standard stream closed when we started (`<&-`, `>&-`, `2>&-`; Python sets it to None) gets /dev/null
    on its descriptor, so that no file we open takes that number. Then stderr writes there (an error still
    exits with its own code, not 1 for a failed message), stdout refuses every write (exit 2, said on stderr:
    the report went nowhere), and stdin stays None (`-` is a one-line error, logs/sources.py)."""
    import os

    for descriptor, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
        if getattr(sys, name) is not None:
            continue
        try:
            os.fstat(descriptor)
            continue  # the number is in use already: leave it
        except OSError:
            pass
        null = os.open(os.devnull, os.O_RDWR)
        if null != descriptor:
            os.dup2(null, descriptor)
            os.close(null)
        if name == "stderr":
            sys.stderr = open(descriptor, "w", encoding="utf-8", errors="backslashreplace", closefd=False)  # noqa: SIM115
        elif name == "stdout":
            sys.stdout = _ClosedStdout()


class _ClosedStdout:
    """Standard output that was closed: every write is an error the user is told of (exit 2)."""

    def write(self, text: str) -> int:
        import errno

        raise OSError(errno.EBADF, "standard output is closed")

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        return 1


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


def run_typer(argv: list[str]) -> int:
    """The command line, with this project's conventions instead of click's: bare `offloaddoctor` prints help
    to stdout (exit 0); a usage error is one line, `offloaddoctor: error: …` (exit 2), like every other error;
    Ctrl-C exits 130, never 1 (which means "findings")."""
    from typer.exceptions import Abort
    from typer.main import get_command

    from offloaddoctor.cli.common import EXIT_INTERRUPTED, EXIT_USAGE, fail

    if not argv:
        argv = ["--help"]
    # The app's own options (--debug, --version, -h) take no value: the first other word names the command.
    named = next((word for word in argv if not word.startswith("-")), None)
    if named is None and not {"-h", "--help"} & set(argv):
        named = ""  # no command to run and no help to list them in
    command = get_command(typer_app(named))
    try:
        code = command.main(args=argv, prog_name="offloaddoctor", standalone_mode=False)
    except (KeyboardInterrupt, Abort):  # typer turns Ctrl-C (and EOF at a prompt) into Abort
        sys.stderr.write("\noffloaddoctor: interrupted\n")
        return EXIT_INTERRUPTED
    except Exception as exc:
        if not hasattr(exc, "format_message"):  # a bug: let it show its traceback
            raise
        context = getattr(exc, "ctx", None)
        where = f" (see `{context.command_path} --help`)" if context is not None else ""
        try:
            fail(" ".join(exc.format_message().split()) + where)
        except SystemExit as usage:
            return usage.code if isinstance(usage.code, int) else EXIT_USAGE
    return code if isinstance(code, int) else 0
