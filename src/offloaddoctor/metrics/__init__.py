"""Run metrics from training logs: per-rank, per-iteration numbers and a summary (see metrics/summary.py
for how warm-up is excluded, and docs/metrics.md for the output). Submodules are imported on use, for CLI
start-up time."""

from __future__ import annotations

from collections.abc import Sequence

TYPE_CHECKING = False
if TYPE_CHECKING:
    from offloaddoctor.metrics.model import RunMetrics

_MODEL = {"IterationMetrics", "Layout", "MemoryReport", "MetricsSummary", "ParameterCounts", "RunMetrics"}

__all__ = [
    "IterationMetrics",
    "Layout",
    "MemoryReport",
    "MetricsSummary",
    "ParameterCounts",
    "RunMetrics",
    "collect_metrics",
    "metrics_from_text",
    "run_metrics",
]


def run_metrics(path: str) -> RunMetrics:
    """One run: a log file, a directory of its (per-rank) logs, or `-` for standard input."""
    from offloaddoctor.logs.sources import first_not_text, resolve_sources
    from offloaddoctor.metrics.reader import RunReader
    from offloaddoctor.metrics.summary import summarise

    reader = RunReader(path)
    sources = resolve_sources([path])
    for source in sources:
        reader.read_source(source)
    if not any(lines for _name, lines in reader.run.sources):
        unreadable = first_not_text(sources)  # every file was skipped as binary: nothing was measured
        if unreadable is not None:
            raise unreadable
    return summarise(reader.run, reader.collectors, reader.layout_line)


def collect_metrics(paths: Sequence[str]) -> list[RunMetrics]:
    """One RunMetrics per run among the logs of `paths` (metrics/runs.py: the rule `diagnose` uses): a path
    each when each holds one run; logs of one job given apart are one run, a path holding several runs gives
    several. Raises UserError (one line) for a path that cannot be read."""
    from offloaddoctor.logs.sources import first_not_text, resolve_sources
    from offloaddoctor.metrics.runs import read_run, read_runs
    from offloaddoctor.metrics.summary import summarise

    resolve_sources(paths)  # every path is checked before any is read
    runs, readers = read_runs(paths)
    measured = []
    for run in runs:
        reader = readers[run.name] if readers else read_run(run)
        if not any(lines for _name, lines in reader.run.sources):
            unreadable = first_not_text(run.sources)  # every file was skipped as binary: nothing was measured
            if unreadable is not None:
                raise unreadable
        measured.append(summarise(reader.run, reader.collectors, reader.layout_line))
    return measured


def metrics_from_text(text: str, name: str = "<text>") -> RunMetrics:
    """Metrics of an in-memory log excerpt, read exactly as a file would be."""
    from offloaddoctor.metrics.reader import RunReader
    from offloaddoctor.metrics.summary import summarise

    reader = RunReader(name)
    reader.read_lines(name, text.splitlines())
    return summarise(reader.run, reader.collectors, reader.layout_line)


def __getattr__(name: str):
    # The record classes load on first use: `diagnose` reads parameter counts (metrics.parameter_lines)
    # and should not pay for creating the rest at start-up.
    if name in _MODEL:
        from offloaddoctor.metrics import model

        return getattr(model, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
