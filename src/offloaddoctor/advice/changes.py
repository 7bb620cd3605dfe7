"""Changes that make a run fit, cheapest first, each re-estimated by the memory model and each checked
against the same preflight constraints `check` runs (a suggestion `check` would reject is never made).

Costs are measured figures where they exist (the memory-tuning guide: TP 4 -> 8 -28 % throughput on Llama3 70B,
halving DP ~6 %, distributed optimizer ~1-2 %; the offload-fraction, selective-recompute and TP curves of
slowdown.py; expert parallelism and PP on a MoE, fixtures/memory-calibration e52-e66; recompute, micro-batch,
manual gc, PP's bubble and TP on dense GPTs, n16-n52), and say so where they are not measured.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, NamedTuple

from offloaddoctor.advice.slowdown import (
    GUIDE_TENSOR_PARALLEL_TO_8,
    MICRO_BATCH_CUT,
    expected_slowdown,
    measured_slowdown,
    micro_batch_cut_slowdown,
    selective_recompute_slowdown,
    tensor_parallel_slowdown,
)
from offloaddoctor.catalog.model import Catalog
from offloaddoctor.config.defaults import add_defaults
from offloaddoctor.config.loading import build_store
from offloaddoctor.config.overrides import parse_overrides
from offloaddoctor.config import derived
from offloaddoctor.config.dialect import MEGATRON_LM, flags_it_lacks, parse_fix_line, render_lines
from offloaddoctor.config.values import ConfigValue
from offloaddoctor.memory import MemoryEstimate, RunShape, estimate
from offloaddoctor.memory.fit import fits, fits_only_with_expandable_segments, verdict

if TYPE_CHECKING:
    from offloaddoctor.report import Finding

# Megatron's manual garbage collection: gc.collect() before training frees the HybridDeviceOptimizer that
# optimizer offloading builds first and replaces (memory/model.py _uncollected_first_build); the interval keeps
# collecting during training (Megatron-LM: --manual-gc --manual-gc-interval 100).
MANUAL_GC = ("train.manual_gc=True", "train.manual_gc_interval=100")
# torchrun gives each of several processes one OpenMP thread, and the offloaded Adam step runs on them: with the
# host's cores over its ranks, t22's offloading stepped 1.34x at 0.15 and 2.13x at 0.5 instead of 1.89x and 3.73x
# (fixtures/memory-calibration n54-n57, signatures/optimizer-offload-one-omp-thread.yaml).
OMP_THREADS_A_RANK = f"env.OMP_NUM_THREADS={derived.omp_threads_a_rank()}"
EXPANDABLE_SEGMENTS = "env.PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"
# Whether a re-estimated run fits the budget: `fits` as configured, or `_fits_as_advised`, which credits
# expandable segments where the allocator's fragmenting needs them (and `_candidates` then adds the setting).
Fitting = Callable[[MemoryEstimate, float], bool]


class Suggestion(NamedTuple):
    change: str
    overrides: tuple[str, ...]
    estimate: MemoryEstimate
    gpu_fits: bool  # the GPU (or the target)
    cost: str
    cost_rank: float  # expected slowdown in percent, for ordering
    host_fits: bool = True  # the node's host memory holds the ranks' offloaded state (where it was given)

    @property
    def fits(self) -> bool:
        return self.gpu_fits and self.host_fits

    @property
    def peak_allocated_bytes(self) -> float:
        return self.estimate.peak_allocated_bytes

    def host_bytes_moved(self, current: MemoryEstimate) -> float:
        """The host memory a rank needs with this change, where the change moves it from `current`'s (else 0)."""
        return self.estimate.host_bytes if self.estimate.host_bytes != current.host_bytes else 0.0


