"""Numbers for the fix: how much optimizer offloading would free, and what it costs in time.

All of it is an estimate and says so (`estimate_basis`). When the run's config (its arguments block, or
--config) gives the memory model what it needs, the offloadable optimizer state per GPU is the model's bytes per
parameter (precision, sharding) times the parameters the log printed, the shortfall is the whole step's (the
model's peak against the GPU), and the fix leads with the model's cheapest change that fits. Otherwise it is
the memory model's default, 12 bytes per parameter (fp32 master weight + Adam exp_avg + exp_avg_sq), divided by the data-parallel size
when the distributed optimizer shards it; the bundled real H100 runs (fixtures/compare-family) save exactly
that (5384 MiB for 0.47B parameters at fraction 1.0). Slowdown is interpolated between two measured
curves: a 0.47B GPT on one H100 (fixtures/compare-family) and Qwen3-30B-A3B from the offloading guide.
"""

from __future__ import annotations

import math
import shlex

from offloaddoctor.report import CONFIRMED, Finding, model_printed_by_log
from offloaddoctor.byte_units import GIB, MIB
from offloaddoctor.coerce import boolean, number
from offloaddoctor.config import derived
from offloaddoctor.config.values import ConfigStore
from offloaddoctor.advice.slowdown import expected_slowdown
from offloaddoctor.metrics.parameter_lines import TOTAL_LABEL, ParameterCounts, trainable_share
from offloaddoctor.scanning import BEFORE_THE_FIRST_STEP, larger_than_the_gpu, shortfall_bytes

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: typing costs start-up time
    from typing import Any

    from offloaddoctor.catalog.model import Catalog
    from offloaddoctor.memory import MemoryEstimate, RunShape

CHEAPEST_OVERRIDES = "_cheapest_change_overrides"  # carried from oom_advice to the fix, never shown
HELPS_MOST_OVERRIDES = "_helps_most_overrides"  # likewise, where no single change fits
NEEDED_FRACTION = "_offload_fraction_needed"  # the number behind the fact's sentence, carried to the fix likewise
TIGHT_AT_ONE = "_peak_tight_at_fraction_1"  # the model's peak all offloaded, where that is TIGHT, likewise
SIZED_BY_ONE_REQUEST = "_fraction_from_the_request"  # the fraction came from the message's figures alone, likewise
NO_PARAMETER_COUNT = "_no_parameter_count"  # nothing sizes the fraction: carried to fix_memory.weigh_fixes, likewise
FROZEN = "trained_parameters"
OFFLOAD_FRACTION = "optimizer.optimizer_offload_fraction"


def add_advice(
    findings: list[Finding], store: ConfigStore, parameters: ParameterCounts, catalog: Catalog | None = None
) -> None:
    """`catalog`: its preflight constraints screen the memory model's suggested changes, as in `estimate`."""
    for finding in findings:
        if "requested_bytes" in finding.facts:  # fragmentation too: its capacity fixes follow expandable segments
            finding.facts.update(oom_advice(finding.facts, store, parameters, catalog))
            _use_needed_fraction(finding, store)
            _use_cheapest_change(finding)
            _doubt_the_verdict(finding, store)
        elif "allocator_figures" in finding.facts:  # an OOM without the allocator's figures (NCCL's, cuBLAS's)
            _unsized_oom_advice(finding, store)
        elif finding.id == "optimizer-offload-slowdown":
            finding.facts.update(slowdown_advice(store))
            _check_the_lower_fraction(finding, store)
        elif finding.id == "optimizer-offload-host-memory":
            finding.facts.update(host_memory_advice(store))


def _doubt_the_verdict(finding: Finding, store: ConfigStore) -> None:
    """A config that agrees with the cause but whose memory model is far from the message's figures is
    probably another run's: the verdict says so instead of a plain CONFIRMED. Not where the log printed the
    model and the config agrees with it (or is that printout): then more is on the GPU than it explains."""
    allocated, peak = finding.facts.get("allocated_bytes"), finding.facts.get("estimated_peak_allocated_bytes")
    if "estimate_vs_allocated" not in finding.facts or finding.config.verdict != CONFIRMED or not peak:
        return
    why = (
        "more is on the GPU than the config explains"
        if model_printed_by_log(store)
        else "the config is probably from another run"
    )
    finding.config.explanation = (
        f"{finding.config.explanation}; but the memory model disagrees with the message's figures "
        f"({allocated / peak:.1f}x its peak allocated): {why}"
    )


