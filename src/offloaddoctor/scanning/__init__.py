"""Reading a run's logs into a scan: the scanner's handler set over the shared line pass (alone or in
worker processes), what its lines carry (evidence and aggregates, OOM figures, failure lines, ranks, byte
quantities) and the run facts from its iteration sample. Imports no report and no advice."""

from __future__ import annotations

from offloaddoctor.lazy_exports import lazy_exports

TYPE_CHECKING = False
if TYPE_CHECKING:  # for type checkers; at run time each name loads its module on first use
    from offloaddoctor.scanning.evidence import Aggregate, Evidence, keep_evidence
    from offloaddoctor.scanning.fact_parsers import FACT_PARSERS
    from offloaddoctor.scanning.failure_lines import RAY_TASK_ERROR, raising_statement, says_only_that_a_rank_failed
    from offloaddoctor.scanning.oom import (
        BEFORE_THE_FIRST_STEP,
        fragmentation_verdict,
        larger_than_the_gpu,
        lead_with_expandable_segments,
        offloading_on_an_older_torch,
        one_allocation_over_half_the_gpu,
        one_allocation_over_the_gpu,
        other_processes_first,
        optimizer_state_over_the_gpu,
        parameters_over_the_gpu,
        shortfall_bytes,
    )
    from offloaddoctor.scanning.parallel import scan_sources
    from offloaddoctor.scanning.ranks import format_ranks
    from offloaddoctor.scanning.run_facts import RunFacts, apply_baseline, compute_run_facts
    from offloaddoctor.scanning.scan_result import ScanResult
    from offloaddoctor.scanning.scanner import (
        CHECKPOINT_SAVED,
        TRAINING_DONE,
        WRAPPER_EXCEPTIONS,
        Matcher,
        Scanner,
        ParameterLines,
        build_matchers,
    )
    from offloaddoctor.scanning.units import format_bytes

# What the layers above use, and the module that defines each: imported on first use, for start-up time.
_HOMES = {
    "Aggregate": "evidence",
    "Evidence": "evidence",
    "keep_evidence": "evidence",
    "FACT_PARSERS": "fact_parsers",
    "RAY_TASK_ERROR": "failure_lines",
    "says_only_that_a_rank_failed": "failure_lines",
    "raising_statement": "failure_lines",
    "BEFORE_THE_FIRST_STEP": "oom",
    "fragmentation_verdict": "oom",
    "larger_than_the_gpu": "oom",
    "lead_with_expandable_segments": "oom",
    "offloading_on_an_older_torch": "oom",
    "one_allocation_over_half_the_gpu": "oom",
    "one_allocation_over_the_gpu": "oom",
    "other_processes_first": "oom",
    "optimizer_state_over_the_gpu": "oom",
    "parameters_over_the_gpu": "oom",
    "shortfall_bytes": "oom",
    "scan_sources": "parallel",
    "format_ranks": "ranks",
    "RunFacts": "run_facts",
    "apply_baseline": "run_facts",
    "compute_run_facts": "run_facts",
    "ScanResult": "scan_result",
    "CHECKPOINT_SAVED": "scanner",
    "TRAINING_DONE": "scanner",
    "WRAPPER_EXCEPTIONS": "scanner",
    "Matcher": "scanner",
    "Scanner": "scanner",
    "build_matchers": "scanner",
    "ParameterLines": "scanner",
    "format_bytes": "units",
}

__all__ = [
    "BEFORE_THE_FIRST_STEP",
    "CHECKPOINT_SAVED",
    "FACT_PARSERS",
    "RAY_TASK_ERROR",
    "TRAINING_DONE",
    "WRAPPER_EXCEPTIONS",
    "Aggregate",
    "Evidence",
    "Matcher",
    "ParameterLines",
    "RunFacts",
    "ScanResult",
    "Scanner",
    "apply_baseline",
    "build_matchers",
    "compute_run_facts",
    "format_bytes",
    "format_ranks",
    "fragmentation_verdict",
    "keep_evidence",
    "larger_than_the_gpu",
    "lead_with_expandable_segments",
    "offloading_on_an_older_torch",
    "one_allocation_over_half_the_gpu",
    "one_allocation_over_the_gpu",
    "optimizer_state_over_the_gpu",
    "other_processes_first",
    "parameters_over_the_gpu",
    "raising_statement",
    "says_only_that_a_rank_failed",
    "scan_sources",
    "shortfall_bytes",
]


__getattr__ = lazy_exports(__name__, _HOMES, globals())
