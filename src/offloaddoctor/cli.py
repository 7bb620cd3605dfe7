"""Command line: parse, call the library, render, map to an exit code. Nothing else lives here."""

from __future__ import annotations

import difflib
from contextlib import contextmanager
import os
import sys
from enum import Enum
from pathlib import Path
from typing import List, Optional

import typer

from offloaddoctor import __version__
from offloaddoctor.errors import UserError

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


def _fail(message: str) -> None:
    typer.echo(f"offloaddoctor: error: {message}", err=True)
    raise typer.Exit(EXIT_USAGE)


def _catalog(signature_dirs: list[Path]):
    from offloaddoctor.catalog.loader import CatalogError, load_catalog

    try:
        return load_catalog(signature_dirs)
    except CatalogError as exc:
        _fail(str(exc))


def _wants_terminal(output_format: OutputFormat) -> bool:
    return output_format is OutputFormat.terminal or (output_format is OutputFormat.auto and sys.stdout.isatty())


def _console():
    from rich.console import Console

    return Console(no_color=bool(os.environ.get("NO_COLOR")), highlight=False)


@app.command()
def diagnose(
    logs: List[str] = typer.Argument(..., help="Log files, directories of logs, or - for standard input."),
    config: List[str] = typer.Option([], "--config", "-c", help="Run config: Bridge/Megatron YAML or a launch script. Repeatable."),
    set_: List[str] = typer.Option([], "--set", "-s", help="Override KEY=VALUE (Bridge CLI form). Repeatable."),
    output_format: OutputFormat = typer.Option(
        OutputFormat.auto, "--format", "-f",
        help="Standard output. auto: github under GitHub Actions, panels on a terminal, plain text otherwise.",
    ),
    output: List[str] = typer.Option([], "--output", "-o", help="Also write FORMAT=PATH (or PATH.json/.xml/.md/.txt). Repeatable."),
    fail_on: Optional[FailOn] = typer.Option(None, "--fail-on", help="Exit 1 on findings of this severity or worse (default: error)."),
    ignore: List[str] = typer.Option([], "--ignore", help="Suppress a signature id. Repeatable."),
    signatures: List[Path] = typer.Option([], "--signatures", help="Extra signature directory. Repeatable."),
    baseline: Optional[str] = typer.Option(None, "--baseline", metavar="BASE.log", help="A healthy run's log: decide the slowdown from measured iteration times."),
    recursive: bool = typer.Option(False, "--recursive", "-r", help="Also read log files in subdirectories."),
) -> None:
    """Find known offloading/memory failures in training logs and check them against the run's config."""
    from offloaddoctor.api import diagnose as run_diagnose
    from offloaddoctor.policy import load_policy
    from offloaddoctor.render.outputs import parse_output

    try:
        policy = load_policy()
        outputs = [parse_output(spec) for spec in output]
    except UserError as exc:
        _fail(str(exc))
    if fail_on is not None:
        policy.fail_on = fail_on.value
    catalog = _catalog([*policy.signature_dirs, *signatures])
    policy.ignore.update({i: "--ignore on the command line" for i in ignore})
    unknown = [i for i in policy.ignore if catalog.get(i) is None]
    if unknown:
        _fail(f"--ignore: unknown signature id {unknown[0]!r}{_suggest(unknown[0], catalog)}")
    try:
        with _progress_bar(logs, output_format) as progress:
            report = run_diagnose(logs, config, set_, catalog=catalog, baseline=baseline, progress=progress, recursive=recursive)
    except UserError as exc:
        _fail(str(exc))
    report.suppressed = {f.id: policy.ignore[f.id] for f in report.findings if f.id in policy.ignore}
    report.findings = [f for f in report.findings if f.id not in policy.ignore]
    _emit(report, output_format, catalog, policy)
    _write_outputs(report, outputs, catalog, policy)
    raise typer.Exit(EXIT_FINDINGS if any(policy.fails(f) for f in report.findings) else EXIT_CLEAN)


PROGRESS_MIN_BYTES = 64 * 1024 * 1024


@contextmanager
def _progress_bar(logs: list[str], output_format: OutputFormat):
    """A rich bar on stderr for long scans by a person at a terminal; never in CI or machine formats."""
    machine = output_format in (OutputFormat.json, OutputFormat.junit, OutputFormat.github, OutputFormat.markdown)
    if machine or os.environ.get("CI") or os.environ.get("GITHUB_ACTIONS") or not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn

    with Progress("scanning", BarColumn(), DownloadColumn(), TimeRemainingColumn(), console=Console(stderr=True),
                  transient=True) as bar:
        task = bar.add_task("scan", total=None)

        def update(done: int, total: int) -> None:
            if total >= PROGRESS_MIN_BYTES:
                bar.update(task, completed=done, total=total)

        yield update


