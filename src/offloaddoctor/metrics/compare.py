"""`compare`: runs with different offload settings against a baseline, judged by the CPU-offloading
guide's success criteria (docs/compare.md has the maths):

1. no OOM or NCCL error (no error finding from `diagnose`);
2. loss matches the baseline: max |Δ lm loss| over the iterations both runs logged < `loss_tolerance`
   (the guide's 0.001 by default);
3. memory drops as expected: the peak-allocated saving is within `memory_tolerance` (relative, 25 %) plus
   `memory_slack_mb` (256 MiB) of the expected saving. Where the memory model read both runs' configs, that is
   its peak for the baseline's shape minus its peak for the run's (`ModelPeak`): a range where the optimizer's
   first build may or may not outlive its use, one figure otherwise. Else a straight line, `fraction × E`, where
   E is the optimizer state the offload can move: the memory model's bytes per parameter (12 when the config is
   not known: fp32 master weight, Adam exp_avg and exp_avg_sq) divided by the data-parallel size (the
   distributed optimizer shards it). The caller (`api.compare`) gives those numbers: `metrics` does not know
   the memory model.

Iteration-time ratios are reported, not judged: the guide measures ~1.9x at 25 % and ~4.2x at 100 % on a
30B MoE model, and small models slow down less, so no single bound is right.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from offloaddoctor.byte_units import MIB
from offloaddoctor.metrics.model import RunMetrics

PASS, FAIL = "pass", "fail"
MODEL, LINE = "memory model", "straight line"  # what a run's expected saving came from


class ModelPeak(NamedTuple):
    """The memory model's peak allocated for one run's shape, in MiB: once Python's garbage collector has freed
    the optimizer's first build (`collected_mb`) and if it has not (`lingering_mb`; the same figure where nothing
    can linger). `first_build_fix`: the advice that frees that build, worded as `estimate` and `diagnose` word
    it, in the run's dialect ("" where nothing can linger)."""

    collected_mb: float
    lingering_mb: float
    first_build_fix: str = ""

    @property
    def first_build_mb(self) -> float:
        return self.lingering_mb - self.collected_mb


class Criteria(NamedTuple):
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
    # The figure the memory judgement used: the model's, for the case the run was in (its first build freed or
    # not) where it gives a range; else the straight line's.
    expected_saving_mb: float | None
    max_abs_loss_delta: float | None
    max_abs_loss_delta_iteration: int | None
    common_iterations: int
    error_findings: list[str]
    verdict: str = PASS
    reasons: list[str] = field(default_factory=list)
    expected_saving_range_mb: tuple[float, float] | None = None  # the memory model's (low, high); None: line
    straight_line_saving_mb: float | None = None  # extra fraction × E, shown next to the model's
    expected_basis: str | None = None  # MODEL or LINE; None: not judged
    notes: list[str] = field(default_factory=list)


@dataclass
class Comparison:
    baseline: RunComparison
    runs: list[RunComparison]
    criteria: Criteria
    optimizer_state_mb: float | None  # E above, when the parameter count is known
    notes: list[str] = field(default_factory=list)
    state_basis: str = ""
    saving_basis: str = ""  # which model gave the expected savings, and why not the memory model where not

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
    criteria: Criteria = Criteria(),  # noqa: B008 - a NamedTuple, immutable
    model_state_mb: tuple[float, str] | None = None,
    *,
    bytes_per_parameter: float,
    model_peaks: Mapping[str, ModelPeak] | None = None,
    model_missing: str = "",
) -> Comparison:
    """`model_state_mb`: the memory model's offloadable optimizer state per GPU and how it was computed; without
    it, `bytes_per_parameter` (the memory model's default) times the log's parameter count: the straight line.
    `model_peaks`: the memory model's peak per run path (the baseline's among them); a run with its own and the
    baseline's is judged by the model, any other by the straight line. `model_missing`: why the model could not
    read a config (the keys it lacks), said in the basis line."""
    state_mb = model_state_mb[0] if model_state_mb else optimizer_state_mb(baseline, bytes_per_parameter)
    peaks = dict(model_peaks or {})
    base_peak = peaks.get(baseline.path)
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
        run_peak = peaks.get(run.path)
        if base_peak is not None and run_peak is not None:
            _expect_from_model(measured, base, base_peak, run_peak)
        _judge(measured, base, criteria)
        _explain_first_build(measured, run_peak)
        comparison.runs.append(measured)
    comparison.saving_basis = _saving_basis(comparison, model_missing)
    return comparison


