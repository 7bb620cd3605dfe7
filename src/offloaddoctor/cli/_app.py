"""The typer app: every command module registers on it; `--version`."""

from typing import Optional

import typer
from typer.core import TyperCommand

from offloaddoctor import __version__


class GuardedTyper(typer.Typer):
    """Every command registered on it runs under `common.guarded`: an exception that is not the user's
    mistake exits EXIT_INTERNAL with one line, not 1 (our "findings" code) with a traceback."""

    def command(self, *args, **kwargs):
        return _guarding(super().command(*args, **kwargs))

    def callback(self, *args, **kwargs):
        return _guarding(super().callback(*args, **kwargs))


def _guarding(register):
    def decorator(function):
        from offloaddoctor.cli.common import guarded

        register(guarded(function))
        return function

    return decorator


class Command(TyperCommand):
    """Usage lines as the README writes them (`diagnose [OPTIONS] LOG...`): typer wraps required arguments in
    braces (`{LOG...}`), which reads like a choice."""

    def collect_usage_pieces(self, ctx):
        return [
            piece[1:-1] if piece.startswith("{") and piece.endswith("}") else piece
            for piece in super().collect_usage_pieces(ctx)
        ]


# Options of several commands, declared once.
SIGNATURE_DIRS = typer.Option([], "--signatures", metavar="DIR", help="Extra signature directory. Repeatable.")
SET_VALUES = typer.Option(
    [], "--set", "-s", metavar="KEY=VALUE", help="Override a config value (Bridge CLI form). Repeatable."
)

# `-h` is `--help` everywhere (click's default is `--help` only); subcommands inherit it from the app.
HELP_OPTIONS = {"help_option_names": ["-h", "--help"]}


def examples(*lines: str) -> str:
    """An `Examples:` block for a command's --help (its epilog), kept line by line as written: `\\b` stops
    click from re-wrapping the paragraph. A line starting with `#` is a comment on the command above it."""
    body = "\n".join(f"  {line}" if line.startswith("#") else f"  $ {line}" for line in lines)
    return f"\b\nExamples:\n{body}"


app = GuardedTyper(
    add_completion=False,
    context_settings=HELP_OPTIONS,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    help="Diagnose Megatron-Core / Megatron-Bridge runs that failed or slowed down because of CPU offloading "
    "and GPU-memory settings.",
    epilog=examples(
        "offloaddoctor diagnose job.log --config run_config.yaml",
        "offloaddoctor diagnose -h",
    ),
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"offloaddoctor {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    version: Optional[bool] = typer.Option(
        None, "--version", callback=_version, is_eager=True, help="Show the version."
    ),
    debug: bool = typer.Option(False, "--debug", help="On an internal error, show the traceback."),
) -> None:
    """offloaddoctor: diagnose CPU-offloading and GPU-memory failures in Megatron runs."""
    if debug:
        from offloaddoctor.cli import common

        common.DEBUG = True
