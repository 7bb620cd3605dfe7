"""`compare` output: a table (plain text, stable for snapshots) and versioned JSON."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from offloaddoctor import __version__
from offloaddoctor.metrics.compare import Comparison, RunComparison
from offloaddoctor.render.json_report import SCHEMA_VERSION
from offloaddoctor.text_safety import json_document, safe_text

_COLUMNS = (
    "run",
    "fraction",
    "median ms",
    "ratio",
    "peak alloc MB",
    "saving MB",
    "per 1.0 MB",
    "expected MB",
    "max |Δloss|",
    "verdict",
)


def _number(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _expected(run: RunComparison) -> str:
    """The expected saving: the memory model's range where it gives one, else one figure."""
    if run.expected_saving_range_mb is not None:
        low, high = run.expected_saving_range_mb
        return f"{low:.0f}..{high:.0f}"
    return _number(run.expected_saving_mb, ".0f")


def _row(run: RunComparison, baseline: bool) -> list[str]:
    return [
        safe_text(run.path),
        _number(run.offload_fraction, "g"),
        _number(run.median_iteration_ms, ".1f"),
        "1.00x" if baseline else (_number(run.iteration_time_ratio, ".2f") + "x" if run.iteration_time_ratio else "-"),
        _number(run.peak_allocated_mb, ".0f"),
        "" if baseline else _number(run.memory_saving_mb, ".0f"),
        "" if baseline else _number(run.saving_per_unit_fraction_mb, ".0f"),
        "" if baseline else _expected(run),
        ""
        if baseline
        else (
            _number(run.max_abs_loss_delta, ".2e")
            + (f" @{run.max_abs_loss_delta_iteration}" if run.max_abs_loss_delta_iteration else "")
        ),
        "baseline" if baseline else run.verdict.upper(),
    ]


def render_compare_plain(comparison: Comparison) -> str:
    rows = [list(_COLUMNS), _row(comparison.baseline, True)] + [_row(run, False) for run in comparison.runs]
    widths = [max(len(row[i]) for row in rows) for i in range(len(_COLUMNS))]
    lines = [
        "  ".join(cell.ljust(widths[i]) if i == 0 else cell.rjust(widths[i]) for i, cell in enumerate(row)).rstrip()
        for row in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    criteria = comparison.criteria
    lines += [
        "",
        f"Criteria: no error finding; max |Δ loss| < {criteria.loss_tolerance:g} over common iterations; saving within "
        f"{criteria.memory_tolerance:.0%} + {criteria.memory_slack_mb:g} MB of the expected saving.",
        f"Expected saving: {comparison.saving_basis}.",
    ]
    for run in comparison.runs:
        for reason in run.reasons:
            lines.append(f"FAIL {safe_text(run.path)}: {safe_text(reason)}")
    for run in comparison.runs:
        lines += [f"note {safe_text(run.path)}: {safe_text(note)}" for note in run.notes]
    lines += [f"note: {safe_text(note)}" for note in comparison.notes]
    return "\n".join(lines) + "\n"


def _run_dict(run: RunComparison) -> dict[str, Any]:
    data = asdict(run)
    data["offload"] = dict(run.offload)
    return data


def render_compare_json(comparison: Comparison) -> str:
    baseline = _run_dict(comparison.baseline)
    for key in (
        "verdict",
        "reasons",
        "iteration_time_ratio",
        "memory_saving_mb",
        "saving_per_unit_fraction_mb",
        "expected_saving_mb",
        "expected_saving_range_mb",
        "straight_line_saving_mb",
        "expected_basis",
        "notes",
        "max_abs_loss_delta",
        "max_abs_loss_delta_iteration",
        "common_iterations",
    ):
        baseline.pop(key)
    return json_document(
        {
            "schema_version": SCHEMA_VERSION,
            "tool": {"name": "offloaddoctor", "version": __version__},
            "criteria": comparison.criteria._asdict(),
            "optimizer_state_mb": comparison.optimizer_state_mb,
            "optimizer_state_basis": comparison.state_basis,
            "expected_saving_basis": comparison.saving_basis,
            "baseline": baseline,
            "runs": [_run_dict(run) for run in comparison.runs],
            "notes": comparison.notes,
        }
    )
