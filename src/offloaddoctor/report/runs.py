"""Several runs in one `diagnose`: which logs of a scan are one job (config/run_identity.py), and the report
that holds one report per run."""

from __future__ import annotations

from collections.abc import Sequence

from offloaddoctor.report.findings import Report, SourceSummary
from offloaddoctor.config.run_identity import Run, group_runs, log_identity

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: typing costs start-up time
    from offloaddoctor.scanning import ScanResult


def runs_in_scan(scan: ScanResult) -> list[Run]:
    """The runs among the scanned logs, in the order given; one when nothing tells them apart. A log skipped
    unread (gone, unreadable, not text) is no run: where there are several, it is only noted (notes_of_skipped)."""
    read = [path for path in scan.lines_read if path not in scan.skipped]
    if len(read) < 2:
        return [Run(list(scan.lines_read))]
    values: dict[str, list] = {}
    for collector in scan.collectors:
        values.setdefault(collector.path, []).extend(collector.values)
    identities = [log_identity(path, values.get(path, ()), scan.lines_read[path]) for path in read]
    runs = group_runs(identities, scan.rank_clashes)
    return runs if len(runs) > 1 else [Run(list(scan.lines_read))]


def notes_of_skipped(scan: ScanResult) -> list[str]:
    """The scan's notes on the logs it skipped unread (each note starts with the log's name)."""
    return [note for note in scan.warnings if any(note.startswith(f"{name}: ") for name in scan.skipped)]


def notes_for_all_runs(report: Report) -> list[str]:
    """A report of several runs: its notes that belong to no one run (logs skipped or passed over, project
    files ignored). Its first note, that the logs are several runs, the headline says already."""
    return report.notes[1:] if report.runs else []


def describe_run(run: Run) -> str:
    """`2 logs: a.log, b.log; world_size 8, model.num_layers 24` (the logs, then what tells the run apart)."""
    shown = ", ".join(run.paths[:3]) + (f" and {len(run.paths) - 3} more" if len(run.paths) > 3 else "")
    logs = f"{len(run.paths)} log{'s' if len(run.paths) != 1 else ''}: {shown}"
    if run.differs_in:
        return f"{logs}; {', '.join(run.differs_in[:4])}" + (" …" if len(run.differs_in) > 4 else "")
    if not run.placed:
        return f"{logs}; prints no config to tell which run it belongs to"
    return logs


def several_runs(reports: list[Report], notes: Sequence[str] = (), skipped: Sequence[str] = ()) -> Report:
    """One report over the runs' reports: every finding (run by run), every source, the suppressions.
    `notes`: those that belong to no one run; `skipped`: the logs skipped unread, in no run."""
    combined = Report(
        findings=[finding for report in reports for finding in report.findings],
        unmatched=None,
        sources=[SourceSummary(s.path, s.lines) for report in reports for s in report.sources]
        + [SourceSummary(path, 0) for path in skipped],
        notes=[
            f"these logs are {len(reports)} runs, told apart by their config and ranks: each is diagnosed on its "
            "own (a config assembled from several runs would give false verdicts)",
            *notes,
        ],
        run_facts={},
        ranks_seen=sorted({rank for report in reports for rank in report.ranks_seen}),
        runs=reports,
        # Each run's fixes are printed in its own config's dialect (runs[].fix_dialect in JSON); the top level
        # names the first run's, which is every run's in the common case.
        fix_dialect=reports[0].fix_dialect if reports else "bridge",
    )
    for report in reports:
        combined.suppressed.update(report.suppressed)
        combined.suppressed_by.update(report.suppressed_by)
        for key, count in report.suppressed_occurrences.items():
            combined.suppressed_occurrences[key] = combined.suppressed_occurrences.get(key, 0) + count
        combined.project_file = combined.project_file or report.project_file
        report.project_file = None  # said once, for all runs
    return combined
