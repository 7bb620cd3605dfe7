"""Parameter-count lines.

- Exact, per model-parallel rank (printed by data-parallel rank 0 of each):
  ` > number of parameters on (tensor, pipeline) model parallel rank (0, 0): 470503424` (Megatron-LM before 0.19,
  Bridge's mlm_compat), ` > number of parameters on (tensor, gtp_remat, pipeline) model parallel rank (0, 0, 0): N`
  (Megatron-LM core_v0.19).
- Rounded, from the theoretical-memory report: `Number of parameters in transformer block in billions:  0.40`
  (older: `… transformer layers …`), `Number of parameters in embedding layers in billions: 0.07`,
  `Total number of parameters in billions: 0.47`, `Number of parameters in most loaded shard in billions: 0.4683`,
  and Bridge's `Number of dense and embedding parameters in billions: …`. Kept under their printed label.
- What trains: megatron-core's DDP lists the parameters its gradient buffers hold, bucket by bucket, on the first
  tensor- and data-parallel rank of each pipeline stage (`Params for bucket 1 (38797312 elements, 38797312 padded
  size):`, 0.16.1; 0.19.0 adds `, 0 param(s) with extra main_grads`). A frozen parameter has no gradient and no
  optimizer state: a LoRA run's buckets hold its adapters only.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from offloaddoctor.coerce import integer
from offloaddoctor.lazy_pattern import lazy_compile

LITERAL = "arameters"
BUCKET_LITERAL = "Params for bucket"
_PER_RANK = lazy_compile(r"number of parameters on \(([^)]*)\) model parallel rank \(([^)]*)\)\s*:\s*(\d+)")
_BUCKET = lazy_compile(r"Params for bucket \d+ \((\d+) elements")
_BILLIONS = lazy_compile(r"((?:Total )?[Nn]umber of [^:]*?parameters[^:]*?) in billions\s*:\s*(\d+(?:\.\d+)?)")
TOTAL_LABEL = "Total number of parameters"
# Gradient buckets holding under this share of the smallest stage's parameters: most of the model is frozen. A model
# that trains every parameter fills its buckets with each stage's whole count (at tensor rank 0, as both are
# printed), so a log missing some stages' bucket lines still holds at least one stage's; a LoRA adapter is ~0.5 %.
FROZEN_BELOW = 0.1


@dataclass
class ParameterCounts:
    """`> number of parameters on (tensor, pipeline) model parallel rank (0, 1): N` per model-parallel rank,
    and the `… in billions: X` lines of the theoretical-memory report by their printed label."""

    per_model_parallel_rank: dict[tuple[tuple[str, int], ...], int] = field(default_factory=dict)
    billions: dict[str, float] = field(default_factory=dict)
    gradient_bucket_elements: int = 0  # every bucket line's, added up (a log read twice counts twice: more, not less)


def read_parameter_line(text: str, counts: ParameterCounts) -> bool:
    """Add what the line says to `counts`; True when it was a parameter-count line. Repeats overwrite,
    so a count printed at every memory report costs nothing."""
    if BUCKET_LITERAL in text:
        bucket = _BUCKET.search(text)
        elements = integer(bucket.group(1)) if bucket else None
        if elements is not None:
            counts.gradient_bucket_elements += elements
        return elements is not None
    per_rank = _PER_RANK.search(text)
    if per_rank:
        names = [n.strip() for n in per_rank.group(1).split(",")]
        indices = [i.strip() for i in per_rank.group(2).split(",")]
        numbers = [number for number in map(integer, indices) if number is not None]
        count = integer(per_rank.group(3))
        if len(names) == len(numbers) == len(indices) and count is not None:
            counts.per_model_parallel_rank[tuple(zip(names, numbers))] = count
            return True
        return False
    billions = _BILLIONS.search(text)
    if billions:
        counts.billions[" ".join(billions.group(1).split())] = float(billions.group(2))
        return True
    return False


def parameter_count(counts: ParameterCounts) -> int | None:
    """All parameters of the model: the exact per-rank counts added up over model-parallel ranks that are not
    replicas of one another (every rank of the layout is a distinct shard), else the rounded total x 1e9.
    With tensor parallelism the layer norms and biases each TP rank holds whole are counted once per TP rank,
    as Megatron's own per-rank numbers count them."""
    if counts.per_model_parallel_rank:
        return sum(counts.per_model_parallel_rank.values())
    total = counts.billions.get(TOTAL_LABEL)
    return round(total * 1e9) if total is not None else None


def trainable_share(counts: ParameterCounts) -> float | None:
    """The share of the parameters that train, where the gradient buckets say most are frozen (under FROZEN_BELOW
    of the smallest stage's count); None where they do not say so, or were not printed."""
    buckets = counts.gradient_bucket_elements
    stages = [
        count
        for key, count in counts.per_model_parallel_rank.items()
        if all(index == 0 for name, index in key if name == "tensor")
    ]
    if not stages and TOTAL_LABEL in counts.billions:
        stages = [round(counts.billions[TOTAL_LABEL] * 1e9)]
    if not buckets or not stages or buckets >= FROZEN_BELOW * min(stages):
        return None
    return buckets / sum(stages)