def _use_cheapest_change(finding: Finding) -> None:
    """When the memory model found a change that makes the whole step fit, the fix leads with it; when no single
    change does, with the one that frees the most, saying that it is not enough."""
    helps = finding.facts.pop(HELPS_MOST_OVERRIDES, None)
    overrides = finding.facts.pop(CHEAPEST_OVERRIDES, None)
    # a model-build OOM's fix spreads the parameters (scanning/oom.py parameters_over_the_gpu): what acts after the
    # build, which is what frees the most in training, cannot help it
    if helps and not overrides and "raised_while_building_the_model" not in finding.facts:
        short = finding.facts.get("whole_step_shortfall_bytes") or finding.facts.get(
            "whole_step_shortfall_at_most_bytes"
        )
        finding.overrides = list(helps)
        finding.fix_note_replaces_summary = True
        finding.fix_note = (
            "No single change the memory model tries makes the whole step fit this GPU"
            + (f" (it is {short / GIB:,.2f} GiB short)" if short else "")
            + f"; the one that frees the most: {finding.facts.get('change_that_helps_most', '')}. Shorten what "
            "sizes the activations (sequence length, micro-batch) or spread the model over more GPUs as well; "
            "`offloaddoctor estimate` lists the others."
        )
        return
    if overrides:
        finding.overrides = overrides
        finding.fix_note_replaces_summary = True  # the signature's summary describes another change
        finding.fix_note = (
            "The memory model's cheapest single change that makes the whole step fit this GPU: "
            f"{finding.facts.get('cheapest_change_that_fits', '')}. `offloaddoctor estimate` lists the others."
        )


def _use_needed_fraction(finding: Finding, store: ConfigStore) -> None:
    """The fix's fraction line: the estimated fraction when there is one. When even fraction 1 is short,
    the fix leads with what frees more (pipeline parallelism, recompute), and says why."""
    needed = finding.facts.pop(NEEDED_FRACTION, None)
    tight_peak = finding.facts.pop(TIGHT_AT_ONE, None)
    by_one_request = finding.facts.pop(SIZED_BY_ONE_REQUEST, False)
    if needed is None:
        return
    if by_one_request and not finding.fix_note:
        finding.fix_note = (
            f"The offload fraction below, {min(needed, 1.0):g}, is the least that frees the missing bytes of the "
            "request that failed, from the message's figures alone: the whole step may need more (on a recorded H100 "
            "run the 0.85 its figures gave ran out of memory a step later, where 1.0 trained). With the run's config "
            "(--config, or a log with its arguments block) the memory model sizes the whole step."
        )
    value = min(needed, 1.0)
    prefix = f"{OFFLOAD_FRACTION}="
    finding.overrides = [f"{prefix}{value:g}" if line.startswith(prefix) else line for line in finding.overrides]
    if needed <= 1.0:
        return
    # Twice the pipeline stages on the same GPUs halves data parallelism: not where the GPUs cannot hold them
    # (one GPU; report/fixes.py would leave the line out, and the note below must not advise it).
    first = [f"{PIPELINE}={_doubled_pipeline(store)}"] if _gpus_hold_doubled_pipeline(store) else []
    # Recompute and activation offloading exclude each other.
    if boolean(store.value("model.cpu_offloading")) is not True:
        first.append("model.recompute_granularity=selective")
    more = " or ".join(
        what
        for what, line in (("raise pipeline parallelism", "model.pipeline"), ("add recompute", "model.recompute"))
        if any(item.startswith(line) for item in first)
    )
    given = {line.split("=", 1)[0]: line for line in finding.overrides}
    leading = [given.get(line.split("=", 1)[0], line) for line in first]
    frozen = FROZEN in finding.facts
    rest = [line for line in finding.overrides if line not in leading and not (frozen and _optimizer_line(line))]
    finding.overrides = leading + rest
    finding.fix_note_replaces_summary = True  # "raise the fraction by a step" is what the numbers rule out
    finding.fix_note = (
        (
            "Most of the model is frozen, so the optimizer's state is small: sharding or offloading it cannot free "
            f"enough (offloading would need a fraction of {needed:.2f})"
        )
        if frozen
        else (
            "The numbers say optimizer offloading alone is TIGHT even at its most (at fraction 1.0 the memory model's "
            f"peak, {tight_peak / MIB:,.0f} MiB, is within the limit but not its margins)"
        )
        if tight_peak is not None
        else f"The numbers say optimizer offloading alone cannot free enough (it would need a fraction of {needed:.2f})"
    ) + (f": {more} first." if more else ".")