def suggest(
    shape: RunShape,
    budget: float,
    values: Sequence[ConfigValue],
    catalog: Catalog | None,
    current: MemoryEstimate | None = None,
    expandable_segments: bool = True,
    on_host: Callable[[MemoryEstimate], bool] | None = None,
    printed_arguments: frozenset[str] | None = None,
    left_out: list[str] | None = None,
) -> list[Suggestion]:
    """Every single change that fits (cheapest first); when none fits alone, the ones that help most. A change that
    leaves the peak where it is (recompute where the optimizer step sets the peak: e52) is never offered, unless it
    makes the run fit (expandable segments). `current` is the shape's estimate where the caller has it.
    `expandable_segments`: the setting may be advised, alone or added to a change that fits only with it (False
    where it was advised already and these are the changes for an OOM that stays). `on_host`: whether the node's
    host memory holds an estimate's offloaded state (memory/fit.py host_verdict), where it is known: a change must
    fit both. `printed_arguments`: the names a Megatron-LM arguments block printed (ConfigStore): a change needing a
    flag that Megatron-LM does not have is not offered, and `left_out` (where given) gets those flags."""
    now = current or estimate(shape)
    gpu_fitting = _fits_as_advised if expandable_segments else fits

    def held(result: MemoryEstimate) -> bool:
        return on_host is None or on_host(result)

    def fits_both(result: MemoryEstimate, budget: float) -> bool:
        return gpu_fitting(result, budget) and held(result)

    peak, fits_now, host_short = now.peak_allocated_bytes, fits(now, budget) and held(now), not held(now)
    for_host = [] if not host_short else [_smaller_offload_share(shape, budget, fits_both), _no_workers(shape, budget)]
    found = [
        c._replace(host_fits=held(c.estimate))
        for c in _candidates(shape, budget, fits_both) + [s for s in for_host if s is not None]
    ]

    def lowers(c: Suggestion) -> bool:  # what is short: the GPU's peak, or the host's share where the host is short
        return c.peak_allocated_bytes < peak or (host_short and c.estimate.host_bytes < now.host_bytes)

    def takes(c: Suggestion) -> bool:
        lacking = flags_it_lacks(render_lines(c.overrides, MEGATRON_LM), printed_arguments)
        if left_out is not None:
            left_out.extend(flag for flag in lacking if flag not in left_out)
        return not lacking

    candidates = [
        c for c in found if (lowers(c) or (c.fits and not fits_now)) and _allowed(c, values, catalog) and takes(c)
    ]
    fitting = sorted((c for c in candidates if c.fits), key=lambda c: (c.cost_rank, c.peak_allocated_bytes))
    if any(c.overrides == (EXPANDABLE_SEGMENTS,) for c in fitting):  # enough alone: a change it was added to is not
        fitting = [
            c for c in fitting if c.overrides == (EXPANDABLE_SEGMENTS,) or EXPANDABLE_SEGMENTS not in c.overrides
        ]
    # where nothing fits, the ones that free most of what is short (a host short of memory: its share first)
    chosen = (
        fitting
        or sorted(candidates, key=lambda c: (c.estimate.host_bytes if host_short else 0.0, c.peak_allocated_bytes))[:4]
    )
    return _without_what_the_run_has(chosen, values)


def _without_what_the_run_has(suggestions: list[Suggestion], values: Sequence[ConfigValue]) -> list[Suggestion]:
    """A change's lines less the settings the run already has (a7b-f080 offloads with the precision-aware optimizer:
    its smaller share is `--optimizer-offload-fraction 0.65`, not the switches again), as diagnose's fixes print."""
    from offloaddoctor.report import in_effect

    store = build_store(values)

    def had(line: str) -> bool:
        changes = parse_fix_line(line)
        return bool(changes) and all(in_effect(change, store) for change in changes)

    kept = []
    for suggestion in suggestions:
        lines = tuple(line for line in suggestion.overrides if not had(line))
        kept.append(suggestion._replace(overrides=lines) if lines else suggestion)
    return kept


def _allowed(suggestion: Suggestion, values: Sequence[ConfigValue], catalog: Catalog | None) -> bool:
    return catalog is None or not refusals(values, catalog, suggestion.overrides)


def refusals(values: Sequence[ConfigValue], catalog: Catalog, overrides: Sequence[str] = ()) -> list[Finding]:
    """`check`'s error findings for the config (with `overrides`): what stops the run before or at its first step."""
    from offloaddoctor.report import check_store

    store = build_store(values, parse_overrides(list(overrides)))
    add_defaults(store)
    return [v for v in check_store(catalog, store).violations if v.signature.severity == "error"]


class Cost(NamedTuple):
    text: str  # what the user reads
    rank: float  # expected slowdown in percent, for ordering
    source: str  # where `rank` comes from


class Change(NamedTuple):
    change: str
    overrides: tuple[str, ...]
    shape: RunShape
    fraction: float | None = None  # optimizer offloading's, for its cost
    offloaded_now: float = 0.0  # the fraction the run offloads already: offloading's cost is from there
    micro_batches: float = 1.0  # how many times the micro-batches a step runs, for a smaller micro-batch's cost


