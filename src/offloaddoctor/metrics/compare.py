"""`compare`: runs with different offload settings against a baseline, judged by the CPU-offloading
guide's success criteria (docs/compare.md has the maths):

1. no OOM or NCCL error (no error finding from `diagnose`);
2. loss matches the baseline: max |Δ lm loss| over the iterations both runs logged < `loss_tolerance`
   (the guide's 0.001 by default);
3. memory drops in proportion to the offload fraction: the peak-allocated saving is within
   `memory_tolerance` (relative, 25 %) plus `memory_slack_mb` (256 MiB) of `fraction × E`, where E is the
   optimizer state the offload can move: the memory model's bytes per parameter (12 when the config is not
   known: fp32 master weight, Adam exp_avg and exp_avg_sq) divided by the data-parallel size (the distributed
   optimizer shards it). The caller (`api.compare`) gives that number: `metrics` does not know the memory model.

Iteration-time ratios are reported, not judged: the guide measures ~1.9x at 25 % and ~4.2x at 100 % on a
30B MoE model, and small models slow down less, so no single bound is right.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from offloaddoctor.byte_units import MIB
from offloaddoctor.metrics.model import RunMetrics

PASS, FAIL = "pass", "fail"


@dataclass(frozen=True)
class Criteria:
    loss_tolerance: float = 0.001
    memory_tolerance: float = 0.25
    memory_slack_mb: float = 256.0


@dataclass
class RunComparison:
    path: str
    offload: dict[str, Any]
    offload_fraction: float | None
    median_iteration_ms: float | None
    iteration_time_ratio: float | None
    peak_allocated_mb: float | None
    memory_saving_mb: float | None
    saving_per_unit_fraction_mb: float | None
    expected_saving_mb: float | None
    max_abs_loss_delta: float | None
    max_abs_loss_delta_iteration: int | None
    common_iterations: int
    error_findings: list[str]
    verdict: str = PASS
    reasons: list[str] = field(default_factory=list)


@dataclass
class Comparison:
    baseline: RunComparison
    runs: list[RunComparison]
    criteria: Criteria
    optimizer_state_mb: float | None  # E above, when the parameter count is known
    notes: list[str] = field(default_factory=list)
    state_basis: str = ""

    @property
    def failed(self) -> bool:
        return any(run.verdict == FAIL for run in self.runs)


def optimizer_state_mb(run: RunMetrics, bytes_per_parameter: float) -> float | None:
    """Offloadable optimizer bytes per GPU, in MiB, from the parameter count and data-parallel size."""
    summary = run.summary
    params = summary.max_parameters_per_model_parallel_rank or summary.parameter_count
    if not params:
        return None
    return params * bytes_per_parameter / (summary.data_parallel_size or 1) / MIB


def compare_runs(
    baseline: RunMetrics,
    runs: list[RunMetrics],
    error_findings: dict[str, list[str]],
    criteria: Criteria = Criteria(),
    model_state_mb: tuple[float, str] | None = None,
    *,
    bytes_per_parameter: float,
) -> Comparison:
    """`model_state_mb`: the memory model's offloadable optimizer state per GPU and how it was computed; without
    it, `bytes_per_parameter` (the memory model's default) times the log's parameter count."""
    state_mb = model_state_mb[0] if model_state_mb else optimizer_state_mb(baseline, bytes_per_parameter)
    base = _measure(baseline, baseline, error_findings.get(baseline.path, []), state_mb)
    comparison = Comparison(base, [], criteria, state_mb)
    comparison.state_basis = (
        f"optimizer state per GPU from the memory model: {model_state_mb[1]}"
        if model_state_mb
        else f"{bytes_per_parameter:g} B/parameter of optimizer state ÷ data-parallel size"
    )
    if base.error_findings:
        comparison.notes.append(f"the baseline itself has error findings ({', '.join(base.error_findings)})")
    if base.offload_fraction not in (None, 0.0):
        comparison.notes.append(
            f"the baseline offloads (fraction {base.offload_fraction:g}): savings are relative to it"
        )
    for run in runs:
        measured = _measure(run, baseline, error_findings.get(run.path, []), state_mb)
        _judge(measured, base, criteria)
        comparison.runs.append(measured)
    return comparison


def _measure(run: RunMetrics, baseline: RunMetrics, errors: list[str], state_mb: float | None) -> RunComparison:
    summary, base = run.summary, baseline.summary
    fraction = summary.effective_offload_fraction
    base_fraction = base.effective_offload_fraction or 0.0
    ratio = _ratio(summary.median_iteration_ms, base.median_iteration_ms)
    saving = _difference(base.peak_allocated_mb, summary.peak_allocated_mb)
    extra_fraction = None if fraction is None else fraction - base_fraction
    per_unit = round(saving / extra_fraction, 2) if saving is not None and extra_fraction else None
    expected = round(extra_fraction * state_mb, 2) if extra_fraction is not None and state_mb else None
    delta, at, common = _loss_delta(run, baseline)
    return RunComparison(
        run.path,
        summary.offload,
        fraction,
        summary.median_iteration_ms,
        ratio,
        summary.peak_allocated_mb,
        saving,
        per_unit,
        expected,
        delta,
        at,
        common,
        list(errors),
    )


def _judge(run: RunComparison, base: RunComparison, criteria: Criteria) -> None:
    if run.error_findings:
        run.reasons.append(f"error findings in the log: {', '.join(run.error_findings)}")
    if run.max_abs_loss_delta is None:
        run.reasons.append("no iteration with a loss was logged by both runs: loss cannot be compared")
    elif not run.max_abs_loss_delta < criteria.loss_tolerance:
        run.reasons.append(
            f"max |Δ loss| {run.max_abs_loss_delta:.3g} at iteration {run.max_abs_loss_delta_iteration} "
            f"is not below {criteria.loss_tolerance:g}"
        )
    _judge_memory(run, base, criteria)
    run.verdict = FAIL if run.reasons else PASS


def _judge_memory(run: RunComparison, base: RunComparison, criteria: Criteria) -> None:
    if run.offload_fraction is None:
        run.reasons.append("the log does not say whether optimizer offloading is on: memory saving cannot be judged")
        return
    if run.expected_saving_mb is None or run.offload_fraction == (base.offload_fraction or 0.0):
        return  # nothing offloaded beyond the baseline, or no parameter count: nothing to be proportional to
    if run.memory_saving_mb is None:
        run.reasons.append("no memory report in one of the logs (--log-memory-interval): saving cannot be judged")
        return
    allowed = criteria.memory_tolerance * abs(run.expected_saving_mb) + criteria.memory_slack_mb
    if abs(run.memory_saving_mb - run.expected_saving_mb) > allowed:
        run.reasons.append(
            f"memory saving {run.memory_saving_mb:.0f} MB is not in proportion to the fraction: expected "
            f"{run.expected_saving_mb:.0f} ± {allowed:.0f} MB"
        )


def _loss_delta(run: RunMetrics, baseline: RunMetrics) -> tuple[float | None, int | None, int]:
    mine, theirs = dict(run.summary.loss_series), dict(baseline.summary.loss_series)
    common = sorted(set(mine) & set(theirs))
    if not common:
        return None, None, 0
    worst = max(common, key=lambda i: abs(mine[i] - theirs[i]))
    return round(abs(mine[worst] - theirs[worst]), 9), worst, len(common)


def _ratio(value: float | None, base: float | None) -> float | None:
    return round(value / base, 3) if value is not None and base else None


def _difference(base: float | None, value: float | None) -> float | None:
    return round(base - value, 2) if base is not None and value is not None else None