_OPTIMIZER_SETTINGS = ("optimizer.", "ddp.use_distributed_optimizer")


def _optimizer_line(line: str) -> bool:
    return line.startswith(_OPTIMIZER_SETTINGS)


PIPELINE = "model.pipeline_model_parallel_size"


def _doubled_pipeline(store: ConfigStore) -> int:
    stages = number(store.value(PIPELINE))
    return int(stages if stages and math.isfinite(stages) else 1) * 2


def _gpus_hold_doubled_pipeline(store: ConfigStore) -> bool:
    return derived.gpus_hold(store, {PIPELINE: _doubled_pipeline(store)})


def parameters_per_gpu(parameters: ParameterCounts) -> int | None:
    if parameters.per_model_parallel_rank:
        return max(parameters.per_model_parallel_rank.values())
    total = parameters.billions.get(TOTAL_LABEL)
    return int(total * 1e9) if total else None


def oom_advice(
    facts: dict[str, Any], store: ConfigStore, parameters: ParameterCounts, catalog: Catalog | None = None
) -> dict[str, Any]:
    requested, free = facts.get("requested_bytes"), facts.get("free_bytes")
    if requested is None:
        return {}
    count = parameters_per_gpu(parameters)
    shape = memory_shape(store)
    result = _estimate(shape) if shape else None
    counted_by = "the log's count"
    if not count and result is not None:  # a pasted traceback beside its config: the model counts them
        count, counted_by = result.most_loaded.parameters.total, "the memory model's count for the config"
    if not count:
        return {NO_PARAMETER_COUNT: True}
    if free is None:
        return {}
    from offloaddoctor.memory import DEFAULT_MOMENT_BYTES_PER_PARAMETER, optimizer_state_bytes_per_parameter

    bytes_per_parameter = optimizer_state_bytes_per_parameter()  # the config is not known yet; the model may refine
    distributed = boolean(store.value("optimizer.use_distributed_optimizer"))
    dp = number(store.value("data_parallel_size")) if distributed is not False else 1
    share = trainable_share(parameters)
    trained = count if share is None else round(count * share)
    state = trained * bytes_per_parameter / (dp or 1)
    model = memory_model_facts(result, count, counted_by) if result else {}
    if model:
        state = model.pop("optimizer_state_bytes")
    offloading = boolean(store.value("optimizer.optimizer_cpu_offload")) is True
    current = (number(store.value(OFFLOAD_FRACTION)) or 0.0) if offloading else 0.0
    shortfall = max(0, shortfall_bytes(facts))  # within a per-process limit where the message prints one (e77)
    allocated = facts.get("allocated_bytes")
    if model and isinstance(allocated, (int, float)) and allocated > 1.5 * model["estimated_peak_allocated_bytes"]:
        model["estimate_vs_allocated"] = (
            f"PyTorch had {allocated / GIB:.2f} GiB allocated, {allocated / model['estimated_peak_allocated_bytes']:.1f}x "
            "the memory model's peak for this config: more is on the GPU than the config explains ("
            + ("" if model_printed_by_log(store) else "a config from another run, ")
            + "tensors kept across steps, or a bigger batch than configured)"
        )
    fit = _fit_verdict(result, facts) if result else None
    tight_peak = None  # the model's peak at fraction 1.0 where that is TIGHT and no fraction fits
    if fit is not None:
        model["fit_verdict"] = fit.sentence()
    whole_run = max(0.0, fit.needed_bytes - fit.limit_bytes) if fit is not None else 0.0
    needed = current + max(shortfall, whole_run) / state
    first_step = not model and BEFORE_THE_FIRST_STEP in facts
    if first_step:
        needed = _needed_before_the_first_step(state, current, shortfall, bytes_per_parameter)
    if whole_run > shortfall:
        # The request that failed is only the first one that did not fit: the model sees the whole step.
        from offloaddoctor.memory.fit import TIGHT

        # TIGHT: only the worst case is short (the best case fits), so the figure is an upper bound.
        tight = fit is not None and fit.status == TIGHT
        model["whole_step_shortfall_at_most_bytes" if tight else "whole_step_shortfall_bytes"] = int(whole_run)
        # A fragmentation finding's fix leads with expandable segments; the changes that follow are for an OOM that
        # stays with them, so they get no credit for the setting (e31 -> e33 ran with it; e69, the change, ran).
        credit = facts.get("fragmentation_suspected") is not True
        change = _modelled_change(shape, result, fit, store, catalog, credit)
        if change is not None:
            sentence, lines, fitting = change
            if fitting:
                model["cheapest_change_that_fits"], model[CHEAPEST_OVERRIDES] = sentence, lines
            else:
                model["change_that_helps_most"], model[HELPS_MOST_OVERRIDES] = sentence, lines
        # Offloading frees more than the state it moves (its optimizer takes no step temporary), and a first
        # optimizer build Python has not collected holds more than the state says: the model's fraction for the
        # run as it collects (g1-f010 ran out of memory at 0.1, g1-f020 ran), and the one `estimate` advises
        # with manual garbage collection (g1-f010-gc ran at 0.1; e46 asked 0.55 from its state, e49 ran at 0.15).
        collects = bool(shape and shape.manual_gc)
        as_configured = _modelled_fraction(shape, fit, manual_gc=collects)
        if as_configured is not None:
            needed = as_configured
        elif shape is not None and fit is not None:
            from offloaddoctor.advice.changes import peak_when_tight_all_offloaded
            from offloaddoctor.memory.fit import budget_for

            budget = budget_for(fit.limit_bytes, shape.world_size > 1)
            tight_peak = peak_when_tight_all_offloaded(shape, budget, collects)
        with_gc = as_configured if collects else _modelled_fraction(shape, fit, manual_gc=True)
        if with_gc is not None and with_gc != as_configured:
            model["offload_fraction_needed_with_manual_gc"] = with_gc
    advice: dict[str, Any] = {
        "optimizer_state_estimate_bytes": int(state),
        "shortfall_bytes": int(shortfall),
        "estimate_basis": (
            (
                model.pop("basis")
                if model
                else f"{bytes_per_parameter} B/parameter × {trained:,} "
                + ("parameters per GPU" if share is None else f"trained parameters per GPU (of {count:,})")
                + (f" ÷ data-parallel size {int(dp)}" if dp and dp > 1 else "")
                + ("" if dp or distributed is False else " (data-parallel size unknown: not divided)")
            )
            + (f"; offload fraction now {current:g}" if offloading else "; optimizer offloading now off")
        ),
        **model,
    }
    if share is not None:
        advice[FROZEN] = (
            f"{parameters.gradient_bucket_elements:,} parameters in the gradient buckets, {share:.2%} of the model's: "
            "the rest are frozen (no gradient, no optimizer state)"
        )
    if larger_than_the_gpu(facts):
        # No offloading or recompute makes one allocation larger than the GPU fit, so neither is quoted; a change
        # that shrinks the tensor (micro-batch) is kept.
        for said, carried in (
            ("cheapest_change_that_fits", CHEAPEST_OVERRIDES),
            ("change_that_helps_most", HELPS_MOST_OVERRIDES),
        ):
            if any("offload" in line or "recompute" in line for line in advice.get(carried, ())):
                del advice[said], advice[carried]
        advice.pop("offload_fraction_needed_with_manual_gc", None)
        return advice
    undivided = not dp and distributed is not False  # the data-parallel size the state is sharded over is not known
    if not model and undivided and isinstance(allocated, (int, float)) and state > allocated:
        # held-out megatron-deepspeed-v100-pp2-oom-backward-fragmentation: 42.54 GiB "per GPU" on a 31.73 GiB V100
        advice["optimizer_state_estimate_note"] = (
            f"more than PyTorch had allocated ({allocated / GIB:.2f} GiB), so not what this GPU holds: the state is "
            "sharded (the distributed optimizer, or DeepSpeed's ZeRO) over a data-parallel size this log does not "
            "give, and no offload fraction is sized from it"
        )
        return advice
    fraction = needed_fraction(needed)
    advice[NEEDED_FRACTION] = fraction
    advice["offload_fraction_needed"] = _needed_fraction_fact(fraction, store, shape, tight_peak)
    if tight_peak is not None and fraction > 1.0:
        advice[TIGHT_AT_ONE] = tight_peak
    if not model and fraction <= 1.0:
        # From the message's figures alone the fraction frees one request's missing bytes, the first of the step's
        # not to fit: b83's figures gave 0.85, which ran out of memory a step later (b86); 1.0 trained (b88).
        advice[SIZED_BY_ONE_REQUEST] = True
        moments = (
            f"if this was the first step, it leaves room for Adam's moments ({DEFAULT_MOMENT_BYTES_PER_PARAMETER} "
            f"of the {bytes_per_parameter} B/parameter) as well; "
            if first_step
            else "it frees this request's missing bytes; "
        )
        advice["offload_fraction_needed_is"] = (
            f"the least the step needs: {moments}the request that failed was only the first of the step's not to "
            "fit, and the run's config (--config, or the log's arguments block) sizes the whole step"
        )
    if fraction <= 1.0:
        tokens, shards = (shape.tokens_per_rank, shape.optimizer_shards) if shape else (None, 1)
        advice["expected_slowdown"] = expected_slowdown(fraction, _is_moe(store), tokens, shards)
    return advice


