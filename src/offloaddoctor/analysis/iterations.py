"""Megatron's per-iteration log line, parsed into named numbers.

` [ts] iteration       10/     100 | consumed samples: 320 | elapsed time per iteration (ms): 1234.5 | …`
Fields appear only when enabled, so every `name: value` pair is kept under its printed name.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from offloaddoctor.lazy_pattern import lazy_compile

_ITERATION = lazy_compile(r"\biteration\s+(\d+)\s*/\s*(\d+)\s*\|")
# One `| name: number ` field between bars (or up to the end); findall reads them all in one pass.
_FIELDS = lazy_compile(
    r"\|[^\S|]*([^:|]+?)[^\S|]*:[^\S|]*([-+]?(?:(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|nan|inf(?:inity)?))[^\S|]*(?=\||$)",
    re.IGNORECASE,
)
LITERAL = "elapsed time per iteration"
ELAPSED_MS = "elapsed time per iteration (ms)"
THROUGHPUT = "throughput per gpu (tflop/s/gpu)"
LEARNING_RATE = "learning rate"
GLOBAL_BATCH_SIZE = "global batch size"
LM_LOSS = "lm loss"
LOSS_SCALE = "loss scale"
GRAD_NORM = "grad norm"
SKIPPED_ITERATIONS = "number of skipped iterations"
NAN_ITERATIONS = "number of nan iterations"
WARMUP_ITERATIONS = 3


@dataclass(frozen=True)
class IterationRecord:
    path: str
    line: int
    rank: int | None
    segment: int
    iteration: int
    fields: dict[str, float]
    text: str


def parse_iteration_line(text: str) -> tuple[int, int, dict[str, float]] | None:
    """(iteration, planned iterations from `N/ TOTAL`, every `name: number` field by lower-cased name)."""
    found = _ITERATION.search(text)
    if not found:
        return None
    fields = {name.strip().lower(): float(value) for name, value in _FIELDS.findall(text, found.end() - 1)}
    return int(found.group(1)), int(found.group(2)), fields


_NUMBER = r"([-+]?(?:(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|nan|inf(?:inity)?))"
_SPEED = (
    (ELAPSED_MS, lazy_compile(r"\|\s*elapsed time per iteration \(ms\)\s*:\s*" + _NUMBER + r"\s*(?=\||$)", re.IGNORECASE)),
    (THROUGHPUT, lazy_compile(r"\|\s*throughput per gpu \(tflop/s/gpu\)\s*:\s*" + _NUMBER + r"\s*(?=\||$)", re.IGNORECASE)),
)


def parse_iteration_speed(text: str) -> tuple[int, dict[str, float]] | None:
    """Only what `diagnose` needs (iteration, elapsed ms, TFLOP/s/GPU): two searches instead of every field,
    because a long multi-rank log has an iteration line per log interval."""
    found = _ITERATION.search(text)
    if not found:
        return None
    fields = {}
    for name, pattern in _SPEED:
        value = pattern.search(text, found.end() - 1)
        if value:
            fields[name] = float(value.group(1))
    return int(found.group(1)), fields


def parse_iteration_fields(text: str) -> tuple[int, dict[str, float]] | None:
    parsed = parse_iteration_line(text)
    return None if parsed is None else (parsed[0], parsed[2])


TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: typing costs start-up time
    from typing import Protocol, TypeVar

    class _Logged(Protocol):
        @property
        def iteration(self) -> int: ...

    _Record = TypeVar("_Record", bound=_Logged)


def steady_state(records: Sequence[_Record]) -> list[_Record]:
    """Drop warm-up. Each line reports the average over the iterations since the previous line, so a
    line is kept only if that whole interval lies after the first WARMUP_ITERATIONS iterations (which
    carry compilation, allocator growth and data-loader start-up). The first line of a log never
    qualifies. A log that stops inside warm-up has no steady state: better no number than a wrong one."""
    kept = [
        record
        for previous, record in zip(records, records[1:])
        if previous.iteration >= WARMUP_ITERATIONS and record.iteration > previous.iteration
    ]
    return kept


def median_of(records: list[IterationRecord], field: str) -> tuple[float, IterationRecord] | None:
    """The median value and the record closest to it (to cite as evidence)."""
    with_field = [r for r in records if field in r.fields]
    if not with_field:
        return None
    import statistics  # costs start-up time; most runs never need it

    value = statistics.median(r.fields[field] for r in with_field)
    closest = min(with_field, key=lambda r: abs(r.fields[field] - value))
    return value, closest
