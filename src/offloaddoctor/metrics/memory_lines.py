"""Memory lines: the per-rank memory report and the theoretical-memory estimate.

Formats seen in the sources:
- Megatron-LM, Bridge <= 0.2: `[Rank 0] (after 10 iterations) memory (MB) | allocated: 8269.31 | max allocated:
  10210.45 | reserved: 10742.00 | max reserved: 10742.00` (older releases print unrounded floats:
  `allocated: 8269.3134765625`). Values are bytes / 1024**2.
- Bridge >= 0.3: `[Rank 0] (after 10 iterations) memory (GB) | mem-allocated-gigabytes: 8.6712 | mem-active-gigabytes:
  … | mem-max-allocated-gigabytes: 14.47 | … | mem-alloc-retires: 0 | mem-allocated-count: 1234` (bytes / 1e9,
  five significant digits; names without "gigabytes" are counts; "retires" is their spelling).
- `Theoretical memory footprints: weight and optimizer=8038.20 MB, activation=2572.53 MB, total=10610.73 MB`
  (Megatron-LM and Bridge; the activation and total parts only with selective recompute and SP in Bridge).
"""

from __future__ import annotations

import re

from offloaddoctor.byte_units import MIB
from offloaddoctor.coerce import integer
from offloaddoctor.metrics.model import MemoryReport
from offloaddoctor.metrics.numbers import BRIDGE_REPORT_UNIT_BYTES, MEGATRON_UNIT_BYTES, parse_number, to_mib

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from offloaddoctor.metrics.iteration_lines import IterationMetrics

LITERAL = " memory ("
THEORETICAL_LITERAL = "Theoretical memory footprints"
# Only lines holding LITERAL reach this: the pattern requires the literal's spacing (" memory (") too, so that
# what it reads and what the gate lets through are the same lines (tests/test_literals_follow_regexes.py).
_REPORT = re.compile(r"\[Rank\s+(\d+)\]\s*(.*?)\s*(?<= )memory \(([A-Za-z]+)\)\s*\|(.*)$")
_AFTER = re.compile(r"after\s+(\d+)\s+iterations?")
_SIZE_SUFFIX = re.compile(r"[-_ ](gigabytes|megabytes|bytes)$")
_STANDARD = {
    "allocated": "allocated_mb",
    "max allocated": "max_allocated_mb",
    "reserved": "reserved_mb",
    "max reserved": "max_reserved_mb",
}
_SPELLING = {"alloc retires": "alloc retries"}
_THEORETICAL_PART = re.compile(r"([A-Za-z][A-Za-z0-9 _-]*?)\s*=\s*([-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)\s*([KMG]i?B)\b")


def parse_memory_report(text: str, path: str, line: int, rank: int | None, segment: int) -> MemoryReport | None:
    """`rank` is the launcher's prefix; the `[Rank N]` Megatron prints is the global rank and wins."""
    found = _REPORT.search(text)
    if not found:
        return None
    printed_rank, name, unit, body = found.groups()
    global_rank = integer(printed_rank)
    if global_rank is None:
        return None
    after = _AFTER.search(name)
    report = MemoryReport(path, line, global_rank, segment, integer(after.group(1)) if after else None, unit)
    bridge_style = unit.lower() in ("gb", "gib")
    for part in body.split("|"):
        metric, sep, raw = part.partition(":")
        value = parse_number(raw) if sep else None
        if value is None:
            continue
        _store(report, metric.strip().lower(), value, unit, bridge_style)
    if report.allocated_mb is None and report.max_allocated_mb is None and not report.extra:
        return None
    return report


def _store(report: MemoryReport, metric: str, value: float, header_unit: str, bridge_style: bool) -> None:
    if metric.startswith("mem-"):
        metric = metric[4:]
    suffix = _SIZE_SUFFIX.search(metric)
    if suffix:
        metric = metric[: suffix.start()]
    metric = _SPELLING.get(metric.replace("-", " ").replace("_", " "), metric.replace("-", " ").replace("_", " "))
    if suffix:
        size = to_mib(value, suffix.group(1), BRIDGE_REPORT_UNIT_BYTES)
    elif bridge_style:
        size = None  # Bridge converts only byte counts; anything else it prints is a count
    else:
        size = to_mib(value, header_unit, MEGATRON_UNIT_BYTES)
    if size is None:
        report.extra[metric.replace(" ", "_")] = value
    elif metric in _STANDARD:
        setattr(report, _STANDARD[metric], round(size, 3))
    else:
        report.extra[metric.replace(" ", "_") + "_mb"] = round(size, 3)


def parse_theoretical_memory(text: str) -> dict[str, float] | None:
    """`Theoretical memory footprints: weight and optimizer=8038.20 MB, …` -> {"weight_and_optimizer": 8038.2, …} MiB."""
    _, literal, rest = text.partition(THEORETICAL_LITERAL)
    if not literal:
        return None
    parts = {}
    for name, amount, unit in _THEORETICAL_PART.findall(rest):
        size = to_mib(float(amount), unit, MEGATRON_UNIT_BYTES)
        if size is not None:
            parts[re.sub(r"[\s-]+", "_", name.strip().lower())] = round(size, 3)
    return parts or None


def nemo_step_memory(record: IterationMetrics) -> MemoryReport | None:
    """The memory report a NeMo 2 step line holds (`max_memory_reserved: 57466159104 | max_memory_allocated:
    53930270720`, in bytes; held-out nemo2-qwen3-30b-a3b-…), in MB as Megatron prints them (MiB), or None."""
    allocated, reserved = (record.extra.get(name) for name in ("max_memory_allocated", "max_memory_reserved"))
    if allocated is None and reserved is None:
        return None
    report = MemoryReport(record.path, record.line, record.rank, record.segment, record.iteration, "B")
    report.max_allocated_mb = allocated / MIB if allocated is not None else None
    report.max_reserved_mb = reserved / MIB if reserved is not None else None
    return report