def _expect_from_model(run: RunComparison, base: RunComparison, base_peak: ModelPeak, run_peak: ModelPeak) -> None:
    """The expected saving: the model's peak for the baseline's shape minus its peak for the run's. The first
    build may linger in either, so the saving lies between (baseline freed, run not) and (baseline not, run
    freed); the figure judged is the case each measured peak is nearest."""
    if run.offload_fraction is None or run.offload_fraction == (base.offload_fraction or 0.0):
        return  # not judged (see _judge_memory)
    low = round(base_peak.collected_mb - run_peak.lingering_mb, 2)
    high = round(base_peak.lingering_mb - run_peak.collected_mb, 2)
    run.expected_saving_range_mb = (low, high) if high != low else None
    base_case = _nearest_case(base.peak_allocated_mb, base_peak)
    run_case = _nearest_case(run.peak_allocated_mb, run_peak)
    run.expected_saving_mb = round(base_case - run_case, 2)
    run.expected_basis = MODEL


def _nearest_case(measured_mb: float | None, peak: ModelPeak) -> float:
    """The model's peak for the case a run was in: first build lingering or freed, whichever is nearer."""
    if measured_mb is None or peak.first_build_mb <= 0:
        return peak.collected_mb
    lingered = abs(measured_mb - peak.lingering_mb) < abs(measured_mb - peak.collected_mb)
    return peak.lingering_mb if lingered else peak.collected_mb


def _explain_first_build(run: RunComparison, peak: ModelPeak | None) -> None:
    """Say so where the run's optimizer first build stayed allocated (its peak is the model's with the build
    held): the saving is smaller than the straight line promises, and how to free it."""
    if peak is None or peak.first_build_mb <= 0 or run.peak_allocated_mb is None or run.expected_basis is None:
        return  # nothing can linger, or the saving is not judged (same fraction as the baseline)
    if _nearest_case(run.peak_allocated_mb, peak) != peak.lingering_mb:
        return
    below = ""
    line, saving = run.straight_line_saving_mb, run.memory_saving_mb
    if line is not None and saving is not None and saving < line:
        below = f"saving {saving:.0f} MB, {line - saving:.0f} MB below the straight line's {line:.0f} MB: "
    run.notes.append(
        f"{below}the optimizer's first build stayed allocated ({peak.first_build_mb:,.0f} MB of fp32 copies that "
        f"only Python's garbage collector frees; the memory model's peak {peak.lingering_mb:,.0f} MB with it, "
        f"{peak.collected_mb:,.0f} MB without, measured {run.peak_allocated_mb:,.0f} MB)"
        + (f"; to {peak.first_build_fix}" if peak.first_build_fix else "")
    )


def _saving_basis(comparison: Comparison, model_missing: str) -> str:
    """Which model gave the expected savings, said in the output: the memory model's, the straight line's (and
    why not the memory model's), or both, naming the runs."""
    judged = [run for run in comparison.runs if run.expected_basis is not None]
    by_model = [run.path for run in judged if run.expected_basis == MODEL]
    by_line = [run.path for run in judged if run.expected_basis == LINE]
    model = (
        "its peak for the baseline's shape minus its peak for the run's, a range where Python's garbage collector "
        "may or may not free the optimizer's first build before training"
    )
    state = comparison.optimizer_state_mb
    line = f"fraction × {state:.0f} MB ({comparison.state_basis})" if state else ""
    why = f"; the memory model could not read the config ({model_missing})" if model_missing else ""
    if by_model and not by_line:
        return f"{MODEL}: {model}"
    if by_line and not by_model:
        return f"{LINE}: {line}{why}"
    if by_model and by_line:
        return f"{MODEL} for {', '.join(by_model)}: {model}; {LINE} for {', '.join(by_line)}: {line}{why}"
    if any(run.offload_fraction != comparison.baseline.offload_fraction for run in comparison.runs):
        return f"not judged: neither the memory model nor a logged parameter count gives it{why}"
    return "not judged: no run offloads more or less than the baseline"


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
    measured = RunComparison(
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
    measured.straight_line_saving_mb = expected
    if expected is not None and extra_fraction:
        measured.expected_basis = LINE
    return measured


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
    saving = run.memory_saving_mb
    if run.expected_basis == MODEL:
        low, high = run.expected_saving_range_mb or (run.expected_saving_mb, run.expected_saving_mb)
        lowest, highest = low - _allowed(low, criteria), high + _allowed(high, criteria)
        if not lowest <= saving <= highest:
            expected = f"{low:.0f} to {high:.0f} MB" if low != high else f"{low:.0f} MB"
            run.reasons.append(
                f"memory saving {saving:.0f} MB is not what the memory model expects for this run's shape: "
                f"{expected} ± {criteria.memory_tolerance:.0%} + {criteria.memory_slack_mb:g} MB "
                f"({lowest:.0f} to {highest:.0f} MB)"
            )
        return
    allowed = _allowed(run.expected_saving_mb, criteria)
    if abs(saving - run.expected_saving_mb) > allowed:
        run.reasons.append(
            f"memory saving {saving:.0f} MB is not in proportion to the fraction: expected "
            f"{run.expected_saving_mb:.0f} ± {allowed:.0f} MB"
        )


def _allowed(expected: float, criteria: Criteria) -> float:
    return criteria.memory_tolerance * abs(expected) + criteria.memory_slack_mb


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
