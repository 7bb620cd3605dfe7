"""Run-level facts from the iteration lines: steady-state speed, the slowdown between segments of one log
whose offload settings differ (a job restarted with offloading turned on), and iteration time that grows from
line to line (a leak or a stall: `iteration-time-growth`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from offloaddoctor.scanning.evidence import Evidence
from offloaddoctor.scanning.failure_lines import FROZEN_MODEL_FRAMES
from offloaddoctor.byte_units import MIB
from offloaddoctor.coerce import boolean

# Iteration time "grows step after step": past warm-up, at least this many lines, rising at this share of the
# steps between them (the sample keeps an even thinning, so a trend survives it), the last this many times the
# first. A line past warm-up may still average some warm-up in, which only makes the first figure larger.
GROWTH_MIN_LINES = 3
GROWTH_MIN_RISING_SHARE = 0.75
GROWTH_MIN_RATIO = 1.5
# ... and the later half of the lines is this much slower than the earlier half (median to median): one slow
# line at the end is no trend.
GROWTH_MIN_HALVES_RATIO = 1.2

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: `check` builds RunFacts without reading a log
    from offloaddoctor.scanning.scan_result import ScanResult
    from offloaddoctor.config.from_log import LogConfigCollector
    from offloaddoctor.metrics.iteration_lines import IterationMetrics


@dataclass
class RunFacts:
    values: dict = field(default_factory=dict)
    evidence: dict[str, list[Evidence]] = field(default_factory=dict)


def _cite(record: IterationMetrics) -> Evidence:
    return Evidence(record.path, record.line, record.rank, record.text)


def compute_run_facts(scan: ScanResult) -> RunFacts:
    from offloaddoctor.metrics.iteration_lines import median_of, steady_state  # here: `check` reads no log

    facts = RunFacts()
    if scan.script_rerun:  # a spawned child ran the training script again: what follows is its echo
        facts.values["script_rerun_in_child"] = True
        facts.evidence["script_rerun_in_child"] = scan.script_rerun[:1]
    started = [a for a in scan.aggregates if a.facts.get("raised_in_start_up") and a.evidence]
    if started:  # a rank ran out of memory while the job was set up: no shortage of the run's (scanning/oom.py)
        facts.values["oom_in_start_up"] = True
        facts.evidence["oom_in_start_up"] = started[0].evidence[-1:]
    for fact, _ in FROZEN_MODEL_FRAMES:  # the traceback ran adapter code, or a frozen weight's road
        if fact in scan.frozen_frames:
            facts.values[fact] = True
            facts.evidence[fact] = [scan.frozen_frames[fact]]
    segments = [(key, records) for key, records in scan.iterations.items() if records]
    if not segments:
        return facts
    facts.values["iterations_logged"] = sum(len(r) for _, r in segments)
    _last_key, last_records = segments[-1]
    steady = steady_state(last_records)
    for name, attribute in (("median_iteration_ms", "elapsed_ms"), ("median_tflops_per_gpu", "tflops_per_gpu")):
        found = median_of(steady, attribute)
        if found:
            facts.values[name] = round(found[0], 3)
            facts.evidence[name] = [_cite(found[1])]
    _slowdown_between_segments(scan, segments, facts)
    _growth(last_records, facts)
    return facts


def _growth(records: list[IterationMetrics], facts: RunFacts) -> None:
    from offloaddoctor.metrics.iteration_lines import WARMUP_ITERATIONS

    timed = [(r, r.elapsed_ms) for r in records if r.elapsed_ms is not None and r.iteration > WARMUP_ITERATIONS]
    if len(timed) < GROWTH_MIN_LINES:
        return
    (first, first_ms), (last, last_ms) = timed[0], timed[-1]
    if not first_ms or last.iteration <= first.iteration:
        return
    times = [ms for _, ms in timed]
    steps = len(times) - 1
    rising = sum(1 for before, after in zip(times, times[1:]) if after > before)
    ratio = last_ms / first_ms
    if ratio < GROWTH_MIN_RATIO or rising < GROWTH_MIN_RISING_SHARE * steps:
        return
    import statistics

    half = len(times) // 2
    if statistics.median(times[half:]) < GROWTH_MIN_HALVES_RATIO * statistics.median(times[:half]):
        return
    facts.values["iteration_time_growth_ratio"] = round(ratio, 3)
    facts.values["iteration_time_growth"] = (
        f"{first_ms:.1f} ms at iteration {first.iteration} → {last_ms:.1f} ms at iteration "
        f"{last.iteration}: {ratio:.2f}x over {last.iteration - first.iteration} iterations, rising at {rising} "
        f"of {steps} logged steps"
    )
    facts.evidence["iteration_time_growth_ratio"] = [_cite(first), _cite(last)]


def offload_on(collector: LogConfigCollector | None, segment: int) -> bool | None:
    """The optimizer offload setting a segment of a log printed; None when it printed none."""
    if collector is None:
        return None
    values = [v for v in collector.segment_values(segment) if v.key == "optimizer.optimizer_cpu_offload"]
    return boolean(values[-1].value) if values else None


def _slowdown_between_segments(scan: ScanResult, segments, facts: RunFacts) -> None:
    from offloaddoctor.metrics.iteration_lines import median_of, steady_state

    collectors: dict[str, LogConfigCollector] = {}
    for collector in scan.collectors:
        collectors.setdefault(collector.path, collector)  # the first, as a search from the start would find
    medians = []
    for (path, segment), records in segments:
        offload = offload_on(collectors.get(path), segment)
        if offload is None:
            continue  # neither side of a slowdown: the median is not needed (20,000 rank logs)
        found = median_of(steady_state(records), "elapsed_ms")
        if found:
            medians.append((path, segment, offload, *found))
    offloaded = [m for m in medians if m[2] is True]
    if not offloaded:
        return
    path, segment, _, slow, slow_record = offloaded[-1]
    earlier = [m for m in medians if m[2] is False and (m[0], m[1]) < (path, segment)]
    if not earlier or earlier[-1][3] <= 0:
        return
    base, base_record = earlier[-1][3], earlier[-1][4]
    facts.values["slowdown_ratio"] = round(slow / base, 3)
    facts.values["baseline_iteration_ms"] = round(base, 3)
    facts.evidence["slowdown_ratio"] = [_cite(base_record), _cite(slow_record)]


def apply_baseline(facts: RunFacts, baseline) -> None:
    """`diagnose --baseline`: the slowdown is this run's steady-state median over the baseline's, measured."""
    base_ms = baseline.median_iteration_ms
    if base_ms:
        facts.values["baseline_iteration_ms"] = round(base_ms, 3)
        run_ms = facts.values.get("median_iteration_ms")
        if run_ms:
            facts.values["slowdown_ratio"] = round(run_ms / base_ms, 3)
    if baseline.peak_allocated_mb is not None:
        facts.values["baseline_peak_allocated_bytes"] = int(baseline.peak_allocated_mb * MIB)