def _suggest(name: str, catalog) -> str:
    close = difflib.get_close_matches(name, catalog.ids, n=3)
    return f"; did you mean {', '.join(close)}?" if close else "; run `offloaddoctor signatures` for the list"


def _write_outputs(report, outputs: list[tuple[str, str]], catalog, policy) -> None:
    from offloaddoctor.render.outputs import render

    for output_format, path in outputs:
        try:
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(render(report, output_format, catalog, policy))
        except OSError as exc:
            _fail(f"--output {path}: cannot write: {exc.strerror or exc}")


def _emit(report, output_format: OutputFormat, catalog, policy) -> None:
    if output_format is OutputFormat.auto and os.environ.get("GITHUB_ACTIONS") == "true":
        output_format = OutputFormat.github
    if output_format is OutputFormat.github:
        from offloaddoctor.render.github import render_github

        annotations, summary = render_github(report)
        sys.stdout.write(annotations)
        summary_path = os.environ.get("GITHUB_STEP_SUMMARY")
        if summary_path:
            try:
                with open(summary_path, "a", encoding="utf-8") as handle:
                    handle.write(summary)
            except OSError as exc:
                _fail(f"GITHUB_STEP_SUMMARY {summary_path}: cannot write: {exc.strerror or exc}")
        return
    if _wants_terminal(output_format):
        from offloaddoctor.render.terminal import render_terminal

        render_terminal(report, _console())
        return
    from offloaddoctor.render.outputs import render

    sys.stdout.write(render(report, output_format.value, catalog, policy))


@app.command()
def check(
    config: List[str] = typer.Argument(None, metavar="[CONFIG]...", help="Bridge/Megatron YAML or launch script(s) to validate."),
    set_: List[str] = typer.Option([], "--set", "-s", help="Override KEY=VALUE (Bridge CLI form). Repeatable."),
    signature: List[str] = typer.Option([], "--signature", help="Check only this constraint id. Repeatable."),
    no_defaults: bool = typer.Option(False, "--no-defaults", help="Leave unset keys unknown instead of taking megatron-core's defaults."),
    output_format: OutputFormat = typer.Option(OutputFormat.auto, "--format", "-f", help="auto: panels on a terminal, plain text otherwise."),
    signatures: List[Path] = typer.Option([], "--signatures", help="Extra signature directory. Repeatable."),
) -> None:
    """Validate a config before launch against every offloading/memory constraint, all violations at once."""
    from offloaddoctor.api import check as run_check

    catalog = _catalog(signatures)
    try:
        report = run_check(config or [], set_, catalog=catalog, only=signature, use_defaults=not no_defaults)
    except UserError as exc:
        _fail(str(exc))
    if output_format is OutputFormat.json:
        from offloaddoctor.render.check_view import render_check_json

        sys.stdout.write(render_check_json(report))
    elif _wants_terminal(output_format):
        from offloaddoctor.render.terminal import render_check_terminal

        render_check_terminal(report, _console())
    else:
        from offloaddoctor.render.check_view import render_check_plain

        sys.stdout.write(render_check_plain(report))
    raise typer.Exit(EXIT_FINDINGS if report.violations else EXIT_CLEAN)


@app.command()
def compare(
    baseline: str = typer.Argument(..., help="The baseline run's log (or directory of per-rank logs)."),
    runs: List[str] = typer.Argument(..., help="Logs of runs with other offload settings."),
    config: List[str] = typer.Option([], "--config", "-c", metavar="LOG=CONFIG", help="Offload settings for LOG from CONFIG instead of its arguments block. Repeatable."),
    loss_tolerance: float = typer.Option(0.001, "--loss-tolerance", min=0.0, help="Max |Δ loss| allowed (the guide's 0.001)."),
    memory_tolerance: float = typer.Option(0.25, "--memory-tolerance", min=0.0, help="Relative tolerance on the proportional memory saving."),
    output_format: OutputFormat = typer.Option(OutputFormat.text, "--format", "-f", help="text (default) or json."),
    plot: Optional[str] = typer.Option(None, "--plot", metavar="FILE.png", help="Also plot time and memory against the fraction (needs matplotlib)."),
) -> None:
    """Compare runs with different offload settings against a baseline: time, memory, loss; pass/fail per run."""
    from offloaddoctor.api import compare as run_compare
    from offloaddoctor.metrics.compare import Criteria

    run_configs: dict[str, list[str]] = {}
    for item in config:
        log, sep, path = item.partition("=")
        if not sep or not log or not path:
            _fail(f"--config {item}: expected LOG=CONFIG, e.g. --config run.log=run_config.yaml")
        run_configs.setdefault(log, []).append(path)
    try:
        comparison = run_compare(baseline, runs, run_configs, Criteria(loss_tolerance, memory_tolerance))
        if plot:
            from offloaddoctor.render.compare_plot import write_plot

            write_plot(comparison, plot)
    except UserError as exc:
        _fail(str(exc))
    from offloaddoctor.render.compare_view import render_compare_json, render_compare_plain

    sys.stdout.write(render_compare_json(comparison) if output_format is OutputFormat.json else render_compare_plain(comparison))
    raise typer.Exit(EXIT_FINDINGS if comparison.failed else EXIT_CLEAN)


