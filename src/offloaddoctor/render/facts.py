"""Parsed numbers as people read them."""

from __future__ import annotations


from offloaddoctor.scanning import format_bytes

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: typing costs start-up time
    from typing import Any

_LABELS = {
    "requested_bytes": "tried to allocate",
    "total_capacity_bytes": "GPU capacity",
    "free_bytes": "free",
    "in_use_bytes": "in use by this process",
    "other_processes_bytes": "held by other processes on this GPU, at least",
    "allowed_bytes": "allowed for this process (per-process memory fraction)",
    "allocated_bytes": "allocated by PyTorch",
    "reserved_bytes": "reserved by PyTorch",
    "reserved_unallocated_bytes": "reserved but unallocated",
    "reserved_unallocated_share": "reserved-unallocated share of the GPU",  # of the limit when one is printed
    "fragmentation_suspected": "fragmentation suspected",
    "fragmentation_arithmetic": "fragmentation or capacity",
    "raised_while_building_the_model": "raised while the model was being built, in",
    "raised_while_building_the_optimizer": "raised while the optimizer was being built, in",
    "before_any_iteration_line": "before any iteration line",
    "allocator_figures": "allocator figures",
    "offload_modules_named": "offload_modules the message names",
    "offload_modules_in_recomputed_moe": "offload_modules the message names inside the recomputed MoE layer",
    "gpu": "GPU index",
    "median_iteration_ms": "steady-state iteration time",
    "baseline_iteration_ms": "iteration time before offloading",
    "median_tflops_per_gpu": "steady-state throughput",
    "slowdown_ratio": "slowdown",
    "iteration_time_growth": "iteration time growth",
    "iteration_time_growth_ratio": "growth (last line ÷ first)",
    "iterations_logged": "iteration lines",
    "shortfall_bytes": "missing for this request (requested − free to the process)",
    "whole_step_shortfall_bytes": "missing for the whole step (memory model, with CUDA context and NCCL)",
    "whole_step_shortfall_at_most_bytes": "missing for the whole step, at most (memory model worst case, with CUDA context and NCCL)",
    "trained_parameters": "parameters that train",
    "optimizer_state_estimate_bytes": "offloadable optimizer state per GPU",
    "optimizer_state_estimate_note": "that estimate is",
    "offload_fraction_needed": "optimizer_offload_fraction that would free it",
    "offload_fraction_needed_is": "that fraction is",
    "offload_fraction_needed_with_manual_gc": "with manual garbage collection (the first optimizer build freed)",
    "expected_slowdown": "expected iteration time",
    "peak_allocated_at_the_fix_fraction": "peak allocated at the fix's fraction",
    "overlap_cpu_optimizer_d2h_h2d": "overlap_cpu_optimizer_d2h_h2d",
    "estimate_basis": "an estimate, from",
    "baseline_peak_allocated_bytes": "baseline peak allocated",
    "peak_allocated_bytes": "peak allocated",
    "estimated_peak_allocated_bytes": "estimated peak allocated (memory model)",
    "estimated_nvidia_smi_bytes": "estimated nvidia-smi use",
    "fixed_peak_allocated_bytes": "estimated peak allocated with the fix (memory model)",
    "configured_peak_allocated_bytes": "estimated peak allocated as configured (memory model)",
    "fixed_fits_gpus": "GPUs the run with the fix fits (memory model)",
    "fit_verdict": "fit verdict (memory model)",
    "host_verdict": "host verdict (memory model, --host-memory)",
    "gpu_memory_bytes": "GPU memory",
    "largest_component": "largest component",
    "estimate_vs_allocated": "estimate vs the message",
    "cheapest_change_that_fits": "cheapest change that fits",
    "change_that_helps_most": "no single change fits; the one that frees the most",
    "host_memory_per_rank_bytes": "host memory a rank needs for optimizer offloading",
    "host_memory_per_rank_without_workers_bytes": "the same without data-loader workers and with --manual-gc",
    "host_memory_per_node_bytes": "host memory a node's ranks need",
    "host_memory_basis": "host memory, from",
}


def fact_lines(facts: dict[str, Any]) -> list[tuple[str, str]]:
    """Known facts in a reading order (request, capacity, free, …), then any others by name."""
    order = list(_LABELS)
    names = sorted(facts, key=lambda n: (order.index(n) if n in order else len(order), n))
    return [(_LABELS.get(n, n.replace("_", " ")), format_fact(n, facts[n])) for n in names]


def format_fact(name: str, value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return ", ".join(map(str, value)) or "none"
    if name.endswith("_bytes"):
        return format_bytes(value)
    if name.endswith("_share"):
        return f"{value * 100:.1f} %"
    if name.endswith("_ms"):
        return f"{value:g} ms"
    if name.startswith("median_tflops"):
        return f"{value:g} TFLOP/s/GPU"
    if name.endswith("_ratio"):
        return f"{value:.2f}x"
    return str(value)
