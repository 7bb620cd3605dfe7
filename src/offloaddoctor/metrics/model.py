"""What the metrics reader hands out: one record per parsed line, and the run they belong to. The iteration
record, which `diagnose` samples too, is defined with its parser (metrics/iteration_lines.py): diagnose does
not create these classes (start-up).

Sizes are MiB (Megatron's "MB"; see metrics/numbers.py). A field the log did not print is None.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from offloaddoctor.metrics.parameter_lines import ParameterCounts

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: typing costs start-up time
    from typing import Any

    from offloaddoctor.metrics.iteration_lines import IterationMetrics


@dataclass(slots=True)
class MemoryReport:
    """One `[Rank N] (after K iterations) memory (MB) | allocated: … | max allocated: … | …` line."""

    path: str
    line: int
    rank: int | None
    segment: int
    iteration: int | None
    unit: str  # as printed in the header: MB (Megatron-LM, old Bridge) or GB (Bridge)
    allocated_mb: float | None = None
    max_allocated_mb: float | None = None
    reserved_mb: float | None = None
    max_reserved_mb: float | None = None
    extra: dict[str, float] = field(default_factory=dict)  # Bridge's active/inactive (MiB), alloc_retries, …


@dataclass
class Layout:
    """How the run is spread over GPUs, from the arguments or `using world size: …` line."""

    world_size: int | None = None
    data_parallel_size: int | None = None
    tensor_model_parallel_size: int | None = None
    pipeline_model_parallel_size: int | None = None
    context_parallel_size: int | None = None


@dataclass
class MetricsSummary:
    iterations_logged: int = 0
    last_iteration: int | None = None
    train_iters: int | None = None
    steady_state_lines: int = 0
    median_iteration_ms: float | None = None
    mean_iteration_ms: float | None = None
    p90_iteration_ms: float | None = None
    median_tflops_per_gpu: float | None = None
    peak_allocated_mb: float | None = None
    peak_reserved_mb: float | None = None
    memory_reports: int = 0
    memory_ranks: list[int] = field(default_factory=list)
    final_loss: float | None = None
    final_loss_iteration: int | None = None
    loss_series: list[tuple[int, float]] = field(default_factory=list)
    skipped_iterations: int = 0
    nan_iterations: int = 0
    # iterations whose line printed a grad norm of nan or inf: Megatron's nan count is of the loss, and stays 0 there
    nonfinite_grad_norm_iterations: list[int] = field(default_factory=list)
    parameter_count: int | None = None
    max_parameters_per_model_parallel_rank: int | None = None
    total_parameters_billions: float | None = None
    theoretical_memory_mb: dict[str, float] = field(default_factory=dict)
    data_parallel_size: int | None = None
    world_size: int | None = None
    offload: dict[str, Any] = field(default_factory=dict)
    effective_offload_fraction: float | None = None
    segments: list[int] = field(default_factory=list)


@dataclass
class RunMetrics:
    """Everything one run's logs print that measures it. `path` is what the user named (a file, a directory
    of per-rank logs, or `-`); `sources` are the files read for it, with their line counts."""

    path: str
    sources: list[tuple[str, int]] = field(default_factory=list)
    iterations: list[IterationMetrics] = field(default_factory=list)
    memory: list[MemoryReport] = field(default_factory=list)
    parameters: ParameterCounts = field(default_factory=ParameterCounts)
    theoretical_memory_mb: dict[str, float] = field(default_factory=dict)
    layout: Layout = field(default_factory=Layout)
    arguments: dict[str, Any] = field(default_factory=dict)  # canonical key -> value, final segment
    summary: MetricsSummary = field(default_factory=MetricsSummary)
    notes: list[str] = field(default_factory=list)
