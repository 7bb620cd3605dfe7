"""Megatron's per-iteration line as an IterationMetrics record.

The fields are read by analysis/iterations.py (the same parser diagnose uses); here they get names.
Megatron-LM, Megatron-Bridge and their older releases all print `name: value |` pairs behind
`iteration N/ M |`; only which pairs appear, and the precision, differ between versions.
"""

from __future__ import annotations

from offloaddoctor.analysis import iterations as printed
from offloaddoctor.metrics.model import IterationMetrics
from offloaddoctor.metrics.numbers import as_count

# Record attribute -> printed names, newest first. "tflops" is Megatron-DeepSpeed's `TFLOPs: 123.45`.
_NAMED = {
    "elapsed_ms": (printed.ELAPSED_MS,),
    "tflops_per_gpu": (printed.THROUGHPUT, "tflops"),
    "learning_rate": (printed.LEARNING_RATE,),
    "lm_loss": (printed.LM_LOSS,),
    "loss_scale": (printed.LOSS_SCALE,),
    "grad_norm": (printed.GRAD_NORM,),
}
_COUNTS = {
    "global_batch_size": printed.GLOBAL_BATCH_SIZE,
    "skipped_iterations": printed.SKIPPED_ITERATIONS,
    "nan_iterations": printed.NAN_ITERATIONS,
}


def parse_iteration_metrics(text: str, path: str, line: int, rank: int | None, segment: int) -> IterationMetrics | None:
    parsed = printed.parse_iteration_line(text)
    if parsed is None:
        return None
    iteration, train_iters, fields = parsed
    record = IterationMetrics(path, line, rank, segment, iteration, train_iters=train_iters or None)
    for attribute, names in _NAMED.items():
        for name in names:
            if name in fields:
                setattr(record, attribute, fields.pop(name))
                break
    for attribute, name in _COUNTS.items():
        if name in fields:
            setattr(record, attribute, as_count(fields.pop(name)))
    record.extra = fields
    return record
