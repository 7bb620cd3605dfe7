"""Run metrics from training logs: per-rank, per-iteration numbers and a summary (see metrics/summary.py
for how warm-up is excluded, and docs/metrics.md for the output). Submodules are imported on use, for CLI
start-up time."""

from __future__ import annotations

from collections.abc import Sequence

from offloaddoctor.lazy_exports import lazy_exports

TYPE_CHECKING = False
if TYPE_CHECKING:
    from offloaddoctor.metrics.model import RunMetrics

# The record classes, and the module that defines each.
_RECORDS = {
    "IterationMetrics": "iteration_lines",
    "Layout": "model",
    "MemoryReport": "model",
    "MetricsSummary": "model",
    "ParameterCounts": "parameter_lines",
    "RunMetrics": "model",
}

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
    from offloaddoctor.logs.sources import resolve_sources
    from offloaddoctor.metrics.reader import RunReader

    sources = resolve_sources([path])
    return _summarised(RunReader.read(path, sources), sources)


def collect_metrics(paths: Sequence[str]) -> list[RunMetrics]:
    """One RunMetrics per run among the logs of `paths` (metrics/runs.py: the rule `diagnose` uses): a path
    each when each holds one run; logs of one job given apart are one run, a path holding several runs gives
    several. Raises UserError (one line) for a path that cannot be read."""
    from offloaddoctor.logs.sources import resolve_sources
    from offloaddoctor.metrics.reader import RunReader
    from offloaddoctor.metrics.runs import read_runs

    resolve_sources(paths)  # every path is checked before any is read
    runs, readers = read_runs(paths)
    return [
        _summarised(readers[run.name] if readers else RunReader.read(run.name, run.sources), run.sources)
        for run in runs
    ]


def metrics_from_text(text: str, name: str = "<text>") -> RunMetrics:
    """Metrics of an in-memory log excerpt, read exactly as a file would be."""
    from offloaddoctor.metrics.reader import RunReader
    from offloaddoctor.metrics.summary import summarise

    reader = RunReader(name)
    reader.read_lines(name, text.splitlines())
    return summarise(reader.run, reader.collectors, reader.layout_line)


def _summarised(reader, sources) -> RunMetrics:
    """The run `reader` read from `sources`, summarised; raises the reason when every file was skipped as binary
    (nothing was measured)."""
    from offloaddoctor.logs.sources import first_not_text
    from offloaddoctor.metrics.summary import summarise

    if not any(lines for _name, lines in reader.run.sources):
        unreadable = first_not_text(sources)
        if unreadable is not None:
            raise unreadable
    return summarise(reader.run, reader.collectors, reader.layout_line)


# The record classes load on first use: `diagnose` reads parameter counts (metrics.parameter_lines) and should
# not pay for creating the rest at start-up.
__getattr__ = lazy_exports(__name__, _RECORDS, globals())
