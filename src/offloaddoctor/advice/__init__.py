"""Numbers on top of a report: what an OOM's fix frees and costs (fix_numbers), the memory model's changes
that make a run fit, screened by `check`'s preflight constraints (changes), the measured slowdown curves, and
`estimate`'s report."""

from __future__ import annotations

from offloaddoctor.lazy_exports import lazy_exports

TYPE_CHECKING = False
if TYPE_CHECKING:  # for type checkers; at run time each name loads its module on first use
    from offloaddoctor.advice.changes import manual_gc_change, refusals
    from offloaddoctor.advice.estimate_report import (
        Capacity,
        EstimateReport,
        attach_memory,
        build_estimate,
        memory_summary,
        mib,
    )
    from offloaddoctor.advice.fix_memory import weigh_fixes
    from offloaddoctor.advice.fix_numbers import add_advice, weigh_whole_step

# What the layers above use, and the module that defines each: imported on first use, for start-up time.
_HOMES = {
    "manual_gc_change": "changes",
    "refusals": "changes",
    "Capacity": "estimate_report",
    "EstimateReport": "estimate_report",
    "attach_memory": "estimate_report",
    "build_estimate": "estimate_report",
    "memory_summary": "estimate_report",
    "mib": "estimate_report",
    "add_advice": "fix_numbers",
    "weigh_whole_step": "fix_numbers",
    "weigh_fixes": "fix_memory",
}

__all__ = [
    "Capacity",
    "EstimateReport",
    "add_advice",
    "attach_memory",
    "build_estimate",
    "manual_gc_change",
    "memory_summary",
    "mib",
    "refusals",
    "weigh_fixes",
    "weigh_whole_step",
]


__getattr__ = lazy_exports(__name__, _HOMES, globals())