def _candidates(shape: RunShape, budget: float, fitting: Fitting) -> list[Suggestion]:
    out: list[Suggestion] = []
    for propose, cost in CHANGES:
        found = propose(shape, budget, fitting)
        if found is None or not found.shape.expert_grid_divides_world:
            continue
        if _lingers(found.shape):
            # Whatever else changes, the first optimizer build must not stay on the GPU: with it the peak is a
            # range (Python's collector may or may not free it in time), without it one figure, as measured.
            found = found._replace(
                overrides=found.overrides + MANUAL_GC, shape=found.shape.with_changes(manual_gc=True)
            )
        paid = cost(found) if callable(cost) else cost
        result = estimate(found.shape)
        if not fits(result, budget) and fitting(result, budget):
            found = found._replace(
                change=f"{found.change}, with expandable segments",
                overrides=found.overrides + (EXPANDABLE_SEGMENTS,),
                shape=found.shape.with_changes(expandable_segments=True),
            )
            result = result._replace(shape=found.shape)
        out.append(Suggestion(found.change, found.overrides, result, fits(result, budget), paid.text, paid.rank))
    return out


def _fits_as_advised(result: MemoryEstimate, budget: float) -> bool:
    """Fits, with expandable segments added where the allocator's fragmenting needs them (as `_candidates` does)."""
    return fits(result, budget) or fits_only_with_expandable_segments(result, budget)


def _lingers(shape: RunShape) -> bool:
    """Optimizer offloading's first build stays on the GPU until Python's collector runs (memory/model.py)."""
    return shape.optimizer_cpu_offload and not shape.manual_gc and shape.gpu_offload_fraction < 1


def manual_gc_change(shape: RunShape, budget: float = 0.0, fitting: Fitting = fits) -> Change | None:
    """The change that frees optimizer offloading's first build before training, where it lingers."""
    if not _lingers(shape):
        return None
    return Change(
        "free the optimizer's first build before training (Megatron's manual garbage collection)",
        MANUAL_GC,
        shape.with_changes(manual_gc=True),
    )


def _expandable_segments(shape: RunShape, budget: float, fitting: Fitting = fits) -> Change | None:
    """Where the allocator's cache fragmenting is all that stops the run fitting (memory/fit.py): around the
    unfused attention's score tensors, or a MoE layer's routed tensors of a new size every step."""
    now = estimate(shape)
    if fits(now, budget) or not fitting(now, budget):
        return None
    blocks = "a freed score tensor's" if verdict(now, budget).fragmentation_bytes else "the routed tensors' freed"
    return Change(
        f"expandable segments in PyTorch's allocator ({blocks} memory serves a larger request)",
        (EXPANDABLE_SEGMENTS,),
        shape.with_changes(expandable_segments=True),
    )


def _distributed_optimizer(shape: RunShape, budget: float, fitting: Fitting = fits) -> Change | None:
    shards = shape.data_parallel * shape.context_parallel
    if shape.distributed_optimizer or shards <= 1:
        return None
    return Change(
        f"distributed optimizer: shard optimizer state over {shards} ranks",
        ("optimizer.use_distributed_optimizer=True",),
        shape.with_changes(distributed_optimizer=True),
    )


def _selective_recompute(shape: RunShape, budget: float, fitting: Fitting = fits) -> Change | None:
    if shape.recompute_granularity is not None:
        return None
    return Change(
        "selective recompute of the attention core",
        ("model.recompute_granularity=selective", "model.recompute_modules=[core_attn]"),
        shape.with_changes(recompute_granularity="selective", recompute_modules=("core_attn",)),
    )


def _smaller_micro_batch(shape: RunShape, budget: float, fitting: Fitting = fits) -> Change | None:
    """The largest smaller micro-batch that fits, else the smallest: the fewest extra micro-batches, the cheapest cut
    (slowdown.py MICRO_BATCH_CUT). With the global batch known, only sizes that divide it over the data-parallel
    ranks: Megatron asserts "global batch size (348) is not divisible by micro batch size (43) times data parallel
    size (4)" (num_microbatches_calculator.py); without it, halvings."""
    per_rank, rest = divmod(shape.global_batch_size or 0, shape.data_parallel)
    if per_rank and not rest:
        sizes = [m for m in range(min(shape.micro_batch_size - 1, per_rank), 0, -1) if per_rank % m == 0]
    else:
        sizes = [shape.micro_batch_size >> k for k in range(1, shape.micro_batch_size.bit_length())]
    for micro in sizes:
        new = shape.with_changes(micro_batch_size=micro)
        if fitting(estimate(new), budget) or micro == sizes[-1]:
            return Change(
                f"micro-batch size {shape.micro_batch_size} -> {micro} (same global batch, more micro-batches)",
                (f"train.micro_batch_size={micro}",),
                new,
                micro_batches=shape.micro_batch_size / micro,
            )
    return None


