"""From a scan and the run's config to findings: the engine (each log hit to the signature that claims it,
config-only and preflight conditions, verdicts, fixes), known issues, one report per run, and `check`'s
preflight report on a config alone. It knows no advice: `build_report` is given the function that adds it."""

from __future__ import annotations

from offloaddoctor.lazy_exports import lazy_exports

TYPE_CHECKING = False
if TYPE_CHECKING:  # for type checkers; at run time each name loads its module on first use
    from offloaddoctor.report.engine import build_report, model_printed_by_log
    from offloaddoctor.report.findings import CONFIRMED, Finding, Report, SourceSummary
    from offloaddoctor.report.fixes import in_effect, print_fixes
    from offloaddoctor.report.preflight import CheckReport, check_store
    from offloaddoctor.report.runs import describe_run, notes_for_all_runs, notes_of_skipped, runs_in_scan, several_runs

# What the layers above use, and the module that defines each: imported on first use, for start-up time.
_HOMES = {
    "build_report": "engine",
    "model_printed_by_log": "engine",
    "CONFIRMED": "findings",
    "Finding": "findings",
    "Report": "findings",
    "SourceSummary": "findings",
    "print_fixes": "fixes",
    "CheckReport": "preflight",
    "check_store": "preflight",
    "in_effect": "fixes",
    "describe_run": "runs",
    "notes_for_all_runs": "runs",
    "notes_of_skipped": "runs",
    "runs_in_scan": "runs",
    "several_runs": "runs",
}

__all__ = [
    "CONFIRMED",
    "CheckReport",
    "Finding",
    "Report",
    "SourceSummary",
    "build_report",
    "check_store",
    "describe_run",
    "in_effect",
    "model_printed_by_log",
    "notes_for_all_runs",
    "notes_of_skipped",
    "print_fixes",
    "runs_in_scan",
    "several_runs",
]


__getattr__ = lazy_exports(__name__, _HOMES, globals())
