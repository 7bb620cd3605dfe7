"""Megatron's per-iteration log line, parsed into the one record every reader uses (IterationMetrics).

` [ts] iteration       10/     100 | consumed samples: 320 | elapsed time per iteration (ms): 1234.5 | …`
Megatron-LM, Megatron-Bridge and their older releases all print `name: value |` pairs behind
`iteration N/ M |`; only which pairs appear, and the precision, differ between versions. Fields appear only
when enabled, so every pair is kept: the known ones as attributes, the rest in `extra` by printed name.
Also here: which lines are warm-up (`steady_state`), shared by `diagnose` and `metrics`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from offloaddoctor.coerce import DIGITS_MAX
from offloaddoctor.lazy_pattern import lazy_compile
from offloaddoctor.metrics.numbers import as_count

_ITERATION = lazy_compile(r"\biteration\s+(\d+)\s*/\s*(\d+)\s*\|")
# One `| name: number ` field between bars (or up to the end); findall reads them all in one pass.
_FIELDS = lazy_compile(
    r"\|[^\S|]*([^:|]+?)[^\S|]*:[^\S|]*([-+]?(?:(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|nan|inf(?:inity)?))[^\S|]*(?=\||$)",
    re.IGNORECASE,
)
LITERAL = "elapsed time per iteration"
# NeMo 2's step line (its MegatronStrategy's progress, Lightning's epoch first): `Training epoch 0, iteration 8/29 | lr:
# … | global_batch_size: 512 | … | reduced_train_loss: 10.22 | train_step_timing in s: 27.01 | … | TFLOPS_per_GPU: 48.58`
# (held-out nemo2-qwen3-30b-a3b-perf-script-healthy-slow). One a step, not one a log interval: each is read, not sampled.
NEMO_LITERAL = "Training epoch "
NEMO_STEP_SECONDS = "train_step_timing in s"
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

# Record attribute -> printed names, newest first. "tflops" is Megatron-DeepSpeed's `TFLOPs: 123.45`.
_NAMED = {
    "elapsed_ms": (ELAPSED_MS,),
    "tflops_per_gpu": (THROUGHPUT, "tflops", "tflops_per_gpu"),
    "learning_rate": (LEARNING_RATE, "lr"),
    "lm_loss": (LM_LOSS, "reduced_train_loss"),
    "loss_scale": (LOSS_SCALE,),
    "grad_norm": (GRAD_NORM,),
}
_COUNTS = {
    "global_batch_size": (GLOBAL_BATCH_SIZE, "global_batch_size"),
    "skipped_iterations": (SKIPPED_ITERATIONS,),
    "nan_iterations": (NAN_ITERATIONS,),
}


@dataclass(slots=True)
class IterationMetrics:
    """One `iteration N/ M | …` line. Every value is the average over the iterations since the previous
    line (Megatron resets its counters at each log), except `learning_rate` and `loss_scale` (current)."""

    path: str
    line: int
    rank: int | None
    segment: int
    iteration: int
    train_iters: int | None = None
    elapsed_ms: float | None = None
    tflops_per_gpu: float | None = None
    learning_rate: float | None = None
    global_batch_size: int | None = None
    lm_loss: float | None = None
    loss_scale: float | None = None
    grad_norm: float | None = None
    skipped_iterations: int | None = None
    nan_iterations: int | None = None
    extra: dict[str, float] = field(default_factory=dict)  # every other printed field, by printed name
    steady_state: bool = False  # set by the summary: see metrics/summary.py
    # The line as printed, kept only where it is cited as evidence (diagnose's sample), not in metrics output.
    text: str = field(default="", repr=False)


def parse_iteration_line(text: str) -> tuple[int, int, dict[str, float]] | None:
    """(iteration, planned iterations from `N/ TOTAL`, every `name: number` field by lower-cased name)."""
    found = iteration_found(text)
    if not found:
        return None
    fields = {name.strip().lower(): float(value) for name, value in _FIELDS.findall(text, found.end() - 1)}
    return int(found.group(1)), int(found.group(2)), fields


def parse_iteration_metrics(
    text: str, path: str, line: int, rank: int | None, segment: int, keep_text: bool = False
) -> IterationMetrics | None:
    """`keep_text`: keep the line itself on the record, to cite it as evidence (diagnose's sample)."""
    parsed = parse_iteration_line(text)
    if parsed is None:
        return None
    iteration, train_iters, fields = parsed
    record = IterationMetrics(path, line, rank, segment, iteration, train_iters=train_iters or None)
    for attribute, names in _NAMED.items():
        for name in names:
            if name in fields:
                setattr(record, attribute, fields.pop(name))
                break
    if record.elapsed_ms is None and NEMO_STEP_SECONDS in fields:
        record.elapsed_ms = fields.pop(NEMO_STEP_SECONDS) * 1000
    for attribute, names in _COUNTS.items():
        for name in names:
            if name in fields:
                setattr(record, attribute, as_count(fields.pop(name)))
                break
    record.extra = fields
    if keep_text:
        record.text = text.strip()
    return record


_NUMBER = r"([-+]?(?:(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|nan|inf(?:inity)?))"


def _speed_fields(*fields: tuple[str, float, str]) -> tuple:
    return tuple(
        (attribute, scale, lazy_compile(rf"\|\s*{re.escape(name)}\s*:\s*{_NUMBER}\s*(?=\||$)", re.IGNORECASE))
        for attribute, scale, name in fields
    )


# The fields `diagnose` reads, each found by its printed name (as _NAMED spells it), Megatron's and NeMo 2's; the loss
# scale says an fp16 run (api.py _fp16_from_loss_scale).
_SPEED = _speed_fields(
    ("elapsed_ms", 1.0, ELAPSED_MS), ("tflops_per_gpu", 1.0, THROUGHPUT), ("loss_scale", 1.0, LOSS_SCALE)
)
_NEMO_SPEED = _speed_fields(("elapsed_ms", 1000.0, NEMO_STEP_SECONDS), ("tflops_per_gpu", 1.0, "tflops_per_gpu"))


def iteration_found(text: str) -> re.Match[str] | None:
    """The `iteration N/ M |` of a line: all that says whether the line is a record, and which iteration
    (`int(found.group(1))`). speed_record(found, …) finishes the record `diagnose` reads. A line whose
    numbers are longer than any count (coerce.DIGITS_MAX) is not a record: int() would refuse them."""
    found = _ITERATION.search(text)
    if found is None:
        return None
    iteration, total = found.group(1, 2)
    # Digits only (`\d+`): coerce.integer's test comes down to their length and ASCII (`\d` takes any script's).
    if len(iteration) > DIGITS_MAX or len(total) > DIGITS_MAX or not (iteration.isascii() and total.isascii()):
        return None
    return found


def speed_record(found: re.Match[str], path: str, line: int, rank: int | None, segment: int) -> IterationMetrics:
    """The record with only what `diagnose` reads (iteration, elapsed ms, TFLOP/s/GPU, loss scale) and the line
    itself: three searches instead of every field, for 20,000 rank logs of iteration lines."""
    text = found.string
    record = IterationMetrics(path, line, rank, segment, int(found.group(1)), train_iters=int(found.group(2)) or None)
    for attribute, scale, pattern in _NEMO_SPEED if NEMO_LITERAL in text else _SPEED:
        value = pattern.search(text, found.end() - 1)
        if value:
            setattr(record, attribute, float(value.group(1)) * scale)
    record.text = text.strip()
    return record


def steady_state(records: Sequence[IterationMetrics]) -> list[IterationMetrics]:
    """Drop warm-up. Each line reports the average over the iterations since the previous line, so a
    line is kept only if that whole interval lies after the first WARMUP_ITERATIONS iterations (which
    carry compilation, allocator growth and data-loader start-up). The first line of a log never
    qualifies. A log that stops inside warm-up has no steady state: better no number than a wrong one."""
    return [
        record for previous, record in zip(records, records[1:]) if _after_warm_up(previous.iteration, record.iteration)
    ]


def has_steady_state(iterations: Sequence[int]) -> bool:
    """Whether records of these iteration numbers, in this order, would leave steady_state anything.
    (A plain loop, not a generator: asked once for each of 20,000 rank logs.)"""
    for index in range(1, len(iterations)):  # noqa: SIM110 (a generator in any() costs more than the loop)
        if _after_warm_up(iterations[index - 1], iterations[index]):
            return True
    return False


def _after_warm_up(previous: int, current: int) -> bool:
    return previous >= WARMUP_ITERATIONS and current > previous


def median_of(records: list[IterationMetrics], attribute: str) -> tuple[float, IterationMetrics] | None:
    """The median value of `attribute` and the record closest to it (to cite as evidence)."""
    with_value = [r for r in records if getattr(r, attribute) is not None]
    if not with_value:
        return None
    import statistics  # costs start-up time; most runs never need it

    value = statistics.median(getattr(r, attribute) for r in with_value)
    closest = min(with_value, key=lambda r: abs(getattr(r, attribute) - value))
    return value, closest
