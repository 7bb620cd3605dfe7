"""How a run is spread over GPUs: world, data-, tensor-, pipeline- and context-parallel sizes.

Read from the arguments block when the log has one, else from Megatron-LM's start-up line
`using world size: 8, data-parallel size: 2, context-parallel size: 1, …, tensor-model-parallel size: 2,
pipeline-model-parallel size: 2` (older releases: `data-parallel-size: 2`). A data-parallel size neither
gives is world size / (TP x PP x CP) when those are known.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from offloaddoctor.coerce import integer
from offloaddoctor.metrics.model import Layout

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: typing costs start-up time
    from typing import Any

LITERAL = "using world size"
_PAIR = re.compile(r"([a-z][a-z -]*?)\s*:\s*(\d+)\b")
_LINE_NAMES = {
    "using world size": "world_size",
    "data-parallel size": "data_parallel_size",
    "data-parallel-size": "data_parallel_size",
    "tensor-model-parallel size": "tensor_model_parallel_size",
    "pipeline-model-parallel size": "pipeline_model_parallel_size",
    "context-parallel size": "context_parallel_size",
}
_ARGUMENT_KEYS = {
    "world_size": ("world_size",),
    "data_parallel_size": ("data_parallel_size",),
    "tensor_model_parallel_size": ("model.tensor_model_parallel_size",),
    "pipeline_model_parallel_size": ("model.pipeline_model_parallel_size",),
    "context_parallel_size": ("context_parallel_size", "model.context_parallel_size"),
}


def parse_layout_line(text: str) -> dict[str, int]:
    if LITERAL not in text:
        return {}
    found = {}
    for name, value in _PAIR.findall(text[text.index(LITERAL) :]):
        field = _LINE_NAMES.get(name.strip().lstrip(", "))
        number = integer(value)
        if field and number is not None:
            found[field] = number
    return found


def resolve_layout(from_line: Mapping[str, int], arguments: Mapping[str, Any]) -> Layout:
    layout = Layout()
    for field, keys in _ARGUMENT_KEYS.items():
        value = next((arguments[k] for k in keys if _positive_int(arguments.get(k))), None)
        if value is None:
            value = from_line.get(field)
        setattr(layout, field, value)
    tensor, pipeline, context = (
        layout.tensor_model_parallel_size,
        layout.pipeline_model_parallel_size,
        layout.context_parallel_size or 1,
    )
    if layout.data_parallel_size is None and layout.world_size and tensor and pipeline:
        model_parallel = tensor * pipeline * context
        if layout.world_size % model_parallel == 0:
            layout.data_parallel_size = layout.world_size // model_parallel
    return layout


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0
