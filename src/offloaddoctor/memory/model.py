"""The peak GPU memory of a Megatron-Core training run, component by component, for its most-loaded GPU.

`peak_allocated` is what `torch.cuda.max_memory_allocated()` reports once the optimizer has stepped (the
`max allocated` of Megatron's memory report from iteration 2 on). It is the larger of two moments:
forward/backward (parameters, gradients, optimizer state and the activations of every micro-batch in
flight, the logits on the last stage) and the optimizer step (the same state plus the optimizer's
temporaries). `reserved` and what nvidia-smi shows are derived from it with measured ratios.
"""

from __future__ import annotations

from typing import NamedTuple

from offloaddoctor.byte_units import GIB, MIB
from offloaddoctor.memory import calibration as cal
from offloaddoctor.memory.activations import (
    activation_bytes,
    in_flight_words,
    layer_activations,
    micro_batches_in_flight,
    routed_activations,
    score_elements,
    stored_layers,
    tokens_per_rank,
)
from offloaddoctor.memory.host import offload_host_bytes
from offloaddoctor.memory.offload_split import first_build_offloaded_share, offloaded_share
from offloaddoctor.memory.parameters import StageParameters, largest_tensor, stage_parameters
from offloaddoctor.memory.shape import RunShape

COMPONENTS = ("weights", "gradients", "optimizer_states", "activations", "logits", "other")
_DTYPE_NAMES = {2: "16-bit", 4: "fp32", 1: "8-bit"}


class Component(NamedTuple):
    name: str
    bytes: float
    formula: str


class StageEstimate(NamedTuple):
    stage: int
    parameters: StageParameters
    peak_bytes: float
    phase: str  # "forward/backward", "optimizer step" or "model set-up"
    components: tuple[Component, ...]
    forward_backward_bytes: float
    optimizer_step_bytes: float
    # The part of the peak that lasts only until Python's garbage collector runs (see _uncollected_first_build):
    # the peak is `peak_bytes` if it has not run before the first step, `peak_bytes - uncollected_bytes` if it has.
    uncollected_bytes: float = 0.0
    # The optimizer state on the GPU during training, whichever phase is the peak (none is at the model set-up).
    optimizer_states: Component | None = None
    # The routed tokens' share of the forward/backward activations: what the router's imbalance across
    # expert-parallel ranks can grow on one rank (memory/calibration.py routed_imbalance).
    routed_bytes: float = 0.0
    # Host memory the offloaded optimizer state takes on a rank of this stage (memory/host.py): the most, a rank that
    # builds the data loader (tensor-parallel rank 0 of the first and last stages), and the others'.
    host_bytes: float = 0.0
    host_bytes_no_loader: float = 0.0


