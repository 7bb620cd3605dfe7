"""`metrics` as text: a compact summary per run, for people and CI logs (plain ASCII, no colour)."""

from __future__ import annotations

from offloaddoctor.metrics.iteration_lines import WARMUP_ITERATIONS
from offloaddoctor.scanning import format_ranks
from offloaddoctor.config.values import format_value
from offloaddoctor.metrics.model import MetricsSummary, RunMetrics
from offloaddoctor.text_safety import safe_text

_LABEL_WIDTH = 16


def render_metrics_text(runs: list[RunMetrics]) -> str:
    return "\n".join(_run(run) for run in runs)


def _run(run: RunMetrics) -> str:
    s = run.summary
    lines = sum(count for _, count in run.sources)
    out = [f"{safe_text(run.path)} ({lines:,} lines{_sources(run)})"]
    rows = [("iterations", _iterations(s))]
    if s.iterations_logged:
        rows.append(("iteration time", _times(s)))
        if s.median_tflops_per_gpu is not None:
            rows.append(("throughput", f"{s.median_tflops_per_gpu:g} TFLOP/s/GPU (steady-state median)"))
        rows.append(("loss", _loss(s)))
        rows.append(("skipped / nan", f"{s.skipped_iterations} / {s.nan_iterations} iterations"))
        if s.nonfinite_grad_norm_iterations:
            at = format_ranks(s.nonfinite_grad_norm_iterations)
            rows.append(
                ("grad norm", f"nan or inf at iteration{'s' if len(s.nonfinite_grad_norm_iterations) > 1 else ''} {at}")
            )
    rows.append(("peak memory", _memory(s)))
    rows.append(("parameters", _parameters(s)))
    if s.theoretical_memory_mb:
        parts = ", ".join(f"{k.replace('_', ' ')} {v:.2f}" for k, v in s.theoretical_memory_mb.items())
        rows.append(("theoretical MB", parts))
    rows.append(("parallelism", _layout(s)))
    rows.append(("offload", _offload(s)))
    out += [f"  {label:<{_LABEL_WIDTH}}{value}" for label, value in rows]
    out += [f"  note: {safe_text(note)}" for note in run.notes]
    return "\n".join(out) + "\n"


def _sources(run: RunMetrics) -> str:
    return f", {len(run.sources)} files" if len(run.sources) > 1 else ""


def _iterations(s: MetricsSummary) -> str:
    if not s.iterations_logged:
        return "no iteration lines"
    planned = f" of {s.train_iters}" if s.train_iters else ""
    restarts = f"; job starts {format_ranks(s.segments)}" if s.segments != [0] else ""
    return (
        f"{s.iterations_logged} logged, last {s.last_iteration}{planned}; {s.steady_state_lines} steady-state "
        f"(intervals after iteration {WARMUP_ITERATIONS}){restarts}"
    )


def _times(s: MetricsSummary) -> str:
    if s.median_iteration_ms is None:
        return "no steady-state line yet (every logged interval includes warm-up)"
    return f"median {s.median_iteration_ms:g} ms, mean {s.mean_iteration_ms:g} ms, p90 {s.p90_iteration_ms:g} ms"


def _loss(s: MetricsSummary) -> str:
    if s.final_loss is None:
        return "not logged"
    return f"final {s.final_loss} at iteration {s.final_loss_iteration} ({len(s.loss_series)} values)"


def _memory(s: MetricsSummary) -> str:
    if not s.memory_reports:
        return "no memory report in the log"
    allocated = f"{s.peak_allocated_mb:.2f}" if s.peak_allocated_mb is not None else "?"
    reserved = f"{s.peak_reserved_mb:.2f}" if s.peak_reserved_mb is not None else "?"
    ranks = format_ranks(s.memory_ranks)
    who = f"rank{'s' if len(s.memory_ranks) > 1 else ''} {ranks}" if ranks else "rank ?"
    reports = f"{s.memory_reports} report{'s' if s.memory_reports != 1 else ''}"
    return f"{allocated} MB allocated, {reserved} MB reserved (max of {reports}, {who})"


def _parameters(s: MetricsSummary) -> str:
    if s.parameter_count is None:
        return "not printed"
    billions = f" ({s.total_parameters_billions:g} B)" if s.total_parameters_billions is not None else ""
    return f"{s.parameter_count:,}{billions}"


def _layout(s: MetricsSummary) -> str:
    world = "?" if s.world_size is None else s.world_size
    data = "?" if s.data_parallel_size is None else s.data_parallel_size
    return f"world size {world}, data-parallel size {data}"


def _offload(s: MetricsSummary) -> str:
    shown = [f"{k}={safe_text(format_value(v))}" for k, v in s.offload.items() if v is not None]
    if not shown:
        return "settings not printed in the log"
    fraction = s.effective_offload_fraction
    effective = f" (effective fraction {fraction:g})" if fraction is not None else ""
    return ", ".join(shown) + effective
