"""Parameter-count lines.

- Exact, per model-parallel rank (printed by data-parallel rank 0 of each):
  ` > number of parameters on (tensor, pipeline) model parallel rank (0, 0): 470503424` (Megatron-LM before 0.19,
  Bridge's mlm_compat), ` > number of parameters on (tensor, gtp_remat, pipeline) model parallel rank (0, 0, 0): N`
  (Megatron-LM core_v0.19).
- Rounded, from the theoretical-memory report: `Number of parameters in transformer block in billions:  0.40`
  (older: `… transformer layers …`), `Number of parameters in embedding layers in billions: 0.07`,
  `Total number of parameters in billions: 0.47`, `Number of parameters in most loaded shard in billions: 0.4683`,
  and Bridge's `Number of dense and embedding parameters in billions: …`. Kept under their printed label.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from offloaddoctor.coerce import integer
from offloaddoctor.lazy_pattern import lazy_compile

LITERAL = "arameters"
_PER_RANK = lazy_compile(r"number of parameters on \(([^)]*)\) model parallel rank \(([^)]*)\)\s*:\s*(\d+)")
_BILLIONS = lazy_compile(r"((?:Total )?[Nn]umber of [^:]*?parameters[^:]*?) in billions\s*:\s*(\d+(?:\.\d+)?)")
TOTAL_LABEL = "Total number of parameters"


@dataclass
class ParameterCounts:
    """`> number of parameters on (tensor, pipeline) model parallel rank (0, 1): N` per model-parallel rank,
    and the `… in billions: X` lines of the theoretical-memory report by their printed label."""

    per_model_parallel_rank: dict[tuple[tuple[str, int], ...], int] = field(default_factory=dict)
    billions: dict[str, float] = field(default_factory=dict)


def read_parameter_line(text: str, counts: ParameterCounts) -> bool:
    """Add what the line says to `counts`; True when it was a parameter-count line. Repeats overwrite,
    so a count printed at every memory report costs nothing."""
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
