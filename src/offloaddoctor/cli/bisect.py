"""`bisect` and `bisect-step`: the change that made a config or run fail."""

import signal
import sys
from pathlib import Path
from typing import List, Optional

import typer

from offloaddoctor.cli._app import SIGNATURE_DIRS, Command, app, examples
from offloaddoctor.cli.common import TextOrJson, load_catalog_or_fail
from offloaddoctor.errors import UserError


@app.command(
    cls=Command,
    short_help="Find the commit (or the config keys) that made a config or a run fail; never touches your checkout.",
    epilog=examples(
        "offloaddoctor bisect --good v1.0 --bad HEAD --config conf/run.yaml",
        "offloaddoctor bisect --good v1.0 --bad HEAD --run 'bash train_smoke.sh' --log out/job.log --timeout 600",
        "offloaddoctor bisect --good-config good.yaml --bad-config bad.yaml",
    ),
)
def bisect(
    good: Optional[str] = typer.Option(None, "--good", metavar="REV", help="A commit where the run/config was fine."),
    bad: Optional[str] = typer.Option(None, "--bad", metavar="REV", help="A later commit where it fails."),
    config: Optional[str] = typer.Option(
        None,
        "--config",
        "-c",
        metavar="PATH",
        help="Config file in the repo: config mode (read from git objects, no checkout).",
    ),
    repo: str = typer.Option(".", "--repo", metavar="DIR", help="The git repository (default: the current directory)."),
    select: Optional[str] = typer.Option(
        None, "--select", metavar="ID", help="Bad means this signature fires (default: any error)."
    ),
    run_command: Optional[str] = typer.Option(
        None, "--run", metavar="CMD", help="Run mode: run CMD at each commit in a temporary worktree."
    ),
    log: Optional[str] = typer.Option(
        None,
        "--log",
        metavar="PATH",
        help="Run mode: the log CMD writes, relative to the checkout (default: CMD's output).",
    ),
    timeout: Optional[float] = typer.Option(
        None,
        "--timeout",
        metavar="SECONDS",
        min=0.001,
        help="Run mode: seconds before CMD is killed (the commit is skipped).",
    ),
    good_config: Optional[str] = typer.Option(
        None, "--good-config", metavar="PATH", help="Two-config mode: the config that passes."
    ),
    bad_config: Optional[str] = typer.Option(
        None, "--bad-config", metavar="PATH", help="Two-config mode: the config that fails."
    ),
    output_format: TextOrJson = typer.Option(TextOrJson.text, "--format", "-f", help="text (default) or json."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress lines on stderr."),
    signatures: List[Path] = SIGNATURE_DIRS,
) -> None:
    """Find the commit (or the config keys) that made a config or a run fail. Never touches your checkout.

    Three modes, picked by the options given:

    \b
    config mode   --good REV --bad REV --config PATH
                  reads PATH at each commit from git's objects (no checkout, nothing run) and checks it
                  against the constraints; finds the first commit whose config breaks one.
    run mode      --good REV --bad REV --run CMD [--log PATH] [--timeout SECONDS]
                  runs CMD at each commit in a temporary worktree and diagnoses its output (or the log it
                  writes); finds the first commit whose run fails. A commit CMD cannot judge is skipped.
    two-config    --good-config A --bad-config B
                  no git: the fewest of the values B changes that, put into A, make it fail
                  (undoing any one of them makes it pass).

    Bad means any error finding, or the signature --select names. Exit 0 when found, 2 when it refuses
    (GOOD does not pass, BAD does not fail, GOOD is not an ancestor of BAD), 128 + the signal when
    interrupted (130 on Ctrl-C)."""
    catalog = load_catalog_or_fail(signatures)
    progress = None if quiet else (lambda message: typer.echo(message, err=True))
    try:
        if good_config or bad_config:
            if not (good_config and bad_config) or good or bad or run_command:
                raise UserError("two-config mode takes --good-config A --bad-config B and nothing else")
            from offloaddoctor.bisect.delta import bisect_configs

            result = bisect_configs(good_config, bad_config, catalog, select)
        else:
            if not (good and bad):
                raise UserError(
                    "pass --good REV and --bad REV (with --config or --run), or --good-config and --bad-config"
                )
            if run_command:
                from offloaddoctor.bisect.run_mode import bisect_run

                result = bisect_run(repo, good, bad, run_command, catalog, log, timeout, select, config, progress)
            elif config:
                from offloaddoctor.bisect.config_mode import bisect_config

                result = bisect_config(repo, good, bad, config, catalog, select, progress)
            else:
                raise UserError("pass --config PATH (config mode) or --run CMD (run mode)")
    except KeyboardInterrupt as exc:
        # Interrupted carries the signal (SIGHUP, SIGQUIT, SIGTERM, SIGINT); exit as a shell reports it.
        signum = getattr(exc, "signum", signal.SIGINT)
        name = getattr(exc, "name", "SIGINT")
        try:
            done = "test command ended, temporary worktrees removed, " if run_command else ""
            typer.echo(f"offloaddoctor: interrupted ({name}); {done}your checkout untouched", err=True)
        except OSError:  # the terminal that sent SIGHUP is gone
            pass
        raise typer.Exit(128 + signum) from None
    from offloaddoctor.render.bisect_view import render_bisect_json, render_bisect_plain

    sys.stdout.write(render_bisect_json(result) if output_format is TextOrJson.json else render_bisect_plain(result))


@app.command(
    "bisect-step",
    cls=Command,
    short_help="For `git bisect run`: exit 0 good, 1 bad, 125 skip (never 128 or more).",
    epilog=examples(
        "git bisect start HEAD v1.0",
        "git bisect run offloaddoctor bisect-step --config conf/run.yaml",
    ),
)
def bisect_step(
    config: Optional[str] = typer.Option(
        None, "--config", "-c", metavar="PATH", help="Check this config in the current checkout."
    ),
    run_command: Optional[str] = typer.Option(
        None, "--run", metavar="CMD", help="Run CMD here and diagnose its output."
    ),
    log: Optional[str] = typer.Option(
        None, "--log", metavar="PATH", help="The log CMD writes (default: CMD's output)."
    ),
    timeout: Optional[float] = typer.Option(
        None, "--timeout", metavar="SECONDS", min=0.001, help="Seconds before CMD is killed (skip)."
    ),
    select: Optional[str] = typer.Option(
        None, "--select", metavar="ID", help="Bad means this signature fires (default: any error)."
    ),
) -> None:
    """For `git bisect run offloaddoctor bisect-step ...`: exit 0 good, 1 bad, 125 skip (never 128 or more)."""
    from offloaddoctor.bisect.step import EXIT_FOR, EXIT_SKIP, bisect_step as run_step

    try:
        from offloaddoctor.api import load_catalog
        from offloaddoctor.policy import load_policy

        outcome = run_step(load_catalog(policy=load_policy()), config, run_command, log, timeout, select)
    except (Exception, KeyboardInterrupt) as exc:  # git bisect run must never see a traceback or >= 128
        typer.echo(f"offloaddoctor: skip: {exc or type(exc).__name__}", err=True)
        raise typer.Exit(EXIT_SKIP) from None
    typer.echo(f"offloaddoctor: {outcome.verdict}: {outcome.reason}", err=True)
    raise typer.Exit(EXIT_FOR[outcome.verdict])
