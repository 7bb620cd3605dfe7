"""What a refusal's fix does to the run's memory: the memory model's peak per GPU with the fix's changes, against
the run as configured, and which GPUs that fits by `estimate`'s rule.

A start-up refusal's fix can move the peak a long way: TP 1 with the experts spread instead puts a MoE's dense
layers whole on each GPU (b69: 77,142 MiB, where its TP 2 layout was never measured), and turning recompute off
instead of activation offloading would have cost the activations (b42: 41,324 MiB, out of memory under a 32 GiB
card's budget). The user cannot see that in the lines; the figure says it before the relaunch. Recorded:
fixtures/memory-calibration b68-b72.
"""

from __future__ import annotations

from offloaddoctor.byte_units import MIB
from offloaddoctor.config.derived import with_derived_changes
from offloaddoctor.config.values import ConfigStore
from offloaddoctor.advice.fix_numbers import NO_PARAMETER_COUNT, OFFLOAD_FRACTION, memory_shape
from offloaddoctor.report import Finding

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: typing costs start-up time
    from collections.abc import Sequence

    from offloaddoctor.memory import MemoryEstimate

# A fix that raises the peak by less says nothing worth a sentence; one that lowers it is no risk to the relaunch.
_SMALLEST_RISE = 0.01


def weigh_fixes(findings: Sequence[Finding], store: ConfigStore) -> None:
    """Adds the figure to each error finding of a constraint whose printed changes raise the modelled peak; the OOM
    findings' fixes come from the memory model already. Nothing where the config does not give the model's keys."""
    before: MemoryEstimate | None = None
    for finding in findings:
        facts = finding.facts
        if facts.pop(NO_PARAMETER_COUNT, False):
            _say_the_fraction_is_not_sized(finding)
        if (
            finding.signature.severity != "error"
            or not finding.signature.preflight
            or not finding.changes
            or "requested_bytes" in facts
            or "estimated_peak_allocated_bytes" in facts
        ):
            continue
        before = before or _estimate(store)
        if before is None:
            return
        after = _estimate(store.with_changes(with_derived_changes(finding.changes, store), "the fix"))
        if after is None or after.peak_allocated_bytes < before.peak_allocated_bytes * (1 + _SMALLEST_RISE):
            continue
        fits, tight, short = _gpus_by_verdict(after)
        facts["fixed_peak_allocated_bytes"] = int(after.peak_allocated_bytes)
        facts["configured_peak_allocated_bytes"] = int(before.peak_allocated_bytes)
        facts["fixed_fits_gpus"] = fits
        finding.fix_memory = _sentence(before, after, fits, tight, short)


def _gpus_by_verdict(result: MemoryEstimate) -> tuple[list[str], list[str], list[str]]:
    """The known GPUs (memory/gpus.py) the estimate fits, is tight on and does not fit, smallest first."""
    from offloaddoctor.memory.fit import DOES_NOT_FIT, FITS, TIGHT, verdict
    from offloaddoctor.memory.gpus import GPUS

    grouped: dict[str, list[str]] = {FITS: [], TIGHT: [], DOES_NOT_FIT: []}
    for name, (mib, _) in sorted(GPUS.items(), key=lambda item: item[1][0]):
        grouped[verdict(result, mib * MIB).status].append(name)
    return grouped[FITS], grouped[TIGHT], grouped[DOES_NOT_FIT]


def _sentence(
    before: MemoryEstimate, after: MemoryEstimate, fits: list[str], tight: list[str], short: list[str]
) -> str:
    """`… by estimate's rule it fits an H200, B200 or GB200 and does not fit an A100-40GB, H100-80GB or A100-80GB.`"""
    groups = (("fits", fits), ("is tight on", tight), ("does not fit", short))
    verdicts = [f"{verb} {_either(names)}" for verb, names in groups if names]
    said = verdicts[0] if len(verdicts) == 1 else f"{', '.join(verdicts[:-1])} and {verdicts[-1]}"
    return (
        f"The memory model puts the run with this fix at {after.peak_allocated_bytes / MIB:,.0f} MiB per GPU at its "
        f"peak (up from {before.peak_allocated_bytes / MIB:,.0f} MiB as configured): by `estimate`'s rule it {said}."
    )


def _either(names: list[str]) -> str:
    """`an H200, B200 or GB200`."""
    text = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"
    return f"{'an' if names[0][0] in 'AH' else 'a'} {text}"


def _estimate(store: ConfigStore) -> MemoryEstimate | None:
    from offloaddoctor.memory import estimate

    shape = memory_shape(store)
    return None if shape is None else estimate(shape)


def _say_the_fraction_is_not_sized(finding: Finding) -> None:
    """An OOM whose log gives no parameter count, beside no config the memory model can read, keeps the signature's
    own offload fraction (0.5): a starting point, not a figure for the run. Said where the printed fix still has it
    (a run that is not Megatron's, or DeepSpeed's, has the line left out). A pasted traceback is the common case."""
    printed = next((value for key, value in finding.changes if key == OFFLOAD_FRACTION), None)
    if printed is None:
        return
    finding.fix_memory = (
        f"The fix's offload fraction, {printed:g}, is a starting point, not sized for this run: the log gives no "
        "parameter count (Megatron's `number of parameters on (tensor, pipeline) model parallel rank …` line) and "
        "no config the memory model can read. With the whole log, or --config, diagnose sizes it."
    )