def host_memory_advice(store: ConfigStore) -> dict[str, Any]:
    """What the offloaded optimizer state keeps in host memory, a rank and a node (where the launch says how many
    ranks a node runs), by the memory model (memory/host.py)."""
    from offloaddoctor.memory import calibration as cal
    from offloaddoctor.memory.host import bytes_a_parameter, workers_bytes_a_parameter

    shape = memory_shape(store)
    if shape is None:
        return {}
    result = _estimate(shape)
    per_rank = result.host_bytes
    if not per_rank:
        return {}
    facts: dict[str, Any] = {
        "host_memory_per_rank_bytes": int(per_rank),
        "host_memory_basis": "the memory model's host figure, measured on real runs: "
        f"{bytes_a_parameter(True):.0f} B a parameter offloaded with the precision-aware optimizer, "
        f"{bytes_a_parameter(False):.0f} without, on a rank whose data-loader workers keep "
        f"{workers_bytes_a_parameter(True):.0f} and {workers_bytes_a_parameter(False):.0f} of them (pinned buffers rounded "
        f"up to powers of two besides), the process's {cal.HOST_PROCESS_BYTES / GIB:.1f} GiB and each data-loader worker's own "
        f"{cal.HOST_WORKER_BYTES / GIB:.2f} GiB (fixtures/memory-calibration/host-memory)"
        + (
            "; {:.0%}-{:.0%} over what tensor-parallel runs' hosts gave up".format(*cal.HOST_OVER_UNDER_TENSOR_PARALLEL)
            if shape.tensor_parallel > 1
            else ""
        )
        + (
            "; and what the validation loader's workers, forked at the first evaluation during training, keep: the "
            "fp32 parameters and Adam's moments as they were then"
            if shape.validation_forks_in_training and shape.data_loader_workers
            else ""
        ),
    }
    # What no data-loader workers and the collection before training free (p24, p27: the runs trained so).
    without = _estimate(shape.with_changes(data_loader_workers=0, manual_gc=True)).host_bytes
    if without < per_rank:
        facts["host_memory_per_rank_without_workers_bytes"] = int(without)
    ranks = derived.processes_per_node(store)
    if ranks and ranks > 1:
        facts["host_memory_per_node_bytes"] = int(result.host_bytes_for(ranks))
    return facts


