"""`metrics --format json`: the versioned schema documented in docs/metrics.md."""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import Any

from offloaddoctor import __version__
from offloaddoctor.metrics.model import RunMetrics
from offloaddoctor.text_safety import json_document

SCHEMA_VERSION = 1


def metrics_to_dict(runs: list[RunMetrics]) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "offloaddoctor", "version": __version__},
        "runs": [_run(run) for run in runs],
    }


def _run(run: RunMetrics) -> dict[str, Any]:
    summary = asdict(run.summary)
    summary["loss_series"] = [[iteration, loss] for iteration, loss in run.summary.loss_series]
    return _finite(
        {
            "path": run.path,
            "sources": [{"path": path, "lines": lines} for path, lines in run.sources],
            "summary": summary,
            "layout": asdict(run.layout),
            "parameters": {
                "per_model_parallel_rank": [
                    {"ranks": dict(key), "count": count}
                    for key, count in run.parameters.per_model_parallel_rank.items()
                ],
                "billions": dict(run.parameters.billions),
            },
            "iterations": [_iteration(record) for record in run.iterations],
            "memory": [asdict(report) for report in run.memory],
            "arguments": dict(sorted(run.arguments.items())),
            "notes": list(run.notes),
        }
    )


def _iteration(record) -> dict[str, Any]:
    data = asdict(record)
    del data["text"]  # diagnose's evidence, not part of the metrics schema
    return data


def _finite(value: Any) -> Any:
    """NaN and infinities become null: JSON has no spelling for them (counts of NaN iterations stay)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value


def render_metrics_json(runs: list[RunMetrics]) -> str:
    return json_document(metrics_to_dict(runs), allow_nan=False)