@app.command()
def bisect(
    good: Optional[str] = typer.Option(None, "--good", metavar="REV", help="A commit where the run/config was fine."),
    bad: Optional[str] = typer.Option(None, "--bad", metavar="REV", help="A later commit where it fails."),
    config: Optional[str] = typer.Option(None, "--config", "-c", help="Config file in the repo: config mode (read from git objects, no checkout)."),
    repo: str = typer.Option(".", "--repo", help="The git repository (default: the current directory)."),
    signature: Optional[str] = typer.Option(None, "--signature", help="Bad means this signature fires (default: any error)."),
    run_command: Optional[str] = typer.Option(None, "--run", metavar="CMD", help="Run mode: run CMD at each commit in a temporary worktree."),
    log: Optional[str] = typer.Option(None, "--log", help="Run mode: the log CMD writes, relative to the checkout (default: CMD's output)."),
    timeout: Optional[float] = typer.Option(None, "--timeout", min=0.001, help="Run mode: seconds before CMD is killed (the commit is skipped)."),
    good_config: Optional[str] = typer.Option(None, "--good-config", help="Two-config mode: the config that passes."),
    bad_config: Optional[str] = typer.Option(None, "--bad-config", help="Two-config mode: the config that fails."),
    output_format: OutputFormat = typer.Option(OutputFormat.auto, "--format", "-f", help="text (default) or json."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress lines on stderr."),
    signatures: List[Path] = typer.Option([], "--signatures", help="Extra signature directory. Repeatable."),
) -> None:
    """Find the commit (or the config keys) that made a config or a run fail. Never touches your checkout."""
    catalog = _catalog(signatures)
    progress = None if quiet else (lambda message: typer.echo(message, err=True))
    try:
        if good_config or bad_config:
            if not (good_config and bad_config) or good or bad or run_command:
                raise UserError("two-config mode takes --good-config A --bad-config B and nothing else")
            from offloaddoctor.bisect.delta import bisect_configs

            result = bisect_configs(good_config, bad_config, catalog, signature)
        else:
            if not (good and bad):
                raise UserError("pass --good REV and --bad REV (with --config or --run), or --good-config and --bad-config")
            if run_command:
                from offloaddoctor.bisect.run_mode import bisect_run

                result = bisect_run(repo, good, bad, run_command, catalog, log, timeout, signature, config, progress)
            elif config:
                from offloaddoctor.bisect.config_mode import bisect_config

                result = bisect_config(repo, good, bad, config, catalog, signature, progress)
            else:
                raise UserError("pass --config PATH (config mode) or --run CMD (run mode)")
    except UserError as exc:
        _fail(str(exc))
    except KeyboardInterrupt:
        typer.echo("offloaddoctor: interrupted; temporary worktrees removed, your checkout untouched", err=True)
        raise typer.Exit(130)
    from offloaddoctor.render.bisect_view import render_bisect_json, render_bisect_plain

    sys.stdout.write(render_bisect_json(result) if output_format is OutputFormat.json else render_bisect_plain(result))


@app.command("bisect-step")
def bisect_step(
    config: Optional[str] = typer.Option(None, "--config", "-c", help="Check this config in the current checkout."),
    run_command: Optional[str] = typer.Option(None, "--run", metavar="CMD", help="Run CMD here and diagnose its output."),
    log: Optional[str] = typer.Option(None, "--log", help="The log CMD writes (default: CMD's output)."),
    timeout: Optional[float] = typer.Option(None, "--timeout", min=0.001, help="Seconds before CMD is killed (skip)."),
    signature: Optional[str] = typer.Option(None, "--signature", help="Bad means this signature fires (default: any error)."),
) -> None:
    """For `git bisect run offloaddoctor bisect-step ...`: exit 0 good, 1 bad, 125 skip (never 128 or more)."""
    from offloaddoctor.bisect.step import EXIT_FOR, EXIT_SKIP, bisect_step as run_step

    try:
        from offloaddoctor.catalog.loader import load_catalog

        outcome = run_step(load_catalog(), config, run_command, log, timeout, signature)
    except (Exception, KeyboardInterrupt) as exc:  # git bisect run must never see a traceback or >= 128
        typer.echo(f"offloaddoctor: skip: {exc or type(exc).__name__}", err=True)
        raise typer.Exit(EXIT_SKIP)
    typer.echo(f"offloaddoctor: {outcome.verdict}: {outcome.reason}", err=True)
    raise typer.Exit(EXIT_FOR[outcome.verdict])


signatures_app = typer.Typer(
    add_completion=False, invoke_without_command=True, rich_markup_mode=None,
    help="The signature catalogue: list it, run its examples (test), check it (lint).",
)
app.add_typer(signatures_app, name="signatures")


@signatures_app.callback()
def list_signatures(
    ctx: typer.Context,
    json_output: bool = typer.Option(False, "--json", help="Machine-readable list."),
    signatures: List[Path] = typer.Option([], "--signatures", help="Extra signature directory. Repeatable."),
) -> None:
    """List the signature catalogue (or run `test` / `lint`)."""
    if ctx.invoked_subcommand is not None:
        return
    from offloaddoctor.render.catalog_view import render_catalog, render_catalog_json

    catalog = _catalog(signatures)
    sys.stdout.write(render_catalog_json(catalog) if json_output else render_catalog(catalog))


@signatures_app.command("test")
def signatures_test(
    dirs: List[Path] = typer.Argument(None, metavar="[DIR]...", help="Team signature directories (default: the built-in catalogue)."),
    only: bool = typer.Option(False, "--only", help="Test only the signatures in DIR (the built-ins are still loaded, so ids cannot clash)."),
    output_format: OutputFormat = typer.Option(OutputFormat.text, "--format", "-f", help="text (default) or json."),
) -> None:
    """Run every signature's examples; print the confusion matrix. Exit 1 on any wrong outcome."""
    from offloaddoctor.catalog.examples import run_examples
    from offloaddoctor.render.catalog_view import render_confusion, render_confusion_json

    dirs = dirs or []
    catalog = _catalog(dirs)
    chosen = [s for s in catalog.signatures if not only or Path(s.path).resolve().parent in {d.resolve() for d in dirs}]
    run = run_examples(catalog, chosen)
    sys.stdout.write(render_confusion_json(run) if output_format is OutputFormat.json else render_confusion(run))
    raise typer.Exit(EXIT_FINDINGS if run.failures else EXIT_CLEAN)


@signatures_app.command("lint")
def signatures_lint(
    dirs: List[Path] = typer.Argument(None, metavar="[DIR]...", help="Team signature directories (default: the built-in catalogue)."),
) -> None:
    """Validate signature files: schema, patterns (compile, catastrophic, slow), literals, examples. Exit 1 on errors."""
    from offloaddoctor.catalog.lint import ERROR, lint

    messages = lint(dirs or [])
    for message in messages:
        typer.echo(str(message))
    errors = sum(1 for m in messages if m.level == ERROR)
    typer.echo(f"{errors} error(s), {len(messages) - errors} warning(s)")
    raise typer.Exit(EXIT_FINDINGS if errors else EXIT_CLEAN)


@app.command()
def explain(
    signature_id: str = typer.Argument(..., metavar="ID", help="A signature id, e.g. pp-cpu-offload."),
    signatures: List[Path] = typer.Option([], "--signatures", help="Extra signature directory. Repeatable."),
) -> None:
    """Print one signature in full: symptom, cause, patterns, config checks, confirmation, fix."""
    from offloaddoctor.render.catalog_view import render_explain

    catalog = _catalog(signatures)
    signature = catalog.get(signature_id)
    if signature is None:
        _fail(f"unknown signature id {signature_id!r}{_suggest(signature_id, catalog)}")
    sys.stdout.write(render_explain(signature))


class MetricsFormat(str, Enum):
    text = "text"
    json = "json"
    csv = "csv"


@app.command()
def metrics(
    logs: List[str] = typer.Argument(..., help="One run each: a log file, a directory of its per-rank logs, or -."),
    output_format: MetricsFormat = typer.Option(MetricsFormat.text, "--format", "-f", help="text, json or csv (one row per rank and iteration)."),
) -> None:
    """Per-rank, per-iteration numbers from training logs, and a steady-state summary per run."""
    from offloaddoctor.metrics import collect_metrics
    from offloaddoctor.render.metrics_csv import render_metrics_csv
    from offloaddoctor.render.metrics_json import render_metrics_json
    from offloaddoctor.render.metrics_text import render_metrics_text

    try:
        runs = collect_metrics(logs)
    except UserError as exc:
        _fail(str(exc))
    render = {MetricsFormat.text: render_metrics_text, MetricsFormat.json: render_metrics_json, MetricsFormat.csv: render_metrics_csv}
    sys.stdout.write(render[output_format](runs))


def _version(value: bool) -> None:
    if value:
        typer.echo(f"offloaddoctor {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    version: Optional[bool] = typer.Option(None, "--version", callback=_version, is_eager=True, help="Show the version."),
) -> None:
    """offloaddoctor: diagnose CPU-offloading and GPU-memory failures in Megatron runs."""


def main() -> None:
    app()
