"""The run summary: steady-state speed, peak memory, loss, and the settings that produced them.

Warm-up. Megatron prints one line every `--log-interval` iterations (and, in recent releases, one for
iteration 1), and each line's time and throughput are the average over the iterations since the previous
line. The first iterations carry compilation, allocator growth and data-loader start-up (iteration 1 of the
H100 logs in fixtures/ takes 3.6x and 4.7x the steady-state time). So a line counts as steady state only if
the whole interval it averages starts after iteration WARMUP_ITERATIONS (3): the line before it, in the same
series, must be at iteration 3 or later. The first line of a series never counts, as the start of its
interval is unknown. This is the rule diagnose uses (metrics/iteration_lines.py `steady_state`), applied per
series: one series per source, segment (job start) and rank. A job restarted in the same log starts a new
series, so its first line after the restart is dropped too. A log that stops inside warm-up has no
steady-state numbers: better none than wrong ones.

Only iteration time and throughput are steady-state statistics. Loss, skipped and NaN counts cover every
logged iteration. Peak memory is the largest `max allocated` / `max reserved` of any report on any rank:
PyTorch's high-water marks since the process started, so warm-up is included, as it should be for a peak.

Which part of a log. A log can hold several job starts (one arguments block each). The summary describes the
run as its final settings configure it: the last start, and earlier starts whose printed offload settings
are the same (a resumed job) or that printed none. Where the same iteration was logged twice (a restart from
an earlier checkpoint), the later start's loss counts.

Ranks. Megatron prints the iteration line from the last rank only; an iteration line without a launcher
prefix is attributed to rank world_size - 1 when the world size is known. When several ranks print the same
iteration, the step takes the slowest time, the lowest throughput and the largest skipped/NaN counts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from offloaddoctor.config.from_log import LogConfigCollector
from offloaddoctor.config.values import same_value
from offloaddoctor.metrics.layout import resolve_layout
from offloaddoctor.metrics.iteration_lines import IterationMetrics, steady_state
from offloaddoctor.metrics.model import MetricsSummary, RunMetrics
from offloaddoctor.metrics.parameter_lines import TOTAL_LABEL, parameter_count
from offloaddoctor.metrics.settings import (
    effective_offload_fraction,
    final_arguments,
    offload_settings,
    segment_offload,
)


@dataclass
class _Step:
    """One iteration as logged by every rank that printed it."""

    records: list[IterationMetrics] = field(default_factory=list)

    @property
    def steady(self) -> bool:
        return all(r.steady_state for r in self.records)

    def worst(self, attribute: str, pick=max):
        values = [getattr(r, attribute) for r in self.records if getattr(r, attribute) is not None]
        return pick(values) if values else None

    def last(self, attribute: str):
        values = [getattr(r, attribute) for r in self.records if getattr(r, attribute) is not None]
        return values[-1] if values else None


def summarise(run: RunMetrics, collectors: list[LogConfigCollector], layout_line: dict[str, int]) -> RunMetrics:
    run.arguments = final_arguments(collectors)
    run.layout = resolve_layout(layout_line, run.arguments)
    _attribute_unprefixed_iteration_lines(run)
    mark_steady_state(run.iterations)
    summary = run.summary = MetricsSummary()
    offload = offload_settings(run.arguments)
    summary.offload = offload
    summary.effective_offload_fraction = effective_offload_fraction(offload)
    included = _included_segments(collectors, offload)
    summary.segments = sorted({segment for _, segment in included})
    _iteration_figures(summary, [r for r in run.iterations if (r.path, r.segment) in included])
    _memory_figures(summary, run, included)
    summary.parameter_count = parameter_count(run.parameters)
    per_rank = run.parameters.per_model_parallel_rank.values()
    summary.max_parameters_per_model_parallel_rank = max(per_rank) if per_rank else None
    summary.total_parameters_billions = run.parameters.billions.get(TOTAL_LABEL)
    summary.theoretical_memory_mb = dict(run.theoretical_memory_mb)
    summary.data_parallel_size = run.layout.data_parallel_size
    summary.world_size = run.layout.world_size
    return run


def mark_steady_state(records: list[IterationMetrics]) -> None:
    """Set `steady_state` on every record, series by series (see the module docstring)."""
    series: dict[tuple, list[IterationMetrics]] = {}
    for record in records:
        series.setdefault((record.path, record.segment, record.rank), []).append(record)
    for members in series.values():
        for record in steady_state(members):
            record.steady_state = True


def percentile(values: list[float], share: float) -> float:
    """Linear interpolation between the closest ranks (numpy's default); one value is its own percentile."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * share
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _attribute_unprefixed_iteration_lines(run: RunMetrics) -> None:
    world = run.layout.world_size
    if not world:
        return
    for record in run.iterations:
        if record.rank is None:
            record.rank = world - 1


def _included_segments(collectors: list[LogConfigCollector], final: dict) -> set[tuple[str, int]]:
    included = set()
    for collector in collectors:
        for segment in range(collector.segment + 1):
            printed = segment_offload(collector, segment)
            if all(same_value(value, final.get(key)) for key, value in printed.items()):
                included.add((collector.path, segment))
    return included


def _iteration_figures(summary: MetricsSummary, records: list[IterationMetrics]) -> None:
    steps: dict[tuple[int, int], _Step] = {}
    for record in records:
        steps.setdefault((record.segment, record.iteration), _Step()).records.append(record)
    ordered = [steps[key] for key in sorted(steps)]
    steady = [step for step in ordered if step.steady]
    times = [t for t in (step.worst("elapsed_ms") for step in steady) if t is not None]
    summary.steady_state_lines = len(steady)
    if times:
        import statistics  # with decimal, fractions, random: ~14 M instructions, for a log without iterations too

        summary.median_iteration_ms = round(statistics.median(times), 3)
        summary.mean_iteration_ms = round(statistics.fmean(times), 3)
        summary.p90_iteration_ms = round(percentile(times, 0.9), 3)
    throughputs = [t for t in (step.worst("tflops_per_gpu", min) for step in steady) if t is not None]
    if throughputs:
        import statistics

        summary.median_tflops_per_gpu = round(statistics.median(throughputs), 3)
    # A later start that logs an iteration again replaces the earlier one.
    latest = {iteration: step for (_, iteration), step in sorted(steps.items())}
    summary.iterations_logged = len(latest)
    if latest:
        summary.last_iteration = max(latest)
        summary.train_iters = latest[summary.last_iteration].last("train_iters")
    for iteration in sorted(latest):
        step = latest[iteration]
        loss = step.last("lm_loss")
        if loss is not None:
            summary.loss_series.append((iteration, loss))
        summary.skipped_iterations += step.worst("skipped_iterations") or 0
        summary.nan_iterations += step.worst("nan_iterations") or 0
        grad_norm = step.last("grad_norm")
        if grad_norm is not None and not math.isfinite(grad_norm):
            summary.nonfinite_grad_norm_iterations.append(iteration)
    finite = [(i, loss) for i, loss in summary.loss_series if loss == loss and abs(loss) != float("inf")]
    if finite:
        summary.final_loss_iteration, summary.final_loss = finite[-1]


def _memory_figures(summary: MetricsSummary, run: RunMetrics, included: set[tuple[str, int]]) -> None:
    reports = [m for m in run.memory if (m.path, m.segment) in included]
    summary.memory_reports = len(reports)
    summary.memory_ranks = sorted({m.rank for m in reports if m.rank is not None})
    allocated = [v for v in (_peak(m.max_allocated_mb, m.allocated_mb) for m in reports) if v is not None]
    reserved = [v for v in (_peak(m.max_reserved_mb, m.reserved_mb) for m in reports) if v is not None]
    summary.peak_allocated_mb = max(allocated) if allocated else None
    summary.peak_reserved_mb = max(reserved) if reserved else None


def _peak(high_water: float | None, current: float | None) -> float | None:
    return high_water if high_water is not None else current