def _named_log(finding: Finding) -> str:
    """The finding's log as a command line names it; LOG where there is no file to name ("<stdin>")."""
    log = finding.evidence[0].path if finding.evidence else None
    return shlex.quote(log) if log and not log.startswith("<") else "LOG"


def _unsized_oom_advice(finding: Finding, store: ConfigStore) -> None:
    """An OOM whose message gives no figures (NCCL's or cuBLAS's own allocation, the CUDA runtime's error) names no
    GPU size: the memory model's peak for the run's config, and how to get the verdict for the GPU it ran on (e76:
    NCCL's "Failed to CUDA calloc async 4 bytes" on two H100, where `estimate --gpu H100-80GB` says it does not fit).
    The fix lines are then the signature's usual ones, not sized for the run: the note says so, and where the model
    puts the peak, so that a change that frees little there is not taken for the fix (e76: offloading half its
    optimizer frees ~1 GiB of a peak that is 60,846 MiB of activations)."""
    shape = memory_shape(store)
    if shape is None:
        return
    result, named = _estimate(shape), _named_log(finding)
    finding.facts.update(estimate_facts(result))
    finding.facts["fit_verdict"] = (
        f"this message does not give the GPU's size: `offloaddoctor estimate {named} --gpu NAME` (or --gpu-memory "
        "SIZE) gives the verdict and the cheapest change that fits"
    )
    if not finding.overrides:
        return
    largest = max(result.most_loaded.components, key=lambda c: c.bytes)
    finding.fix_note = (
        f"The message does not give the GPU's size, so the lines below are not sized for this run: `offloaddoctor "
        f"estimate {named} --gpu NAME` names the cheapest change that fits. The memory model's largest component: "
        f"{largest.name.replace('_', ' ')} ({largest.bytes / MIB:,.0f} MiB)."
    )


