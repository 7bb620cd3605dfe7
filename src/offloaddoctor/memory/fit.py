"""Will the run fit? A verdict on what PyTorch's allocator must reserve, not on the peak alone.

Three answers, each with the figures behind it:
- **fits**: the peak, with every uncertain term counted and the allocator's usual slack on top (or, with the
  unfused attention and no expandable segments, its score tensors' fragmentation where that is more), is within
  what PyTorch may reserve on the GPU;
- **does not fit**: even the best case (uncertain terms gone, the allocator's cache squeezed) is over it;
- **tight**: in between. The reasons say which term decides it and the change that settles it: the first
  optimizer build that only Python's garbage collector frees (`--manual-gc` frees it for sure), or the
  allocator's slack (fragmentation: `expandable_segments` may be needed, and are where fragmenting alone decides).

The same three for a node's host memory, where optimizer offloading keeps its state (`host_verdict`).
"""

from __future__ import annotations

from typing import NamedTuple

from offloaddoctor.byte_units import GIB, MIB
from offloaddoctor.memory import calibration as cal
from offloaddoctor.memory.activations import activation_bytes, score_elements
from offloaddoctor.memory.model import MemoryEstimate
from offloaddoctor.memory.shape import RunShape

FITS, TIGHT, DOES_NOT_FIT = "fits", "tight", "does not fit"


class FitVerdict(NamedTuple):
    status: str
    limit_bytes: float  # what PyTorch may reserve: the budget less the driver's share and the CUDA context
    needed_bytes: float  # worst case: the peak with the uncertain terms, times the slack assumed
    best_case_bytes: float  # the peak without them, times the squeezed slack
    slack: float
    uncollected_bytes: float
    reasons: tuple[str, ...]
    routed_excess_bytes: float = 0.0  # the router's imbalance across expert-parallel ranks, in needed_bytes
    fragmentation_bytes: float = 0.0  # score tensors' fragmentation allowed for in needed_bytes, where it decides

    @property
    def headroom_bytes(self) -> float:
        """Room left in the worst case (negative: short by that much)."""
        return self.limit_bytes - self.needed_bytes

    @property
    def short_if_never_collected_bytes(self) -> float:
        """How far even the squeezed peak is over the limit if Python's collector never frees the optimizer's
        first build (0: within it)."""
        return max(0.0, self.best_case_bytes + self.uncollected_bytes * cal.SQUEEZED_SLACK - self.limit_bytes)

    @property
    def fits(self) -> bool:
        return self.status == FITS

    def sentence(self, budget: str = "GPU") -> str:
        """The verdict as every command words it (estimate, check's capacity rule, diagnose's OOM advice)."""
        imbalance = (
            f" + {self.routed_excess_bytes / MIB:,.0f} MiB for the router's imbalance across expert-parallel ranks"
            if self.routed_excess_bytes
            else ""
        )
        slack = (
            f"+ {self.fragmentation_bytes / MIB:,.0f} MiB for the allocator's fragmentation "
            f"({cal.FRAGMENTED_SCORE_TENSORS:g} of its attention-score tensors, without expandable segments)"
            if self.fragmentation_bytes
            else f"x {self.slack:g} allocator slack"
        )
        assumed = (
            f"PyTorch may reserve {self.limit_bytes / MIB:,.0f} MiB of it; assumed: the peak{imbalance} "
            f"x {1 + cal.MODEL_UNDERESTIMATE:g} for the model's error {slack}"
        )
        if self.status == FITS:
            return f"fits the {budget}: {self.headroom_bytes / MIB:,.0f} MiB to spare ({assumed})"
        if self.status == TIGHT:
            return (
                f"TIGHT on the {budget}: {self.best_case_bytes / MIB:,.0f} to {self.needed_bytes / MIB:,.0f} MiB "
                f"needed, {assumed}; {'; '.join(self.reasons)}"
            )
        return (
            f"DOES NOT FIT the {budget}: {-self.headroom_bytes / MIB:,.0f} MiB short; even the best case, "
            f"{self.best_case_bytes / MIB:,.0f} MiB, is over ({assumed})"
        )


def fits(result: MemoryEstimate, budget_bytes: float) -> bool:
    """The verdict is "fits": the worst case, with the allocator's slack, is within the budget."""
    return verdict(result, budget_bytes).fits


