"""What every command shares: exit codes, output choices, one-line errors, the catalogue."""

from __future__ import annotations

import os
import sys
from enum import Enum
from pathlib import Path

EXIT_CLEAN, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT), as shells report it; never 1, which means "findings"
EXIT_INTERNAL = 3  # a bug of ours: never 0 or 1, which a CI job reads as "clean" or "findings"
# `offloaddoctor --debug …` or OFFLOADDOCTOR_DEBUG=1: an internal error shows its traceback.
DEBUG = bool(os.environ.get("OFFLOADDOCTOR_DEBUG"))

# Output formats are declared once, in render/formats.py; these names are the CLI's.
from offloaddoctor.render.formats import CheckFormat, TextOrJson  # noqa: E402, F401 - the CLI's names
from offloaddoctor.render.formats import Format as OutputFormat  # noqa: E402, F401


class FailOn(str, Enum):
    error = "error"
    warning = "warning"
    unknown = "unknown"  # errors, and a failure line no signature explains
    never = "never"


def fail(message: str) -> None:
    from offloaddoctor.text_safety import safe_lines

    # Messages name files found in directories: a name's newline or `::` must not become a runner command.
    sys.stderr.write(f"offloaddoctor: error: {safe_lines(message)}\n")
    raise SystemExit(EXIT_USAGE)


def internal_error(exc: BaseException) -> None:
    """One line for the user (what broke, how to report it), the traceback only with --debug; EXIT_INTERNAL."""
    if DEBUG:
        import traceback

        traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
    what = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
    hint = "" if DEBUG else "; run again with --debug for the traceback"
    sys.stderr.write(f"offloaddoctor: internal error, please report: {what}{hint}\n")
    raise SystemExit(EXIT_INTERNAL)


def guarded(command):
    """Run a command with the CLI's error contract: a UserError that got this far is a one-line usage error
    (exit 2), any other exception is an internal error (exit 3); exits, ^C and a closed pipe pass through."""
    import functools

    @functools.wraps(command)
    def run(*args, **kwargs):
        from offloaddoctor.errors import UserError

        try:
            return command(*args, **kwargs)
        except UserError as exc:
            fail(str(exc))
        except (SystemExit, KeyboardInterrupt, GeneratorExit):
            raise
        except OSError as exc:
            from offloaddoctor.errors import StdoutWriteError

            if isinstance(exc, (BrokenPipeError, StdoutWriteError)):  # the output's fate: cli.main reports it
                raise
            internal_error(exc)
        except Exception as exc:
            # Exit, Abort, usage errors: click handles them.
            if type(exc).__module__.split(".")[0] in ("click", "typer"):
                raise
            internal_error(exc)

    return run


def load_catalog_or_fail(signature_dirs: list[Path], policy=None):
    """The one catalogue of every command: built-ins, the project file's `signatures:` (read here unless the
    caller already has the `policy`), then `--signatures`."""
    from offloaddoctor.api import load_catalog
    from offloaddoctor.catalog.loader import CatalogError
    from offloaddoctor.errors import UserError
    from offloaddoctor.policy import load_policy
    from offloaddoctor.text_safety import safe_text

    try:
        if policy is None:
            policy = load_policy()
            for line in policy.warnings:  # diagnose's report notes them; other commands say it here
                sys.stderr.write(f"offloaddoctor: warning: {safe_text(line)}\n")
        return load_catalog(signature_dirs, policy=policy)
    except (CatalogError, UserError) as exc:
        fail(str(exc))


def wants_terminal(output_format) -> bool:
    return output_format.value == "terminal" or (output_format.value == "auto" and sys.stdout.isatty())


def make_console():
    from rich.console import Console

    return Console(no_color=bool(os.environ.get("NO_COLOR")), highlight=False)