def _is_moe(store: ConfigStore) -> bool:
    return bool(number(store.value("model.num_moe_experts")))


def needed_fraction(needed: float) -> float:
    """The offload fraction that frees enough, rounded up to the step; above 1.0 (unrounded) when none can."""
    if needed > 1.0:
        return needed
    step = derived.OFFLOAD_FRACTION_STEP
    return round(max(min(1.0, math.ceil(needed / step - 1e-9) * step), step), 2)


def _needed_before_the_first_step(state: float, current: float, shortfall: float, bytes_per_parameter: int) -> float:
    """The offload fraction for an OOM before the optimizer's first step (scanning/oom.py before_the_first_step): the
    GPU then held the state's master weights but not Adam's moments, which every step from the first on holds for the
    part not offloaded. The state left on the GPU, (1 - f) x state, must fit in what its master weights took then
    less the shortfall. Run b81's log without its arguments block: 0.1 from the shortfall alone, 0.75 with this."""
    from offloaddoctor.memory import DEFAULT_MOMENT_BYTES_PER_PARAMETER

    master = state * (bytes_per_parameter - DEFAULT_MOMENT_BYTES_PER_PARAMETER) / bytes_per_parameter
    return 1.0 - (master * (1.0 - current) - shortfall) / state


def _needed_fraction_fact(
    fraction: float, store: ConfigStore, shape: RunShape | None, tight_peak: float | None = None
) -> float | str:
    if fraction <= 1.0:
        return fraction
    more = (
        "add pipeline/tensor parallelism or activation offloading"
        if _gpus_hold_doubled_pipeline(store)
        else "add recompute, a smaller micro-batch or activation offloading (the run's GPUs hold no more pipeline "
        "or tensor parallelism)"
    )
    if shape is not None and shape.optimizer_cpu_offload and not shape.precision_aware_optimizer:
        more = (
            "without the precision-aware optimizer offloading leaves the fp32 main parameters on the GPU, which "
            "--use-precision-aware-optimizer (optimizer.use_precision_aware_optimizer) moves too; or " + more
        )
    if tight_peak is not None:
        return (
            f"1.0 at the most, and TIGHT there: the memory model puts the peak at {tight_peak / MIB:,.0f} MiB, within "
            f"the limit but not with the allocator's slack, so it may run or not; for room to spare, {more}"
        )
    return f"more than 1.0 ({fraction:.2f}): optimizer offloading alone cannot free enough; {more}"


def memory_shape(store: ConfigStore) -> RunShape | None:
    """The run as the memory model reads it, or None when the keys it needs are not known."""
    from offloaddoctor.errors import UserError
    from offloaddoctor.memory import read_shape

    try:
        return read_shape(store)
    except UserError:
        return None