def context_bytes(several_gpus: bool) -> float:
    """What the CUDA context, library handles and NCCL take on a GPU, outside PyTorch's allocator."""
    return (cal.NON_PYTORCH_MIB_SEVERAL_GPUS[0] if several_gpus else cal.NON_PYTORCH_MIB_ONE_GPU[0]) * MIB


def pytorch_limit(budget_bytes: float, several_gpus: bool) -> float:
    """What PyTorch's allocator may reserve when the GPU (or the target) holds `budget_bytes`."""
    return budget_bytes - cal.DRIVER_RESERVED_MIB * MIB - context_bytes(several_gpus)


def budget_for(limit: float, several_gpus: bool) -> float:
    """The GPU size (as nvidia-smi counts it) on which PyTorch may reserve `limit`: pytorch_limit's inverse."""
    return limit + cal.DRIVER_RESERVED_MIB * MIB + context_bytes(several_gpus)


def fragmentation_allowance(shape: RunShape) -> float:
    """What "fits" allows over the peak for the unfused attention's score tensors fragmenting the allocator's cache
    (calibration.FRAGMENTED_SCORE_TENSORS); nothing with flash attention or expandable segments."""
    if shape.flash_attention or shape.expandable_segments:
        return 0.0
    return cal.FRAGMENTED_SCORE_TENSORS * activation_bytes(shape) * score_elements(shape)


def fits_only_with_expandable_segments(result: MemoryEstimate, budget_bytes: float) -> bool:
    """Does not fit as configured, only because of what the allocator's cache fragmenting costs, which
    PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True takes away: the unfused attention's score tensors
    (fragmentation_allowance) or a MoE layer's routed tensors of a new size every step (calibration.fit_slack)."""
    if result.shape.expandable_segments or fits(result, budget_bytes):
        return False
    return fits(with_expandable_segments(result), budget_bytes)


def with_expandable_segments(result: MemoryEstimate) -> MemoryEstimate:
    """The same estimate for the run with expandable segments on: the peak is the same, the verdict's slack not."""
    return result._replace(shape=result.shape.with_changes(expandable_segments=True))


def verdict(result: MemoryEstimate, budget_bytes: float) -> FitVerdict:
    """The verdict for a GPU (or a target) of `budget_bytes` as nvidia-smi counts it."""
    return verdict_within(result, pytorch_limit(budget_bytes, result.shape.world_size > 1))


def verdict_within(result: MemoryEstimate, limit: float) -> FitVerdict:
    """The verdict when PyTorch may reserve `limit` bytes (an OOM message's card less the CUDA context, or a
    per-process memory fraction)."""
    error = cal.MODEL_UNDERESTIMATE
    slack = cal.fit_slack(result.shape)
    margin = (1 + error) * slack  # the model's error and the allocator's slack
    excess = cal.routed_imbalance(result.shape)
    imbalanced = result.peak_with_routed_excess_bytes(excess)
    routed_excess = imbalanced - result.peak_allocated_bytes
    slack_only = imbalanced * margin
    fragments = fragmentation_allowance(result.shape)
    with_fragments = imbalanced * (1 + error) + fragments
    fragmented = with_fragments > slack_only
    worst = max(with_fragments, slack_only)
    collected = result.peak_allocated_if_collected_bytes
    best = collected * cal.SQUEEZED_SLACK
    uncollected = result.peak_allocated_bytes - collected
    reasons: list[str] = []
    if worst <= limit:
        status = FITS
    elif best > limit:
        status = DOES_NOT_FIT
    else:
        status = TIGHT
        moe = _moe_deciders(excess if routed_excess else 0.0, slack, result.shape.moe_expert_capacity_factor)
        if fragmented and slack_only <= limit:
            reasons.append(
                f"its {fragments / cal.FRAGMENTED_SCORE_TENSORS / MIB:,.0f} MiB attention-score tensors fragment "
                "the allocator's cache without expandable segments (a run with 8,192 MiB ones ran out of memory with "
                "1.8 of them reserved but unallocated, in one of two tries); the peak "
                f"x {1 + error:g} x {slack:g} fits: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True makes it fit"
            )
        elif moe and not uncollected:
            if result.peak_allocated_bytes * (1 + error) * cal.FIT_SLACK <= limit:
                reasons.append("the peak with balanced experts and a dense run's allocator slack fits")
            else:
                moe.append("the model's error")
            reasons.append("what decides: " + " and ".join(moe))
        elif uncollected and collected * margin <= limit:
            reasons.append(
                f"fits only if Python's garbage collector frees the optimizer's first build "
                f"({uncollected / MIB:,.0f} MiB) before the first step: --manual-gc frees it for sure"
            )
        elif uncollected:
            reasons.append(
                f"{uncollected / MIB:,.0f} MiB of the peak is the optimizer's first build, freed only by "
                "Python's garbage collector (--manual-gc frees it before training); even without it, the "
                "allocator's slack decides"
            )
        else:
            reasons.append(
                f"within the allocator's slack and the model's error: the peak fits, the peak "
                f"x {1 + error:g} x {slack:g} does not; the model's error and fragmentation decide "
                "(PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True may be needed)"
            )
    return FitVerdict(
        status, limit, worst, best, slack, uncollected, tuple(reasons), routed_excess, fragments if fragmented else 0.0
    )


