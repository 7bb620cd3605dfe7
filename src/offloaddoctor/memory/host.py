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


def bytes_a_parameter(precision_aware: bool, rounding: float = 1.0) -> float:
    """Host bytes a rank needs for each parameter it offloads: the measured figure and its pinned fp32 buffers
    (`rounding`: what the pinned allocator holds for them over their size)."""
    pinned = 4 * rounding * cal.HOST_PINNED_FP32_BUFFERS[precision_aware]
    return cal.HOST_BYTES_PER_OFFLOADED_PARAMETER[precision_aware] + pinned


def offload_host_bytes(shape: RunShape, params: StageParameters, offloaded: float) -> float:
    """Host memory a rank needs for `offloaded` parameters whose optimizer it offloads (0 if none)."""
    if not offloaded:
        return 0.0
    process = cal.HOST_PROCESS_BYTES + (cal.HOST_PROCESS_BYTES_SEVERAL_GPUS if shape.world_size > 1 else 0.0)
    # Megatron's first HybridDeviceOptimizer copies its share of the model's own parameters, unsharded: what it
    # copies beyond this rank's shard stays on the host as well (p06, p07: data parallel 2).
    unsharded = max(0.0, params.total * first_build_offloaded_share(shape, params) - offloaded)
    per_parameter = bytes_a_parameter(shape.precision_aware_optimizer, pinned_rounding(shape, params))
    return process + offloaded * per_parameter + unsharded * cal.HOST_FIRST_BUILD_BYTES
