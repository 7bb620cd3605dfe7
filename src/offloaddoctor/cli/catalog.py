"""`signatures` (list, test, lint) and `explain`."""

import sys
from pathlib import Path
from typing import List

import typer

from offloaddoctor.cli._app import SIGNATURE_DIRS, Command, GuardedTyper, app, examples
from offloaddoctor.cli.common import EXIT_CLEAN, EXIT_FINDINGS, TextOrJson, load_catalog_or_fail, fail


signatures_app = GuardedTyper(
    add_completion=False,
    invoke_without_command=True,
    rich_markup_mode=None,
    help="The signature catalogue: list it, run its examples (test), check it (lint).",
    short_help="The signature catalogue: list it, run its examples (test), check it (lint).",
    epilog=examples("offloaddoctor signatures --format json", "offloaddoctor signatures test team-signatures/"),
)
app.add_typer(signatures_app, name="signatures")


@signatures_app.callback()
def list_signatures(
    ctx: typer.Context,
    output_format: TextOrJson = typer.Option(TextOrJson.text, "--format", "-f", help="text (default) or json."),
    signatures: List[Path] = SIGNATURE_DIRS,
) -> None:
    """List the signature catalogue (or run `test` / `lint`)."""
    if ctx.invoked_subcommand is not None:
        return
    from offloaddoctor.render.catalog_view import render_catalog, render_catalog_json

    catalog = load_catalog_or_fail(signatures)
    sys.stdout.write(render_catalog_json(catalog) if output_format is TextOrJson.json else render_catalog(catalog))


@signatures_app.command(
    "test",
    cls=Command,
    short_help="Run every signature's examples; print the confusion matrix.",
    epilog=examples("offloaddoctor signatures test", "offloaddoctor signatures test team-signatures/ --only"),
)
def signatures_test(
    dirs: List[Path] = typer.Argument(
        None, metavar="[DIR]...", help="Team signature directories (default: the built-in catalogue)."
    ),
    only: bool = typer.Option(
        False, "--only", help="Test only the signatures in DIR (the built-ins are still loaded, so ids cannot clash)."
    ),
    output_format: TextOrJson = typer.Option(TextOrJson.text, "--format", "-f", help="text (default) or json."),
) -> None:
    """Run every signature's examples; print the confusion matrix. Exit 1 on any wrong outcome."""
    from offloaddoctor.api import run_examples
    from offloaddoctor.render.catalog_view import render_confusion, render_confusion_json

    dirs = dirs or []
    if only and not dirs:
        fail("--only needs at least one DIR: it tests just the signatures in those directories")
    catalog = load_catalog_or_fail(dirs)
    chosen = [s for s in catalog.signatures if not only or Path(s.path).resolve().parent in {d.resolve() for d in dirs}]
    run = run_examples(catalog, chosen)
    sys.stdout.write(render_confusion_json(run) if output_format is TextOrJson.json else render_confusion(run))
    raise typer.Exit(EXIT_FINDINGS if run.failures else EXIT_CLEAN)


@signatures_app.command(
    "lint",
    cls=Command,
    short_help="Validate signature files: schema, patterns, literals, examples.",
    epilog=examples("offloaddoctor signatures lint team-signatures/"),
)
def signatures_lint(
    dirs: List[Path] = typer.Argument(
        None, metavar="[DIR]...", help="Team signature directories (default: the built-in catalogue)."
    ),
) -> None:
    """Validate signature files: schema, patterns (compile, catastrophic, slow), literals, examples. Exit 1 on errors."""
    from offloaddoctor.api import vocabulary
    from offloaddoctor.catalog.lint import ERROR, lint
    from offloaddoctor.policy import load_policy

    messages = lint(vocabulary(), [*load_policy().signature_dirs, *(dirs or [])])
    for message in messages:
        typer.echo(str(message))
    errors = sum(1 for m in messages if m.level == ERROR)
    typer.echo(f"{errors} error(s), {len(messages) - errors} warning(s)")
    raise typer.Exit(EXIT_FINDINGS if errors else EXIT_CLEAN)


@app.command(
    cls=Command,
    short_help="Print one signature in full: symptom, cause, patterns, config checks, confirmation, fix.",
    epilog=examples("offloaddoctor explain oom-partial-optimizer-offload"),
)
def explain(
    signature_id: str = typer.Argument(..., metavar="ID", help="A signature id, e.g. pp-cpu-offload."),
    signatures: List[Path] = SIGNATURE_DIRS,
) -> None:
    """Print one signature in full: symptom, cause, patterns, config checks, confirmation, fix."""
    from offloaddoctor.render.catalog_view import render_explain

    catalog = load_catalog_or_fail(signatures)
    signature = catalog.get(signature_id)
    if signature is None:
        from offloaddoctor.api import did_you_mean

        fail(f"unknown signature id {signature_id!r}{did_you_mean(signature_id, catalog)}")
    sys.stdout.write(render_explain(signature))
