"""`metrics --format csv`: one row per (run, source, segment, rank, iteration), iteration fields and the memory
report of that rank at that iteration side by side. An empty cell: not printed. NaN prints as `nan`. Paths are
shown through safe_text: a newline or `::` in a file name must not start a runner command; and a text cell
that starts with `=`, `+`, `-`, `@`, tab or CR gets a leading `'`, so that a crafted file name is not a formula
to a spreadsheet (OWASP's CSV-injection advice). Number cells are left as numbers."""

from __future__ import annotations

import csv
import io

from offloaddoctor.metrics.iteration_lines import IterationMetrics
from offloaddoctor.metrics.model import MemoryReport, RunMetrics
from offloaddoctor.text_safety import safe_text

ITERATION_COLUMNS = (
    "elapsed_ms",
    "tflops_per_gpu",
    "learning_rate",
    "global_batch_size",
    "lm_loss",
    "loss_scale",
    "grad_norm",
    "skipped_iterations",
    "nan_iterations",
)
MEMORY_COLUMNS = ("allocated_mb", "max_allocated_mb", "reserved_mb", "max_reserved_mb")
COLUMNS = ("run", "source", "line", "segment", "rank", "iteration", "steady_state", *ITERATION_COLUMNS, *MEMORY_COLUMNS)


def render_metrics_csv(runs: list[RunMetrics]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    for run in runs:
        for row in _rows(run):
            writer.writerow(row)
    return out.getvalue()


def _rows(run: RunMetrics) -> list[list]:
    order = {path: index for index, (path, _) in enumerate(run.sources)}
    merged: dict[tuple, list] = {}  # key -> [iteration record or None, memory report or None]
    for record in run.iterations:
        merged.setdefault(_key(record), [None, None])[0] = record
    for report in run.memory:
        merged.setdefault(_key(report), [None, None])[1] = report

    def sort_key(key: tuple) -> tuple:
        path, segment, rank, iteration = key
        return (
            order.get(path, len(order)),
            segment,
            -1 if iteration is None else iteration,
            -1 if rank is None else rank,
        )

    rows = []
    for key in sorted(merged, key=sort_key):
        record, report = merged[key]
        path, segment, rank, iteration = key
        line = record.line if record is not None else report.line
        row = [_text_cell(run.path), _text_cell(path), line, segment, _cell(rank), _cell(iteration)]
        row.append("" if record is None else str(record.steady_state).lower())
        row += [_cell(getattr(record, c)) if record is not None else "" for c in ITERATION_COLUMNS]
        row += [_cell(getattr(report, c)) if report is not None else "" for c in MEMORY_COLUMNS]
        rows.append(row)
    return rows


def _key(item: IterationMetrics | MemoryReport) -> tuple:
    return (item.path, item.segment, item.rank, item.iteration)


_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _text_cell(text: str) -> str:
    shown = safe_text(text)
    return "'" + shown if shown.startswith(_FORMULA_START) else shown


def _cell(value) -> str:
    if value is None:
        return ""
    return repr(value) if isinstance(value, float) else str(value)