def _moe_deciders(excess: float, slack: float, capacity: float | None) -> list[str]:
    """What a MoE run's *tight* turns on beyond a dense run's: the router's balance (`excess`: the routed tokens'
    imbalance allowed for, 0 when it adds nothing; `capacity`: the run's capacity factor), the allocator's slack."""
    deciders = []
    if excess and capacity is not None:
        deciders.append(
            f"the router's balance (a rank sent {excess:.0%} more than its share of routed tokens, all its "
            f"capacity factor {capacity:g} lets through, does not fit)"
        )
    elif excess:
        deciders.append(
            f"the router's balance (a rank sent {excess:.0%} more than its share of "
            "routed tokens, as measured without an auxiliary loss, does not fit; a capacity factor, "
            "--moe-expert-capacity-factor, drops what is over it, with aux_loss or none load balancing: "
            "megatron-core refuses it with sinkhorn)"
        )
    if slack > cal.FIT_SLACK:
        deciders.append(
            f"the allocator's slack (a MoE layer's routed tensors change size every step and fragment its cache: "
            f"x {slack:g} assumed, up to x 1.15 measured; PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True kept "
            "it near x 1.01)"
        )
    return deciders


class HostVerdict(NamedTuple):
    """Will a node's memory hold its ranks' offloaded optimizer state? As memory/fit.py's verdict for the GPU:
    fits with the model's error counted, does not fit even without it, tight in between."""

    status: str
    needed_bytes: float  # the node's: its ranks' figure
    host_bytes: float
    ranks: int
    over: float = 0.0  # how far over the figure was measured for this layout (tensor parallelism)

    @property
    def fits(self) -> bool:
        return self.status == FITS

    def sentence(self) -> str:
        need = f"{self.needed_bytes / GIB:,.0f} GiB for {self.ranks} rank{'s' if self.ranks > 1 else ''}"
        host = f"the host's {self.host_bytes / GIB:,.0f} GiB"
        if self.status == FITS:
            return f"fits the host: {need} of {host}"
        error = f"the model's error on runs it was not fitted on: ±{cal.HOST_MODEL_ERROR:.0%}" + (
            f", and up to {self.over:.0%} over under tensor parallelism" if self.over else ""
        )
        if self.status == TIGHT:
            return f"TIGHT on the host: {need} against {host}, within {error}"
        return f"DOES NOT FIT the host: {need}, over {host} even at the low end of {error}"


def host_verdict(needed: float, host_bytes: float, ranks: int, over: float = 0.0) -> HostVerdict:
    """The verdict for a node of `host_bytes` available memory whose `ranks` ranks need `needed` together. `over`:
    how far the figure was measured over the host's account for this layout (tensor parallelism), which the low
    end allows for."""
    if needed * (1 + cal.HOST_MODEL_ERROR) <= host_bytes:
        status = FITS
    elif needed * (1 - cal.HOST_MODEL_ERROR) / (1 + over) > host_bytes:
        status = DOES_NOT_FIT
    else:
        status = TIGHT
    return HostVerdict(status, needed, host_bytes, ranks, over)