class MemoryEstimate(NamedTuple):
    shape: RunShape
    stages: tuple[StageEstimate, ...]
    notes: tuple[str, ...] = ()

    @property
    def most_loaded(self) -> StageEstimate:
        return max(self.stages, key=lambda s: (s.peak_bytes, -s.stage))

    @property
    def peak_allocated_bytes(self) -> float:
        return self.most_loaded.peak_bytes

    @property
    def host_bytes(self) -> float:
        """Host memory a rank keeps for its offloaded optimizer state (the most of any pipeline stage)."""
        return max(s.host_bytes for s in self.stages)

    @property
    def host_bytes_other_ranks(self) -> float:
        """The most a rank that builds no data loader needs: tensor-parallel ranks other than 0, the middle pipeline
        stages; where there are none (every rank loads data), the same as `host_bytes`."""
        if self.shape.tensor_parallel > 1:
            return max(s.host_bytes_no_loader for s in self.stages)
        middle = self.stages[1:-1]
        return max(s.host_bytes for s in middle) if middle else self.host_bytes

    def host_bytes_for(self, ranks: int) -> float:
        """Host memory `ranks` ranks of a node need: the whole job's (every stage's ranks) where they are all of it,
        else the most a node's can: one rank in each tensor-parallel group (ranks are numbered tensor-parallel
        first) builds the data loader."""
        tp = self.shape.tensor_parallel
        if ranks >= self.shape.world_size:
            per_stage = self.shape.world_size / len(self.stages)
            return sum(s.host_bytes + (tp - 1) * s.host_bytes_no_loader for s in self.stages) * per_stage / tp
        loaders = min(ranks, -(-ranks // tp))
        loader_more = max(s.host_bytes - s.host_bytes_no_loader for s in self.stages)
        return ranks * max(s.host_bytes_no_loader for s in self.stages) + loaders * loader_more

    @property
    def peak_allocated_if_collected_bytes(self) -> float:
        """The peak when Python's garbage collector has freed the optimizer's first build before training."""
        return max(s.peak_bytes - s.uncollected_bytes for s in self.stages)

    @property
    def reserved_bytes(self) -> tuple[float, float, float]:
        """(estimate, low, high) of PyTorch's max reserved: allocator slack over the peak."""
        return tuple(self.peak_allocated_bytes * ratio for ratio in cal.RESERVED_OVER_ALLOCATED)  # type: ignore[return-value]

    @property
    def nvidia_smi_bytes(self) -> tuple[float, float, float]:
        """(estimate, low, high) of what nvidia-smi shows: reserved plus CUDA context, library handles, NCCL."""
        extra = cal.NON_PYTORCH_MIB_ONE_GPU if self.shape.world_size == 1 else cal.NON_PYTORCH_MIB_SEVERAL_GPUS
        reserved = self.reserved_bytes
        return tuple(r + mib * MIB for r, mib in zip(reserved, extra))  # type: ignore[return-value]

    def peak_with_routed_excess_bytes(self, excess: float) -> float:
        """The peak if every rank's routed tokens were `excess` (a fraction) more than the balanced share."""
        return max(max(s.peak_bytes, s.forward_backward_bytes + excess * s.routed_bytes) for s in self.stages)

    def component(self, name: str) -> Component:
        """One component of the most-loaded GPU at its peak."""
        return next(c for c in self.most_loaded.components if c.name == name)


def estimate(shape: RunShape) -> MemoryEstimate:
    return MemoryEstimate(shape, tuple(_stage(shape, params) for params in stage_parameters(shape)))


# Megatron-Core's mixed-precision Adam keeps, per parameter, an fp32 master weight and fp32 exp_avg and exp_avg_sq
# (OptimizerConfig main_params_dtype, exp_avg_dtype, exp_avg_sq_dtype default to torch.float32 in megatron-core
# 0.19.0): 4 + 4 + 4 bytes, what `optimizer_state_bytes_per_parameter` gives for RunShape's defaults.
DEFAULT_OPTIMIZER_STATE_BYTES_PER_PARAMETER = 4 + 4 + 4
# ... of which Adam's two moments, allocated at the optimizer's first step, not at its build (n16: max allocated
# 39,708 MiB in iteration 1, 46,388 from iteration 2, 8 B x its 875,466,752 parameters more).
DEFAULT_MOMENT_BYTES_PER_PARAMETER = 4 + 4


def optimizer_state_bytes_per_parameter(shape: RunShape | None = None) -> int:
    """Optimizer-state bytes per parameter before sharding and offloading: the fp32 master copy (none when the
    weights are fp32 already) plus Adam's two moments, in the dtypes the run sets. Without a shape (the config
    is not known): Megatron-Core's defaults for mixed precision, DEFAULT_OPTIMIZER_STATE_BYTES_PER_PARAMETER."""
    if shape is None:
        return DEFAULT_OPTIMIZER_STATE_BYTES_PER_PARAMETER
    master_bytes = 0 if shape.precision == "fp32" else shape.master_param_bytes
    return master_bytes + shape.exp_avg_bytes + shape.exp_avg_sq_bytes


def offloadable_state(shape: RunShape) -> Component:
    """The optimizer state per GPU that optimizer offloading can move, as if none were offloaded yet."""
    unloaded = estimate(shape.with_changes(optimizer_cpu_offload=False, offload_optimizer_states=False))
    states = unloaded.most_loaded.optimizer_states
    assert states is not None
    return states


def _stage(shape: RunShape, params: StageParameters) -> StageEstimate:
    p = shape.pipeline_parallel
    first, last = params.stage == 0, params.stage == p - 1
    count = params.total
    weight_bytes = 4 if shape.precision == "fp32" else 2
    grad_bytes = 4 if shape.grad_reduce_in_fp32 or shape.precision == "fp32" else 2
    master_bytes = 0 if shape.precision == "fp32" else shape.master_param_bytes
    state_bytes = optimizer_state_bytes_per_parameter(shape)
    on_gpu = 1.0 - offloaded_share(shape, params)
    shards = shape.optimizer_shards
    expert_shards = _expert_data_parallel(shape) if shape.distributed_optimizer else 1
    trained = shape.trained_share
    # per GPU, before offloading: what trains (frozen parameters have neither gradients nor optimizer state)
    optimizer_params = (params.dense / shards + params.expert / expert_shards) * trained
    states = optimizer_params * state_bytes * on_gpu
    # Optimizer-state offloading (PR 2811) moves the Adam moments to the host between steps.
    moments_resident = 0.0 if shape.offload_optimizer_states else 1.0
    moment_bytes = optimizer_params * (shape.exp_avg_bytes + shape.exp_avg_sq_bytes) * on_gpu
    states_forward = states - moment_bytes * (1 - moments_resident)
    uncollected = _uncollected_first_build(shape, params)
    states += uncollected
    states_forward += uncollected
    # 16-bit gradients: the precision-aware optimizer hands over the buffer's shard, which HybridDeviceOptimizer
    # (offloading) copies to fp32 for its GPU part; without it the distributed optimizer copies every shard at the step.
    sixteen_bit_grads = grad_bytes == 2
    held = sixteen_bit_grads and shape.precision_aware_optimizer and shape.optimizer_cpu_offload
    held_grad_copies = optimizer_params * on_gpu * cal.FP32_GRAD_COPY_BYTES if held else 0.0
    states += held_grad_copies
    states_forward += held_grad_copies
    # Without the precision-aware optimizer HybridDeviceOptimizer is handed the distributed optimizer's fp32 main
    # parameters: its host copies of the offloaded part leave those on the GPU.
    left_on_gpu = shape.optimizer_cpu_offload and not shape.precision_aware_optimizer
    masters_left = optimizer_params * master_bytes * (1 - on_gpu) if left_on_gpu else 0.0
    states += masters_left
    states_forward += masters_left

    weights = Component(
        "weights", count * weight_bytes, f"{count:,} parameters x {weight_bytes} B ({_DTYPE_NAMES[weight_bytes]})"
    )
    grads = Component(
        "gradients",
        count * trained * grad_bytes,
        f"{round(count * trained):,} parameters x {grad_bytes} B (main gradients, {_DTYPE_NAMES[grad_bytes]})"
        + (f": the {trained:.2%} that train" if trained < 1 else ""),
    )
    shard = f" per rank (the distributed optimizer's 1/{shards} shard)" if shards > 1 else ""
    state_formula = (
        f"{optimizer_params:,.0f} parameters{shard} x {state_bytes} B (fp32 master {master_bytes} + Adam "
        f"{shape.exp_avg_bytes}+{shape.exp_avg_sq_bytes})"
        + (f", {shape.gpu_offload_fraction:g} offloaded to the CPU" if shape.gpu_offload_fraction else "")
        + (
            f" ({1 - on_gpu:.3f} of the parameters: whole tensors move)"
            if abs((1 - on_gpu) - shape.gpu_offload_fraction) >= 0.0005
            else ""
        )
        + (
            f"; + {uncollected / MIB:,.0f} MiB: fp32 copies held by the HybridDeviceOptimizer Megatron builds "
            "first and replaces, until Python's garbage collector frees them (--manual-gc frees them before training)"
            if uncollected
            else ""
        )
        + (
            f"; + {masters_left / MIB:,.0f} MiB: the offloaded part's fp32 main parameters, which stay on the GPU "
            "without the precision-aware optimizer (HybridDeviceOptimizer copies them to the host)"
            if masters_left
            else ""
        )
        + (
            f"; + {held_grad_copies / MIB:,.0f} MiB: fp32 copies of the 16-bit gradients of the part on the GPU, "
            "which HybridDeviceOptimizer keeps from the first step on"
            if held_grad_copies
            else ""
        )
    )

    resident = float(cal.RESIDENT_OVERHEAD_BYTES)
    resident_formula = f"{cal.RESIDENT_OVERHEAD_BYTES // MIB} MiB workspaces and buffers"
    if not shape.flash_attention:
        resident += activation_bytes(shape) * score_elements(shape) * cal.LOCAL_ATTENTION_RESIDENT_SCORES
        resident_formula += " + one unfused attention-score tensor kept between iterations"

    activations, logits, activation_formula, routed = _activations(shape, params, first, last)
    forward_backward = weights.bytes + grads.bytes + states_forward + activations + logits + resident

    # With optimizer offloading Megatron passes fused=True to the GPU part's torch AdamW (optimizer/__init__.py
    # `optimizer_defaults`): the fused kernel takes no foreach temporary.
    foreach_adam = not shape.te_fused_adam and not shape.optimizer_cpu_offload
    adam_temporary = optimizer_params * on_gpu * cal.TORCH_ADAM_STEP_TEMPORARY_BYTES if foreach_adam else 0.0
    # Without Apex or TE gradient clipping scales each gradient through a temporary of its size (megatron-core's
    # local_multi_tensor_scale), before Adam's step: the largest gradient the optimizer is handed (n129's peak).
    handed_grad_bytes = grad_bytes if shape.precision_aware_optimizer else 4
    clipping = not shape.te_fused_adam and shape.clip_grad > 0
    largest = min(largest_tensor(shape, first, last), optimizer_params)
    clip_temporary = largest * handed_grad_bytes if clipping else 0.0
    step_temporary = max(adam_temporary, clip_temporary)
    step_grad_copies = sixteen_bit_grads and not shape.precision_aware_optimizer
    if step_grad_copies:
        step_temporary += optimizer_params * cal.FP32_GRAD_COPY_BYTES
    optimizer_step = weights.bytes + grads.bytes + states + step_temporary + resident

    set_up = _set_up_bytes(shape, weights.bytes, grads.bytes)
    state_forward = Component(
        "optimizer_states",
        states_forward,
        state_formula + ("; Adam moments on the host until the step" if shape.offload_optimizer_states else ""),
    )
    state_step = Component("optimizer_states", states, state_formula)
    training = max(forward_backward, optimizer_step)

    if set_up > training:
        phase = "model set-up"
        weights = Component(
            "weights",
            weights.bytes * (1 + trained),
            f"{weights.formula} x 2: the model's own tensors and the distributed optimizer's contiguous buffer "
            "they are copied into, both allocated while DDP builds its buffers"
            + (f" (the buffer holds the {trained:.2%} that train)" if trained < 1 else ""),
        )
        other = Component("other", 0.0, "not allocated yet")
        act = Component("activations", 0.0, f"not allocated yet ({activations / MIB:,.0f} MiB during training)")
        logit = Component("logits", 0.0, "not allocated yet")
        state = Component("optimizer_states", 0.0, "not built yet")
    elif forward_backward >= optimizer_step:
        phase = "forward/backward"
        other = Component("other", resident, resident_formula)
        act = Component("activations", activations, activation_formula)
        logit = Component("logits", logits, _logits_formula(shape) if logits else _no_logits(last))
        state = state_forward
    else:
        phase = "optimizer step"
        temp = ""
        if adam_temporary and adam_temporary >= clip_temporary:
            temp = "torch foreach Adam temporary (4 B/parameter)"
        elif clip_temporary:
            temp = f"gradient clipping's temporary of the largest gradient ({clip_temporary / MIB:,.0f} MiB)"
        if step_grad_copies:
            temp += (" + " if temp else "") + "fp32 copies of the 16-bit main gradients (4 B/parameter)"
        other = Component("other", resident + step_temporary, f"{resident_formula} + {temp}")
        act = Component(
            "activations",
            0.0,
            f"freed before the step ({activations / MIB:,.0f} MiB during "
            "forward/backward, less than the step's temporaries)",
        )
        logit = Component("logits", 0.0, "freed before the step")
        state = state_step
    components = (weights, grads, state, act, logit, other)
    peak = max(training, set_up)
    return StageEstimate(
        params.stage,
        params,
        peak,
        phase,
        components,
        forward_backward,
        optimizer_step,
        peak - max(training - uncollected, set_up),  # the first build is made after the set-up
        state_forward if forward_backward >= optimizer_step else state_step,
        routed,
        offload_host_bytes(shape, params, optimizer_params * (1 - on_gpu), loads_data=first or last),
        offload_host_bytes(shape, params, optimizer_params * (1 - on_gpu), loads_data=False),
    )


def _set_up_bytes(shape: RunShape, weight_bytes: float, grad_bytes: float) -> float:
    """The peak while DDP builds its buffers, before the optimizer exists.

    With the distributed optimizer, megatron-core 0.19 `_ParamAndGradBuffer` allocates a contiguous parameter
    buffer and the gradient buffer, then copies each parameter into the first and frees the original
    (param_and_grad_buffer.py: `param.data = new_param_data ... del old_param_data`): the weights are held twice
    next to the gradients. Measured with the CUDA allocator's trace (6.66B GPT, optimizer fully offloaded, full
    recompute): the run's peak was this moment, 2 x 12,700 + 25,400 MiB (50,802 MiB measured). Without the
    distributed optimizer the parameters are not re-mapped and nothing is held twice.
    """
    # (the contiguous buffer holds only what trains: DDP leaves frozen parameters out of its buffers)
    return weight_bytes * (1 + shape.trained_share) + grad_bytes if shape.distributed_optimizer else 0.0


def _uncollected_first_build(shape: RunShape, params: StageParameters) -> float:
    """Optimizer offloading builds its HybridDeviceOptimizer twice; the first build can outlive its use.

    megatron-core 0.19 `get_megatron_optimizer` builds a HybridDeviceOptimizer over the model's own parameters
    (not the distributed optimizer's shards), and `DistributedOptimizer.__init__` replaces it with one over the
    shards (distrib_optimizer.py: `self.optimizer = HybridDeviceOptimizer(...)`). The first build made an fp32
    copy of every parameter it keeps on the GPU (`param_update_in_fp32=True`: `param.detach().clone().float()`)
    and registered step hooks whose closures point back at it: a reference cycle, freed only when Python's
    cyclic garbage collector runs. Measured (fixtures/offload-sweep): 4 B per GPU-kept parameter stayed
    allocated through training on the 3.35B GPT and the 0.47B GPT, and was gone on the 5.1B Llama; with
    --manual-gc (a `gc.collect()` before the first iteration) it was gone every time.
    """
    if not shape.optimizer_cpu_offload or shape.manual_gc or shape.precision == "fp32":
        return 0.0
    return params.total * shape.master_param_bytes * (1.0 - first_build_offloaded_share(shape, params))


def _activations(shape: RunShape, params: StageParameters, first: bool, last: bool) -> tuple[float, float, str, float]:
    """(activations, logits, how, the routed tokens' share of the activations) of a stage at its forward/backward."""
    sb = tokens_per_rank(shape)
    h = shape.hidden_size
    in_flight = micro_batches_in_flight(shape, params.stage)
    one = layer_activations(shape, routed_experts=bool(shape.num_experts))
    kept, transient, how, transient_is = stored_layers(shape, params.layers, one)
    routed_kept, routed_transient, _, _ = stored_layers(shape, params.layers, routed_activations(shape))
    kept *= in_flight
    routed = routed_kept * in_flight
    extras = 0.0
    wide = activation_bytes(shape) / 2  # the stages' own tensors were measured in 16 bits
    if first:
        extras += cal.FIRST_STAGE_BYTES_PER_TOKEN_HIDDEN * wide * sb * h * in_flight
    logits = 0.0
    if last:
        extras += cal.LAST_STAGE_BYTES_PER_TOKEN_HIDDEN * wide * sb * h
        logits = _logits_bytes(shape) * sb * shape.padded_vocab_size / shape.tensor_parallel
    # What a layer's or chunk's backward adds comes after the logits are freed: the larger of the two counts.
    recomputed = ""
    if transient > logits:
        logits_counted, activations = 0.0, kept + extras + transient
        routed += routed_transient
        recomputed = f"; + {transient / MIB:,.1f} MiB {transient_is}"
    else:
        logits_counted, activations = logits, kept + extras
    formula = (
        f"{params.layers} layers x {one.total / MIB:,.1f} MiB per layer and micro-batch "
        f"({'flash attention' if shape.flash_attention else 'unfused attention: scores O(s^2)'}), {how}"
        + (f", {in_flight_words(shape, params.stage, params.layers)}" if in_flight != 1 else "")
        + (f", {_capacity_words(shape)}" if shape.routed_token_share != 1 else "")
        + recomputed
        + (
            f"; + {extras / MIB:,.1f} MiB of the first/last stage's own tensors (embedding, final norm)"
            if extras
            else ""
        )
    )
    return activations, logits_counted, formula, routed


def _capacity_words(shape: RunShape) -> str:
    how = "padded to" if shape.padded_to_capacity else "at most"
    return f"routed tokens {how} x {shape.routed_token_share:g} (capacity factor {shape.moe_expert_capacity_factor:g})"


def _no_logits(last: bool) -> str:
    if last:  # _activations counted the larger backward transient instead
        return "freed before a layer's backward, whose larger transient the activations count"
    return "not on this pipeline stage"


def _logits_bytes(shape: RunShape) -> int:
    """In fp32 the cross entropy's `.float()` is the logits themselves, shifted and exponentiated in place
    (megatron-core tensor_parallel/cross_entropy.py): no copy beside them."""
    return cal.FP32_LOGITS_BYTES_PER_ELEMENT if shape.precision == "fp32" else cal.LOGITS_BYTES_PER_ELEMENT


def _logits_formula(shape: RunShape) -> str:
    kept = "fp32 logits, the loss computed in place" if shape.precision == "fp32" else "16-bit logits + fp32 loss copy"
    return (
        f"{_logits_bytes(shape)} B x {tokens_per_rank(shape):,.0f} tokens x "
        f"{shape.padded_vocab_size:,}/{shape.tensor_parallel} vocabulary ({kept})"
    )


def _expert_data_parallel(shape: RunShape) -> int:
    etp = shape.expert_tensor_parallel_size or shape.tensor_parallel
    ranks = shape.data_parallel * shape.tensor_parallel * shape.context_parallel
    return max(1, ranks // (shape.expert_model_parallel_size * etp))


def why_most_loaded(result: MemoryEstimate) -> str:
    """Why the most-loaded pipeline stage is the most loaded ("" with one stage): its layers, micro-batches in
    flight under the schedule, and what only it holds (the embedding, the output layer and logits)."""
    shape, stage = result.shape, result.most_loaded
    if len(result.stages) < 2:
        return ""
    others = [s for s in result.stages if s is not stage]
    runner_up = max(others, key=lambda s: s.peak_bytes)
    schedule = (
        f"interleaved 1F1B with {shape.virtual_pipeline} virtual stages"
        if shape.virtual_pipeline and shape.virtual_pipeline > 1
        else "1F1B"
    )
    holds = []
    if stage.stage == 0:
        holds.append("the embedding")
    if stage.stage == shape.pipeline_parallel - 1:
        holds.append("the output layer and the logits")
    if stage.phase == "model set-up":  # activations are not allocated yet: its weights are the peak
        return (
            f"stage {stage.stage} ({stage.peak_bytes / MIB:,.0f} MiB; next stage {runner_up.stage}: "
            f"{runner_up.peak_bytes / MIB:,.0f} MiB): {stage.parameters.total:,} parameters, held twice while DDP "
            "builds its buffers" + (f" ({' and '.join(holds)} among them)" if stage.stage == 0 else "")
        )
    return (
        f"stage {stage.stage} ({stage.peak_bytes / MIB:,.0f} MiB; next stage {runner_up.stage}: "
        f"{runner_up.peak_bytes / MIB:,.0f} MiB): {stage.parameters.layers} layers, "
        f"{in_flight_words(shape, stage.stage, stage.parameters.layers)} ({schedule})"
        + (f", and {' and '.join(holds)}" if holds else "")
    )


def host_memory_sentence(result: MemoryEstimate) -> str:
    """What optimizer offloading keeps in host memory, as the reports say it; "" without offloading."""
    if not result.host_bytes:
        return ""
    others = result.host_bytes_other_ranks
    if others < result.host_bytes:
        return (
            f"about {result.host_bytes / GIB:,.0f} GiB a rank that builds the data loader (tensor-parallel rank 0 of "
            f"the first and last stages, its workers keeping part of it) and {others / GIB:,.0f} GiB each other rank "
            "in host memory for optimizer offloading (measured on real runs: the offloaded state, PyTorch's pinned "
            "buffers and the process): the node must hold its ranks' together"
        )
    return (
        f"about {result.host_bytes / GIB:,.0f} GiB a rank in host memory for optimizer offloading (measured on real "
        "runs: the offloaded state, PyTorch's pinned buffers and the process): the node must hold it for each of its "
        "ranks"
    )