def memory_model_facts(
    result: MemoryEstimate, logged_parameters: int, counted_by: str = "the log's count"
) -> dict[str, Any]:
    """The memory model's view of the run: optimizer-state bytes per parameter on one GPU (precision, sharding)
    times the parameters the log printed (those that train, where most are frozen), or where it printed none the
    model's own count (`counted_by` says which), its peak and largest component."""
    from offloaddoctor.memory import offloadable_state

    states = offloadable_state(result.shape)
    share = result.shape.trained_share
    trained = round(logged_parameters * share)
    per_parameter = states.bytes / (result.most_loaded.parameters.total * share)
    counted = (
        f"{logged_parameters:,} parameters per GPU ({counted_by})"
        if share == 1
        else f"{trained:,} trained parameters per GPU (of {logged_parameters:,}, {counted_by})"
    )
    return {
        "optimizer_state_bytes": per_parameter * trained,
        "basis": f"memory model: {per_parameter:.3g} B/parameter (the config's {states.formula}) × {counted}",
        **estimate_facts(result),
    }


def estimate_facts(result: MemoryEstimate) -> dict[str, Any]:
    """The memory model's peak, nvidia-smi figure and largest component, as `diagnose` and `check --gpu` show them."""
    largest = max(result.most_loaded.components, key=lambda c: c.bytes)
    return {
        "estimated_peak_allocated_bytes": int(result.peak_allocated_bytes),
        "estimated_nvidia_smi_bytes": int(result.nvidia_smi_bytes[0]),
        "largest_component": f"{largest.name.replace('_', ' ')} ({largest.bytes / MIB:,.0f} MiB): {largest.formula}",
    }


def _modelled_fraction(shape: RunShape | None, fit, manual_gc: bool) -> float | None:
    from offloaddoctor.advice.changes import smallest_offload_fraction
    from offloaddoctor.memory.fit import budget_for

    if shape is None or fit is None:
        return None
    return smallest_offload_fraction(shape, budget_for(fit.limit_bytes, shape.world_size > 1), manual_gc)


def _modelled_change(
    shape: RunShape | None,
    result: MemoryEstimate | None,
    fit,
    store: ConfigStore,
    catalog: Catalog | None,
    expandable_segments: bool,
) -> tuple[str, list[str], bool] | None:
    """The memory model's cheapest single change that fits this GPU (the same advice as `estimate`), or where none
    does, the one that lowers the peak most (`estimate`'s first "helps most"): its sentence, lines and whether it
    fits. `expandable_segments`: as `suggest` takes it."""
    from offloaddoctor.advice.changes import suggest
    from offloaddoctor.memory.fit import budget_for

    if shape is None or fit is None:
        return None
    budget = budget_for(fit.limit_bytes, shape.world_size > 1)
    options = suggest(
        shape,
        budget,
        store.all_values(),
        catalog,
        result,
        expandable_segments,
        printed_arguments=store.printed_arguments,
    )
    if not options:
        return None
    first = options[0]
    if not first.fits:
        peak = f"peak {first.peak_allocated_bytes / MIB:,.0f} MiB, still too much"
        return f"{first.change}: {peak}; cost: {first.cost}", list(first.overrides), False
    from offloaddoctor.memory.model import host_memory_sentence

    # A change that moves the host's figure says it, as estimate does (n132: the GPU fitted, the host did not; the run
    # it was advised for had died on its GPU before its host filled).
    moved = first.host_bytes_moved(result or _estimate(shape))
    host = host_memory_sentence(first.estimate) if moved else ""
    peak = f"peak {first.peak_allocated_bytes / MIB:,.0f} MiB"  # what the relaunch's `max allocated` should read
    return f"{first.change}: {peak}; cost: {first.cost}" + (f"; {host}" if host else ""), list(first.overrides), True


