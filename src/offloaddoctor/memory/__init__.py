"""A GPU-memory model of Megatron-Core training: config values in, bytes per component out.

Pure: reads no logs and renders nothing. `read_shape` turns a config store into a `RunShape`; `estimate`
turns a shape into a `MemoryEstimate` for the most-loaded GPU.
"""

from offloaddoctor.memory.model import (
    DEFAULT_MOMENT_BYTES_PER_PARAMETER,
    DEFAULT_OPTIMIZER_STATE_BYTES_PER_PARAMETER,
    Component,
    MemoryEstimate,
    StageEstimate,
    estimate,
    offloadable_state,
    optimizer_state_bytes_per_parameter,
)
from offloaddoctor.memory.shape import MissingKeys, RunShape, read_shape

__all__ = [
    "DEFAULT_MOMENT_BYTES_PER_PARAMETER",
    "DEFAULT_OPTIMIZER_STATE_BYTES_PER_PARAMETER",
    "Component",
    "MemoryEstimate",
    "MissingKeys",
    "RunShape",
    "StageEstimate",
    "estimate",
    "offloadable_state",
    "optimizer_state_bytes_per_parameter",
    "read_shape",
]
