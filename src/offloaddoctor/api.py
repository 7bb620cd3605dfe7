"""The library surface: what the CLI calls and what tests call directly."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from offloaddoctor.catalog.loader import Vocabulary
from offloaddoctor.catalog.loader import load_catalog as _load_catalog
from offloaddoctor.catalog.model import Catalog
from offloaddoctor.config.defaults import add_defaults
from offloaddoctor.config.keys import canonical_key
from offloaddoctor.config.loading import build_store, explicit_config
from offloaddoctor.config.values import ConfigValue, Source
from offloaddoctor.errors import UserError
from offloaddoctor.logs.sources import resolve_sources

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: typing costs start-up time
    from typing import Any

    from offloaddoctor.analysis.findings import Report
    from offloaddoctor.analysis.preflight import CheckReport
    from offloaddoctor.catalog.examples import ExampleOutcome, ExampleRun
    from offloaddoctor.catalog.model import Example, Signature
    from offloaddoctor.policy import Policy

__all__ = [
    "CheckReport", "Report", "check", "compare", "diagnose", "diagnose_text", "load_catalog", "run_examples", "vocabulary",
]


def vocabulary() -> Vocabulary:
    """What signatures may name: the fact parsers (analysis/fact_parsers.py) and config keys (config/keys.py)."""
    from offloaddoctor.analysis.fact_parsers import FACT_PARSERS
    from offloaddoctor.config.keys import is_known

    return Vocabulary(tuple(FACT_PARSERS), is_known)


def load_catalog(
    signature_dirs: Sequence[Path] = (), include_builtin: bool = True, policy: Policy | None = None
) -> Catalog:
    """The catalogue every command uses: the built-in signatures, the project file's `signatures:`
    directories (`policy`), then `signature_dirs`. Raises catalog.loader.CatalogError listing every problem."""
    dirs = [*(policy.signature_dirs if policy is not None else ()), *signature_dirs]
    return _load_catalog(vocabulary(), dirs, include_builtin=include_builtin)


def diagnose(
    paths: Sequence[str],
    config_paths: Sequence[str] = (),
    overrides: Sequence[str] = (),
    catalog: Catalog | None = None,
    signature_dirs: Sequence[Path] = (),
    baseline: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    recursive: bool = False,
    policy: Policy | None = None,
) -> Report:
    """Scan logs (files, directories, `-`) and correlate every finding with the run's config. `baseline`:
    a healthy run's log whose measured iteration time decides the slowdown finding instead of heuristics.
    `policy`: suppressions and extra signature directories (policy.py); by default the project file's,
    found from the current directory, as the CLI does. `Policy()` applies none."""
    if policy is None:
        from offloaddoctor.policy import load_policy

        policy = load_policy()
    catalog = catalog or load_catalog(signature_dirs, policy=policy)
    unknown = policy.unknown_ids(catalog)
    if unknown:
        raise UserError(f"--ignore: unknown signature id {unknown[0]!r}{did_you_mean(unknown[0], catalog)}")
    explicit = explicit_config(config_paths, overrides)
    sources = resolve_sources(paths, recursive)
    baseline_metrics = None
    if baseline is not None:
        from offloaddoctor.metrics import run_metrics

        resolve_sources([baseline])
        baseline_metrics = run_metrics(baseline)
        if baseline_metrics.summary.median_iteration_ms is None:
            raise UserError(f"--baseline {baseline}: no steady-state iteration time in it (needs iteration lines after iteration 3)")
    from offloaddoctor.analysis.engine import build_report
    from offloaddoctor.analysis.parallel import scan_sources
    from offloaddoctor.analysis.scanner import build_matchers

    matchers = build_matchers(catalog)
    scan = scan_sources(matchers, sources, progress=progress)
    store = build_store(*(c.values for c in scan.collectors), explicit)
    return policy.apply(build_report(catalog, scan, store, matchers, baseline_metrics))


def did_you_mean(name: str, catalog: Catalog) -> str:
    import difflib

    close = difflib.get_close_matches(name, catalog.ids, n=3)
    return f"; did you mean {', '.join(close)}?" if close else "; run `offloaddoctor signatures` for the list"


def diagnose_text(
    text: str,
    config: Mapping[str, Any] | None = None,
    catalog: Catalog | None = None,
    name: str = "<text>",
) -> Report:
    """Diagnose an in-memory log excerpt; `config` maps any key spelling to a value."""
    catalog = catalog or load_catalog()
    from offloaddoctor.analysis.engine import build_report
    from offloaddoctor.analysis.scanner import Scanner, build_matchers

    matchers = build_matchers(catalog)
    scan = Scanner(matchers).scan_lines(name, text.splitlines())
    given = [ConfigValue(canonical_key(k), v, Source("<config>", None, k), "config") for k, v in (config or {}).items()]
    store = build_store(*(c.values for c in scan.collectors), given)
    return build_report(catalog, scan, store, matchers)


def check(
    config_paths: Sequence[str],
    overrides: Sequence[str] = (),
    catalog: Catalog | None = None,
    only: Sequence[str] = (),
    use_defaults: bool = True,
) -> CheckReport:
    """Validate a config before launch against every preflight constraint of the catalogue. Keys the
    config leaves out take megatron-core's defaults unless `use_defaults` is False."""
    if not config_paths and not overrides:
        raise UserError("nothing to check: pass a config file and/or --set KEY=VALUE items")
    catalog = catalog or load_catalog()
    store = build_store(explicit_config(config_paths, overrides))
    if use_defaults:
        add_defaults(store)
    from offloaddoctor.analysis.preflight import check_store

    return check_store(catalog, store, list(config_paths) + (["--set"] if overrides else []), only)