def weigh_whole_step(scan, store: ConfigStore) -> None:
    """Fragmentation or capacity (oom.fragmentation_verdict) with what the run's config says: an OOM whose
    request was covered is still capacity with expandable segments on, or when the memory model's whole step is
    short even in its best case."""
    from offloaddoctor.scanning import fragmentation_verdict

    suspects = [a for a in scan.aggregates if a.facts.get("fragmentation_suspected") is True]
    expandable = store.value("allocator.expandable_segments") is True
    shape = memory_shape(store) if suspects and not expandable else None
    result = _estimate(shape) if shape is not None else None
    for aggregate in suspects:
        if expandable:
            verdict = fragmentation_verdict(aggregate.facts, expandable_segments_on=True)
        else:
            fit = _fit_verdict(result, aggregate.facts) if result is not None else None
            if fit is None:
                continue
            # With the first optimizer build lingering (offloading without --manual-gc) the step is short by that
            # much more: an OOM whose model fits only if Python's collector frees it is the build, not the heap.
            # Recorded: g1-f000 and g2-f040 ran out of memory again with expandable segments on; g2-f040 ran with
            # --manual-gc (fixtures/offload-sweep).
            verdict = fragmentation_verdict(aggregate.facts, fit.short_if_never_collected_bytes, fit.uncollected_bytes)
        if verdict is not None:
            aggregate.facts["fragmentation_suspected"], aggregate.facts["fragmentation_arithmetic"] = verdict


def _estimate(shape: RunShape) -> MemoryEstimate:
    from offloaddoctor.memory import estimate

    return estimate(shape)


def _fit_verdict(result: MemoryEstimate, facts: dict[str, Any]):
    """The memory model's fit verdict (memory/fit.py, as `estimate` and `check --gpu` give it) on the card the
    OOM message describes: its total less the CUDA context and what other processes hold on it (b07: n16's GPT, which
    fits an H100 alone, beside a process holding 40.51 GiB), or a per-process memory fraction's limit."""
    from offloaddoctor.memory.fit import context_bytes, verdict_within

    total, allowed = facts.get("total_capacity_bytes"), facts.get("allowed_bytes")
    others = facts.get("other_processes_bytes", 0)
    limits = [total - context_bytes(result.shape.world_size > 1) - others] if isinstance(total, (int, float)) else []
    if isinstance(allowed, (int, float)):
        limits.append(allowed)
    return verdict_within(result, min(limits)) if limits else None


def _check_the_lower_fraction(finding: Finding, store: ConfigStore) -> None:
    """A smaller offloaded share leaves more of the optimizer on the GPU. The slowdown fix's fraction (the guide's)
    knows nothing of this run's memory: where the memory model reads the run, say how much more its peak needs
    there, and how to find the smallest fraction that fits (p38 trained at 0.65; at 0.25 it needs ~30 GiB more, and
    ran out of memory: n137)."""
    from offloaddoctor.config.dialect import parse_fix_line

    changes = dict(change for line in finding.overrides for change in parse_fix_line(line))
    lower = number(changes.get(OFFLOAD_FRACTION))
    shape = memory_shape(store)
    if lower is None or shape is None or not shape.optimizer_cpu_offload or lower >= shape.optimizer_offload_fraction:
        return
    now = _estimate(shape).peak_allocated_bytes
    more = _estimate(shape.with_changes(optimizer_offload_fraction=lower)).peak_allocated_bytes - now
    if more <= 0:
        return
    finding.facts["peak_allocated_at_the_fix_fraction"] = (
        f"{(now + more) / MIB:,.0f} MiB at {lower:g}, {more / MIB:,.0f} MiB over this run's {now / MIB:,.0f} at "
        f"{shape.optimizer_offload_fraction:g} (memory model)"
    )
    finding.fix_note = (
        f"Check the GPU before lowering the fraction: at {lower:g} the memory model puts the peak {more / MIB:,.0f} "
        f"MiB higher; `offloaddoctor estimate {_named_log(finding)} --gpu GPU` names the smallest fraction that fits it."
    )


def slowdown_advice(store: ConfigStore) -> dict[str, Any]:
    fraction = number(store.value(OFFLOAD_FRACTION))
    advice: dict[str, Any] = {}
    if fraction is not None and 0 < fraction <= 1:
        shape = memory_shape(store)  # the tokens a data-parallel rank steps over, as `estimate` reads them
        tokens, shards = (shape.tokens_per_rank, shape.optimizer_shards) if shape else (None, 1)
        advice["expected_slowdown"] = expected_slowdown(fraction, _is_moe(store), tokens, shards)
    overlap = store.value("optimizer.overlap_cpu_optimizer_d2h_h2d")
    if overlap is not None:
        advice["overlap_cpu_optimizer_d2h_h2d"] = boolean(overlap)
    return advice