def _double_pipeline(shape: RunShape, budget: float, fitting: Fitting = fits) -> Change | None:
    layers, p, dp = shape.num_layers, shape.pipeline_parallel, shape.data_parallel
    if dp % 2 or layers % (2 * p):
        return None
    return Change(
        f"pipeline parallel {p} -> {2 * p} (data parallel {dp} -> {dp // 2})",
        (f"model.pipeline_model_parallel_size={2 * p}",),
        shape.with_changes(pipeline_parallel=2 * p, data_parallel=dp // 2),
    )


def _optimizer_offloading(shape: RunShape, budget: float, fitting: Fitting = fits) -> Change | None:
    shape = shape.with_changes(precision_aware_optimizer=True)  # the lines below set it
    fraction = _smallest_fraction(shape, budget, _offloaded, fitting)
    return (
        None
        if fraction is None
        else _offloading_change(shape, fraction, f"optimizer offloading at fraction {fraction:g}")
    )


def _offloading_change(shape: RunShape, fraction: float, words: str) -> Change:
    overrides = [
        "optimizer.optimizer_cpu_offload=True",
        f"optimizer.optimizer_offload_fraction={fraction:g}",
        "optimizer.use_precision_aware_optimizer=True",
    ]
    if not shape.distributed_optimizer:
        overrides.append("optimizer.use_distributed_optimizer=True")
    if not shape.manual_gc:
        overrides.extend(MANUAL_GC)
    if shape.world_size > 1 and not shape.omp_threads_set:
        overrides.append(OMP_THREADS_A_RANK)
    return Change(
        words,
        tuple(overrides),
        _offloaded(shape, fraction),
        fraction,
        shape.gpu_offload_fraction,
    )


def _smaller_offload_share(shape: RunShape, budget: float, fitting: Fitting) -> Suggestion | None:
    """Where the node's host cannot hold what the run offloads: the smallest share under its own that fits the
    GPU and the host (`fitting` checks both), as the advice's offloading change words and sets it."""
    aware = shape.with_changes(precision_aware_optimizer=True)
    fraction = _smallest_fraction(aware, budget, _offloaded, fitting, below=True)
    if fraction is None:
        return None
    change = _offloading_change(aware, fraction, f"a smaller share offloaded, {fraction:g}")
    paid = _offloading_cost(change)
    result = estimate(change.shape)
    return Suggestion(change.change, change.overrides, result, fits(result, budget), paid.text, paid.rank)


MANUAL_GC_COST = Cost(
    "measured none, 1.00x step time: one gc.collect() before the first iteration, then every 100 iterations",
    0.0,
    "measured: n16/n20",
)
# The data loader's workers, forked by the ranks that load data, keep what the optimizer frees and writes after the
# fork (memory/calibration.py HOST_FIRST_BUILD_BYTES): without them (Megatron-LM --num-workers 0, Bridge
# dataset.num_workers=0) the rank loads its batches itself.
NO_WORKERS = "dataset.num_workers=0"
NO_WORKERS_COST = Cost(
    "measured 1.00x-1.03x step time (median, mean of iterations 4-10: the 3.35B GPT offloading all of it, mock data, "
    "one H100); a dataset slow to read adds its batches' loading to each step",
    1.5,
    "measured: p25/p26",
)


def _no_workers(shape: RunShape, budget: float) -> Suggestion | None:
    """Where the node's host cannot hold what the run offloads: the same share, without data-loader workers and with
    the collection before training that frees the first build's copy (kept by the workers, or by the rank until
    something collects it: p29)."""
    if not shape.optimizer_cpu_offload or (shape.manual_gc and not shape.data_loader_workers):
        return None
    result = estimate(shape.with_changes(data_loader_workers=0, manual_gc=True))
    gc = () if shape.manual_gc else MANUAL_GC
    if not shape.data_loader_workers:
        words = "free the optimizer's first build before training: its fp32 copy stays on the host until collected"
        return Suggestion(words, gc, result, fits(result, budget), MANUAL_GC_COST.text, MANUAL_GC_COST.rank)
    return Suggestion(
        "no data-loader worker processes (they keep what the offloaded optimizer frees and writes after they fork)",
        (NO_WORKERS, *gc),
        result,
        fits(result, budget),
        NO_WORKERS_COST.text,
        NO_WORKERS_COST.rank,
    )


def _precision_aware_optimizer(shape: RunShape, budget: float, fitting: Fitting = fits) -> Change | None:
    """Offloading without the precision-aware optimizer (megatron-core's and Bridge's default) leaves the offloaded
    part's fp32 main parameters on the GPU (memory/model.py); with it they go to the host with the rest."""
    if not shape.optimizer_cpu_offload or shape.precision_aware_optimizer:
        return None
    overrides: tuple[str, ...] = ("optimizer.use_precision_aware_optimizer=True",)
    if not shape.distributed_optimizer:
        overrides += ("optimizer.use_distributed_optimizer=True",)
    return Change(
        "the precision-aware optimizer (offloading then moves the fp32 main parameters to the host too)",
        overrides,
        shape.with_changes(precision_aware_optimizer=True, distributed_optimizer=True),
    )


def _full_recompute(shape: RunShape, budget: float, fitting: Fitting = fits) -> Change | None:
    if shape.recompute_granularity == "full":
        return None
    return Change(
        "full recompute (uniform, one layer per chunk)",
        ("model.recompute_granularity=full", "model.recompute_method=uniform", "model.recompute_num_layers=1"),
        shape.with_changes(recompute_granularity="full", recompute_method="uniform", recompute_num_layers=1),
    )


def _activation_offloading(shape: RunShape, budget: float, fitting: Fitting = fits) -> Change | None:
    # Megatron's activation offloading runs inside Transformer Engine's offload context: without TE it is
    # rejected at start-up (transformer_block.py: "CPU Offloading is enabled when TE is not present").
    layers = _smallest_offload(shape, budget, fitting) if shape.transformer_impl == "transformer_engine" else None
    if not layers:
        return None
    return Change(
        f"activation offloading of {layers} layers",
        ("model.cpu_offloading=True", f"model.cpu_offloading_num_layers={layers}"),
        shape.with_changes(cpu_offloading_num_layers=layers),
    )


def _transformer_engine(shape: RunShape, budget: float, fitting: Fitting = fits) -> Change | None:
    # The local implementation materialises the attention scores (O(s^2) a layer) and cannot offload activations;
    # Transformer Engine's fused attention never materialises them, and its FusedAdam takes no step temporary.
    if shape.transformer_impl != "local":
        return None
    return Change(
        "Transformer Engine instead of the local implementation (fused attention; needed for activation offloading)",
        ("model.transformer_impl=transformer_engine",),
        shape.with_changes(transformer_impl="transformer_engine", flash_attention=True, te_fused_adam=True),
    )


def _double_tensor(shape: RunShape, budget: float, fitting: Fitting = fits) -> Change | None:
    t, dp = shape.tensor_parallel, shape.data_parallel
    if dp % 2 or shape.num_attention_heads % (2 * t) or shape.heads_kv % (2 * t) or 2 * t > 8:
        return None
    overrides: tuple[str, ...] = (f"model.tensor_model_parallel_size={2 * t}",)
    changed = shape.with_changes(tensor_parallel=2 * t, data_parallel=dp // 2)
    if shape.num_experts:
        # MoE with TP needs sequence parallelism (signature moe-tp-requires-sequence-parallel; e30 was refused
        # without it); `check` then refuses the change on the local implementation (local-impl-sequence-parallel).
        if not shape.sequence_parallel:
            overrides += ("model.sequence_parallel=true",)
            changed = changed.with_changes(sequence_parallel=True)
        # Expert TP follows TP unless set: pinned to what the estimate keeps, or the expert grid would grow with it.
        expert_tp = shape.expert_tensor_parallel_size or t
        overrides += (f"model.expert_tensor_parallel_size={expert_tp}",)
        changed = changed.with_changes(expert_tensor_parallel_size=expert_tp)
    return Change(f"tensor parallel {t} -> {2 * t} (data parallel {dp} -> {dp // 2})", overrides, changed)


def _double_expert(shape: RunShape, budget: float, fitting: Fitting = fits) -> Change | None:
    """Each rank holds half the experts: their weights, gradients and optimizer state halve, and a rank's share
    of routed tokens varies more (memory/calibration.py routed_imbalance). The world stays the same, so the expert
    grid must still divide it (`_candidates`)."""
    e, experts = shape.expert_model_parallel_size, shape.num_experts
    if not experts or experts % (2 * e):
        return None
    return Change(
        f"expert parallel {e} -> {2 * e} ({experts // e} -> {experts // (2 * e)} experts a rank)",
        (f"model.expert_model_parallel_size={2 * e}",),
        shape.with_changes(expert_model_parallel_size=2 * e),
    )


HALVED_MICRO_BATCH = Cost(
    "measured 1.04x-1.06x step time (micro-batch 4 -> 2 and 2 -> 1, GPTs of hidden 2048 and 4096, H100 and H200)",
    5.0,
    "measured: n16/n19, n23/n25, n30/n31, n33/n34",
)


def _micro_batch_cost(change: Change) -> Cost:
    """A cut to less than half costs least, halving little; cutting further does cost: each micro-batch's fixed work
    repeats and small ones leave the GPU idle (slowdown.py MICRO_BATCH_CUT)."""
    times = change.micro_batches
    if times == 2:
        return HALVED_MICRO_BATCH
    ratio = micro_batch_cut_slowdown(times)
    measured = (
        "measured 1.02x at 4/3 and 3/2, 1.04x-1.06x at half, 1.10x-1.28x at a quarter, 2.63x at a twelfth, one H100"
    )
    source = (
        "measured: n115/n116, e92/e93, n16/n19, n100/n101, e83/e84, e83/e85 (n102/n103, hidden 4096: 1.10x at a "
        "quarter)"
    )
    bound = "more than " if times > MICRO_BATCH_CUT[-1][0] else "~"
    return Cost(
        f"{bound}{ratio:.2f}x step time: {times:g} times the micro-batches ({measured})", (ratio - 1) * 100, source
    )


def _selective_cost(change: Change) -> Cost:
    if change.shape.gpu_offload_fraction > 0:
        # With the optimizer partly on the CPU, its step sets the pace: recomputing the attention core cost 1.01x
        # (n33/n35, one H200) and stepped ahead of a smaller micro-batch (n26/n27 on an H100; n34 on the H200).
        return Cost(
            "measured ~1.01x step time with the optimizer offloaded (its CPU step sets the pace; a 3.35B GPT, one "
            "H200), ahead of a smaller micro-batch on an H100",
            1.0,
            "measured: n33/n35, n26/n27",
        )
    if change.shape.transformer_impl != "local":
        return Cost(
            "a few % with fused attention (the memory-tuning guide's second step; offloaddoctor's own runs measured "
            "only the local implementation, which recomputes the attention scores: 1.13x-1.26x)",
            3.0,
            "the memory-tuning guide's order, not measured",
        )
    # The local implementation materialises the attention scores, so recomputing the core recomputes them: the
    # longer the sequence against the hidden size, the larger the share (slowdown.py SELECTIVE_RECOMPUTE_LOCAL).
    ratio = selective_recompute_slowdown(change.shape.seq_length, change.shape.hidden_size)
    return Cost(
        f"~{ratio:.2f}x step time: the local implementation recomputes the attention scores (measured 1.13x-1.26x, "
        "sequence/hidden 0.5-2, one H100)",
        (ratio - 1) * 100,
        "measured: n16/n17, n21/n22, n23/n24",
    )


GUIDE_PIPELINE = Cost(
    "~6 % when DP halves (the memory-tuning guide, Llama3 70B; 1.07x on a 40-expert MoE, two H200)",
    6.0,
    "the memory-tuning guide; fixtures/memory-calibration e52/e54",
)


def _pipeline_cost(change: Change) -> Cost:
    """A dense run's step waits (PP - 1) / (micro-batches x VPP) of its compute in the pipeline's bubble (1F1B): the
    0.87B GPT at four and eight micro-batches stepped 1.26x and 1.15x (n36/n37, n42/n43, two H200; the bubble says
    1.25x and 1.125x); the 3.35B GPT at four 1.17x and 1.18x (n44/n45, n47/n49: DP's gradient traffic, which PP's
    DP 1 drops, is a larger share of its step, so the bubble is an upper figure). A MoE whose optimizer sets its
    pace did not (e52/e54: 1.07x at two), so it keeps the guide's figure, as does a dense run whose bubble is
    smaller."""
    shape, microbatches = change.shape, change.shape.num_microbatches
    if shape.num_experts or not microbatches:
        return GUIDE_PIPELINE
    slots = microbatches * (shape.virtual_pipeline or 1)
    bubble = (shape.pipeline_parallel - 1) / slots
    if bubble * 100 <= GUIDE_PIPELINE.rank:
        return GUIDE_PIPELINE
    return Cost(
        f"~{1 + bubble:.2f}x step time: the pipeline's bubble, (PP - 1) / micro-batches = {shape.pipeline_parallel - 1}"
        f"/{slots} (measured 1.17x-1.26x at 1/4 and 1.15x at 1/8: GPTs of 0.87B and 3.35B on two and four H200)",
        bubble * 100,
        "the 1F1B bubble; measured: n36/n37, n42/n43, n44/n45, n47/n49",
    )


GUIDE_TENSOR = (
    f"-28 % throughput, ~{GUIDE_TENSOR_PARALLEL_TO_8:.2f}x step time, at TP 4 -> 8 on Llama3 70B over 32 H100"
)


def _tensor_cost(change: Change) -> Cost:
    """Measured on dense GPTs within a node (slowdown.py TENSOR_PARALLEL_TO_2, _TO_4); TP 8, and a MoE (TP needs
    sequence parallelism there, which no run of ours measured), keep the guide's figure."""
    shape = change.shape
    degree = shape.tensor_parallel
    ratio = GUIDE_TENSOR_PARALLEL_TO_8 if shape.num_experts else tensor_parallel_slowdown(degree, shape.hidden_size)
    if shape.num_experts or degree >= 8:
        return Cost(
            f"severe: {GUIDE_TENSOR} (the memory-tuning guide); a last resort",
            (ratio - 1) * 100,
            "the memory-tuning guide",
        )
    measured = (
        "TP 1 -> 2 measured 1.16x at hidden 2048 and 1.03x at 4096, GPTs on two H200"
        if degree == 2
        else "TP 2 -> 4 measured on the 3.35B GPT, four H200"
    )
    return Cost(
        f"~{ratio:.2f}x step time ({measured}; the memory-tuning guide: {GUIDE_TENSOR})",
        (ratio - 1) * 100,
        "measured: n36/n38, n44/n46" if degree == 2 else "measured: n47/n48",
    )


def _offloading_cost(change: Change) -> Cost:
    fraction, moe, now = change.fraction or 0.0, bool(change.shape.num_experts), change.offloaded_now
    tokens, shards = None if moe else change.shape.tokens_per_rank, change.shape.optimizer_shards
    more = measured_slowdown(fraction, tokens, shards) / measured_slowdown(now, tokens, shards)
    text = f"step time {expected_slowdown(fraction, moe, tokens, shards)}"
    if now > 0:  # the run pays its own fraction's cost already: what the change adds is the ratio of the two
        curve = "the scaled curve" if tokens else "the guide's curve"
        text += f"; ~{more:.2f}x the run's step time at {now:g} now ({curve})"
    return Cost(text, (more - 1) * 100, "the measured offload-fraction curves (advice/slowdown.py)")


# Experts a node holds at most, for EP's measured cost: its all-to-all stays on NVLink (8 GPUs a node, as DGX H100).
NODE_GPUS = 8


def _expert_cost(change: Change) -> Cost:
    if change.shape.expert_model_parallel_size <= NODE_GPUS:
        # fixtures/memory-calibration e52/e53 (1,024 tokens a GPU a step) and e56/e59 (8,192) on two GPUs, e64/e65/e66
        # (EP 1, 2, 4) on four: each rank runs, and reduces the gradients of, fewer experts; e45 against e51/e49
        # (80 experts, which EP 1 does not fit) gave the same order.
        return Cost(
            "measured faster, 0.60x-0.87x step time (EP 1 -> 2 and 2 -> 4 on one node, a 40-expert MoE on two and "
            "four H200; local experts, not Transformer Engine's grouped GEMM)",
            0.0,
            "measured: e52/e53, e56/e59, e64/e65/e66, ranked as no slower",
        )
    return Cost(
        f"the experts' all-to-all leaves the node (EP over {NODE_GPUS} GPUs; not measured here, so ranked just "
        "after full recompute's measured 1.31x)",
        34.0,
        "not measured: ranked after full recompute, the last measured single-GPU change",
    )


# Every change the advice weighs, in the order it is weighed (ties in cost keep this order): the condition and
# the change (a function of the run's shape and the budget, None where it does not apply), and what it costs.
CHANGES: tuple[tuple[Callable[[RunShape, float, Fitting], Change | None], Cost | Callable[[Change], Cost]], ...] = (
    (manual_gc_change, MANUAL_GC_COST),
    (
        _expandable_segments,
        Cost(
            "measured 1.00x-1.01x step time (7,840 MiB score tensors, a 0.87B GPT and an 8-expert MoE, one H100; the "
            "memory-tuning guide: 0.8 % less throughput)",
            0.4,
            "measured: n94/n95, n96/n97, e79/e80",
        ),
    ),
    (_distributed_optimizer, Cost("~1-2 % (the memory-tuning guide)", 1.5, "the memory-tuning guide")),
    (_selective_recompute, _selective_cost),
    (
        _smaller_micro_batch,
        _micro_batch_cost,
    ),
    (_double_pipeline, _pipeline_cost),
    (
        _precision_aware_optimizer,
        Cost(
            "measured 1.18x step time (a 0.87B GPT offloading half its optimizer, one H100)", 18.0, "measured: n77/n78"
        ),
    ),
    (_optimizer_offloading, _offloading_cost),
    (
        _full_recompute,
        Cost("measured 1.31x step time: one more forward pass (a 0.87B GPT, one H100)", 31.0, "measured: n16/n18"),
    ),
    (
        _activation_offloading,
        Cost("host transfers every layer; depends on PCIe bandwidth (not measured here)", 15.0, "not measured"),
    ),
    (_double_expert, _expert_cost),
    (
        _transformer_engine,
        Cost(
            "Transformer Engine must be installed; its fused kernels are usually faster (not measured here, so "
            "ranked just after full recompute's measured 1.31x)",
            35.0,
            "not measured: ranked after full recompute, the last measured single-GPU change",
        ),
    ),
    (_double_tensor, _tensor_cost),
)


def _offloaded(shape: RunShape, fraction: float) -> RunShape:
    """Offloading as advised: with manual garbage collection, so the first optimizer build never lingers."""
    return _offloaded_as_configured(shape, fraction).with_changes(manual_gc=True)


def _offloaded_as_configured(shape: RunShape, fraction: float) -> RunShape:
    """Offloading switched on comes with the precision-aware optimizer (the lines that switch it on set it, as
    Megatron-LM requires); a run that offloads already keeps its own setting."""
    aware = shape.precision_aware_optimizer or not shape.optimizer_cpu_offload
    return shape.with_changes(
        optimizer_cpu_offload=True,
        optimizer_offload_fraction=fraction,
        distributed_optimizer=True,
        precision_aware_optimizer=aware,
    )


def smallest_offload_fraction(shape: RunShape, budget: float, manual_gc: bool) -> float | None:
    """The smallest offload fraction, in the advice's steps, whose re-estimated step fits; None when none does.
    `manual_gc`: as advised (the first optimizer build freed before training), else as the run collects."""
    offloaded = _offloaded if manual_gc else _offloaded_as_configured
    current = shape.optimizer_offload_fraction if shape.optimizer_cpu_offload else None
    if manual_gc and not shape.manual_gc and current is not None and fits(estimate(_offloaded(shape, current)), budget):
        return current  # collecting the first build is enough: no more offloading needed
    fraction = _smallest_fraction(shape, budget, offloaded, fits)
    if fraction is None or not fits(estimate(offloaded(shape, fraction)), budget):
        return None
    return fraction


def peak_when_tight_all_offloaded(shape: RunShape, budget: float, manual_gc: bool) -> float | None:
    """The memory model's peak with all of the optimizer offloaded, where only the allocator's slack keeps that from
    "fits" (the peak, with the router's worst imbalance and the model's error, is within the limit): no fraction
    fits, yet 1.0 may run. b88 (one H100 under a 39,500 MiB limit): 1.0 trained at 36,369 MiB, the model's 36,365,
    where the margins said no fraction could; b83 at 0.75, its peak (39,538 MiB) over the limit itself, did not."""
    from offloaddoctor.memory import calibration as cal
    from offloaddoctor.memory.fit import TIGHT

    offloaded = _offloaded if manual_gc else _offloaded_as_configured
    result = estimate(offloaded(shape, 1.0))
    found = verdict(result, budget)
    worst = result.peak_with_routed_excess_bytes(cal.routed_imbalance(result.shape)) * (1 + cal.MODEL_UNDERESTIMATE)
    return result.peak_allocated_bytes if found.status == TIGHT and worst <= found.limit_bytes else None


def _smallest_fraction(
    shape: RunShape,
    budget: float,
    offloaded: Callable[[RunShape, float], RunShape],
    fitting: Fitting,
    below: bool = False,
) -> float | None:
    """The smallest fraction above the run's own (`below`: under it) that fits; past the end 1.0, as the most that
    helps (None where the run offloads everything or `below` finds none)."""
    start = shape.gpu_offload_fraction
    size = derived.OFFLOAD_FRACTION_STEP
    for step in range(1, round(1 / size) + 1):
        fraction = round(step * size, 2)
        if (fraction < start if below else fraction > start) and fitting(estimate(offloaded(shape, fraction)), budget):
            return fraction
    return 1.0 if start < 1.0 and not below else None


def _smallest_offload(shape: RunShape, budget: float, fitting: Fitting = fits) -> int | None:
    if shape.pipeline_parallel > 1 or shape.recompute_granularity is not None:
        return None
    # The fewest layers that fit, else the most (all but one): halving, since each layer more offloaded keeps
    # one layer's activations less (memory/activations.py) and nothing else changes with the count.
    low, high = max(1, shape.cpu_offloading_num_layers + 1), shape.num_layers - 1
    if high < 1:
        return None
    while low < high:
        middle = (low + high) // 2
        if fitting(estimate(shape.with_changes(cpu_offloading_num_layers=middle)), budget):
            high = middle
        else:
            low = middle + 1
    return min(low, high)  # (low > high: every layer but one is already offloaded)
