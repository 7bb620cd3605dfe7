"""Host memory of optimizer offloading: what each rank holds on the CPU, as measured on real runs.

The figures are memory/calibration.py's (the host's own account of its memory, traced from inside each rank):
more than the offloaded state by the source, because PyTorch's pinned-memory allocator rounds each block up to a
power of two and keeps what it freed, and the process's resident size does not show all of it.
"""

from __future__ import annotations

from offloaddoctor.memory import calibration as cal
from offloaddoctor.memory.offload_split import first_build_offloaded_share, pinned_rounding
from offloaddoctor.memory.parameters import StageParameters
from offloaddoctor.memory.shape import RunShape


def _own_bytes(precision_aware: bool, rounding: float) -> float:
    """What the rank's process holds for each parameter it offloads: the measured figure and its pinned fp32 buffers
    (`rounding`: what the pinned allocator holds for them over their size)."""
    return (
        cal.HOST_BYTES_PER_OFFLOADED_PARAMETER[precision_aware]
        + 4 * rounding * cal.HOST_PINNED_FP32_BUFFERS[precision_aware]
    )


def workers_bytes_a_parameter(precision_aware: bool) -> float:
    """What a rank's data-loader workers keep for each parameter it offloads: the first build's copy and the
    parameters CPU Adam writes after the fork."""
    return cal.HOST_FIRST_BUILD_BYTES + cal.HOST_WORKERS_STEP_BYTES[precision_aware]


def bytes_a_parameter(precision_aware: bool, rounding: float = 1.0) -> float:
    """Host bytes the host gives up for each parameter a rank that forks data-loader workers offloads (the most)."""
    return _own_bytes(precision_aware, rounding) + workers_bytes_a_parameter(precision_aware)


def _workers_own_bytes(workers: int, forked_in_training: bool) -> float:
    """The pages a loader's workers write themselves; those forked in the training loop kept less beyond the first
    two (calibration.py HOST_LATE_WORKER_BYTES)."""
    if not forked_in_training:
        return workers * cal.HOST_WORKER_BYTES
    full = min(workers, cal.HOST_LATE_WORKERS_AT_FULL_COST)
    return full * cal.HOST_WORKER_BYTES + (workers - full) * cal.HOST_LATE_WORKER_BYTES


def offload_host_bytes(shape: RunShape, params: StageParameters, offloaded: float, loads_data: bool) -> float:
    """Host memory a rank needs for `offloaded` parameters whose optimizer it offloads (0 if none). `loads_data`: the
    rank builds the data loader (tensor-parallel rank 0 of the first and last stages): its workers, where it forks
    any, keep what the rank frees and writes after the fork (calibration.py HOST_FIRST_BUILD_BYTES)."""
    if not offloaded:
        return 0.0
    forks = loads_data and shape.data_loader_workers > 0
    process = cal.HOST_PROCESS_BYTES + (cal.HOST_PROCESS_BYTES_SEVERAL_GPUS if shape.world_size > 1 else 0.0)
    if forks:
        process += _workers_own_bytes(shape.data_loader_workers, shape.training_loader_forks_late)
    own = offloaded * _own_bytes(shape.precision_aware_optimizer, pinned_rounding(shape, params))
    step = offloaded * cal.HOST_WORKERS_STEP_BYTES[shape.precision_aware_optimizer] if forks else 0.0
    if forks and shape.validation_forks_in_training:
        # Its workers keep what Adam writes as it was at the first evaluation, the moments included (p35).
        moments = shape.exp_avg_bytes + shape.exp_avg_sq_bytes
        step += offloaded * (cal.HOST_WORKERS_STEP_BYTES[shape.precision_aware_optimizer] + moments)
        process += _workers_own_bytes(shape.data_loader_workers, forked_in_training=True)
    # Megatron's first HybridDeviceOptimizer copies its share of the model's own parameters, unsharded (beyond this
    # rank's shard at data parallel 2: p06, p07): kept by workers forked before the collection, or by the rank until
    # something collects it.
    first_build = 0.0
    if (forks and not shape.training_loader_forks_late) or not shape.manual_gc:
        first_build = max(offloaded, params.total * first_build_offloaded_share(shape, params))
    return process + own + step + first_build * cal.HOST_FIRST_BUILD_BYTES