def compare(
    baseline: str,
    runs: Sequence[str],
    run_configs: Mapping[str, Sequence[str]] | None = None,
    criteria: Any = None,
    catalog: Catalog | None = None,
):
    """Judge runs against a baseline by the offloading guide's success criteria (metrics/compare.py).
    `run_configs` maps a log path to config files whose offload settings replace what the log printed."""
    from offloaddoctor.metrics.compare import Criteria, compare_runs
    from offloaddoctor.metrics.settings import effective_offload_fraction, offload_settings

    if not runs:
        raise UserError("compare needs a baseline log and at least one run log")
    paths = [baseline, *runs]
    unknown = [p for p in (run_configs or {}) if p not in paths]
    if unknown:
        raise UserError(f"--config {unknown[0]}=…: {unknown[0]} is not one of the logs being compared")
    resolve_sources(paths)  # every path is checked before any is read
    from offloaddoctor.analysis.scanner import build_matchers

    catalog = catalog or load_catalog()
    matchers = build_matchers(catalog)
    measured, errors = [], {}
    for path in paths:
        run, report = _measure_and_diagnose(path, catalog, matchers)
        errors[path] = [f.id for f in report.findings if f.signature.severity == "error"]
        configs = (run_configs or {}).get(path, ())
        if configs:
            arguments = {**run.arguments, **{v.key: v.value for v in explicit_config(configs, ())}}
            run.summary.offload = offload_settings(arguments)
            run.summary.effective_offload_fraction = effective_offload_fraction(run.summary.offload)
        measured.append(run)
    return compare_runs(measured[0], measured[1:], errors, criteria or Criteria())


def _measure_and_diagnose(path: str, catalog: Catalog, matchers) -> tuple[Any, Report]:
    """`run_metrics(path)` and `diagnose([path])` from one read of each log: both handler sets share a pass."""
    from offloaddoctor.analysis.engine import build_report
    from offloaddoctor.analysis.scanner import Scanner
    from offloaddoctor.logs.line_pass import LinePass
    from offloaddoctor.metrics.reader import RunReader
    from offloaddoctor.metrics.summary import summarise

    scanner, reader = Scanner(matchers), RunReader(path)
    warnings: list[str] = []
    line_pass = LinePass(scanner.literals | reader.line_pass.literals, warnings)
    for source in resolve_sources([path]):
        before = len(warnings)
        lines = line_pass.read_source(source, scanner.start_source(source.name), reader.start_source(source.name, shared=True))
        scanner.result.lines_read[source.name] = lines
        reader.source_read(source.name, lines)
        scanner.result.warnings.extend(warnings[before:])
        reader.run.notes.extend(warnings[before:])
    scan = scanner.finish()
    store = build_store(*(c.values for c in scan.collectors))
    run = summarise(reader.run, reader.collectors, reader.layout_line)
    return run, build_report(catalog, scan, store, matchers)


def run_example(catalog: Catalog, signature: Signature, index: int, example: Example) -> ExampleOutcome:
    """One signature example through diagnose_text: the same code path `signatures test` runs."""
    from offloaddoctor.catalog.examples import judge_example

    report = diagnose_text(example.log, example.config, catalog, name=f"{signature.id}[{index}]")
    return judge_example(signature, index, example, report.findings)


def run_examples(catalog: Catalog, signatures: Sequence[Signature] | None = None) -> ExampleRun:
    """Every example of `signatures` (default: the whole catalogue): the confusion matrix of `signatures test`."""
    from offloaddoctor.catalog.examples import ExampleRun

    run = ExampleRun()
    for signature in signatures if signatures is not None else catalog.signatures:
        for index, example in enumerate(signature.examples):
            run.outcomes.append(run_example(catalog, signature, index, example))
    return run


def __getattr__(name: str):
    if name == "CheckReport":  # loaded with `check`, not at start-up: `diagnose` does not need it
        from offloaddoctor.analysis.preflight import CheckReport

        return CheckReport
    if name == "Report":  # loaded with `diagnose`, not at start-up: `check` does not need it
        from offloaddoctor.analysis.findings import Report

        return Report
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
