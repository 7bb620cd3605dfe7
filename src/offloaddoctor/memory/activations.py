"""Activation memory of one transformer layer and one micro-batch, and how many are held at once.

The per-layer terms follow Korthikanti et al., "Reducing Activation Recomputation in Large Transformer
Models" (the formula behind Megatron's own estimate), written out tensor by tensor so that GQA, SwiGLU,
dropout, sequence/context parallelism, unfused attention scores and recompute each change the term they
change. Activations take 2 bytes an element in bf16/fp16 and 4 in fp32 (`activation_bytes`); dropout masks one.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from offloaddoctor.byte_units import MIB
from offloaddoctor.memory.shape import RunShape


class LayerActivations(NamedTuple):
    """Bytes saved for backward by one layer for one micro-batch, split by what recompute can drop."""

    linear: float  # inputs of norms, linear layers and activation functions, dropout masks
    core_attention: float  # attention scores, softmax, attention dropout (zero with flash attention)
    layer_input: float  # what full recompute keeps of a layer: its input
    attention_backward: float = 0.0  # gradient of the attention scores, while a recomputed layer's backward runs
    # The unfused attention core's backward without recompute: the score-sized gradients of the context matmul,
    # the softmax and the mask (6 B a score), less the dropout's mask and output (3 B), freed before them.
    core_backward: float = 0.0

    @property
    def total(self) -> float:
        return self.linear + self.core_attention


def activation_bytes(shape: RunShape) -> int:
    """Bytes of an activation element: a model trained in fp32 (neither bf16 nor fp16) computes in fp32."""
    return 4 if shape.precision == "fp32" else 2


def tokens_per_rank(shape: RunShape) -> float:
    return shape.seq_length / shape.context_parallel * shape.micro_batch_size


def score_elements(shape: RunShape) -> float:
    """Elements of one layer's attention-score tensor with the unfused attention: heads/TP x b x s/CP x s."""
    return shape.num_attention_heads / shape.tensor_parallel * tokens_per_rank(shape) * shape.seq_length


def layer_activations(shape: RunShape, routed_experts: bool = False) -> LayerActivations:
    t = shape.tensor_parallel
    sb = tokens_per_rank(shape)
    h = shape.hidden_size
    a = activation_bytes(shape)
    sp = t if shape.sequence_parallel else 1  # what SP shards: the tensors TP keeps whole
    hidden_mask = 1 if shape.hidden_dropout > 0 else 0
    q = shape.num_attention_heads * shape.head_dim
    kv = 2 * shape.heads_kv * shape.head_dim
    replicated = sb * h * (a + a + hidden_mask) / sp  # attention norm input, QKV input, dropout mask
    replicated += sb * h * (a + a + hidden_mask) / sp  # MLP norm input, fc1 input, dropout mask
    sharded = sb * (a * q + a * kv + a * q) / t  # Q, K and V, projection input
    if shape.rotary_position_embeddings:  # rotated Q and K are new tensors; V, a view, keeps the QKV output alive
        sharded += sb * (a * q + a * kv / 2) / t
    glu = 2 if shape.gated_linear_unit else 1
    if shape.num_experts and routed_experts:
        sharded += routed_expert_bytes(shape)
        replicated += router_bytes(shape)
        if shape.moe_shared_expert_intermediate_size:
            sharded += sb * (a * shape.moe_shared_expert_intermediate_size * (glu + 1)) / t
    else:
        sharded += sb * (a * shape.ffn * glu + a * shape.ffn) / t  # fc1 output, fc2 input
        if shape.gated_linear_unit and not shape.bias_activation_fusion:
            sharded += sb * _unfused_glu_outputs(shape.ffn, a) / t
    if shape.flash_attention:
        core = 4 * shape.num_attention_heads * sb / t  # fp32 softmax statistics only
    else:
        scores = score_elements(shape)
        dropout = 1 + a if shape.attention_dropout > 0 else 0  # its mask and output
        core = scores * (a + dropout)  # softmax out; mask + dropout out
        if shape.heads_kv < shape.num_attention_heads:  # unfused attention repeats grouped K/V to every head
            core += sb * a * (2 * q) / t
        backward = scores * (3 * a - dropout)
        return LayerActivations(replicated + sharded, core, a * sb * h / sp, a * scores, backward)
    return LayerActivations(replicated + sharded, core, a * sb * h / sp)


def routed_activations(shape: RunShape) -> LayerActivations:
    """The routed tokens' part of `layer_activations(shape, routed_experts=True)`: what one layer keeps that
    grows on a rank whose experts the router sends more than top-k x its tokens."""
    routed = routed_expert_bytes(shape) if shape.num_experts else 0.0
    return LayerActivations(routed, 0.0, 0.0)


def routed_expert_bytes(shape: RunShape) -> float:
    """Bytes one MoE layer saves for backward per micro-batch on a rank for the tokens its experts process: what
    megatron-core 0.19.0 keeps with the local experts (SequentialMLP) and a dispatcher that does not fuse
    permutation (no --moe-permute-fusion).

    Both dispatchers gather the tokens of the expert-tensor-parallel group (token_dispatcher.py: the allgather
    dispatcher over `tp_ep`, the alltoall one after its all-to-all over `expt_tp`), and each of its ranks holds
    1/ETP of every local expert's f: so a rank's experts process ETP x topk x its tokens (its tokens: s x b,
    over TP with sequence parallelism), exactly on one GPU; with expert parallelism, when the router balances
    them (a run without an auxiliary loss can send one rank more, and the measured peak moves with it); with a
    capacity factor, `shape.routed_token_share` of that. The f-sized tensors below are split over ETP.
    Per routed token:
    - 2h: the permuted copy of its hidden state, each expert's fc1 input (moe_utils.py `permute`:
      `tokens.index_select(0, sorted_indices)`, kept by the experts' linear_fc1: experts.py SequentialMLP.forward
      hands each expert a split of it; token_dispatcher.py MoEAllGatherTokenDispatcher.dispatch_postprocess, or
      after the all-to-all, MoEAlltoAllTokenDispatcher.dispatch_postprocess `sort_chunks_by_idxs`);
    - 2f x glu: fc1's output, the activation's input (mlp.py MLP.forward);
    - 2f: the activation's output, kept by the multiply by the router's probability, `intermediate_parallel *
      per_token_scale` (mlp.py MLP.forward), unless a fused gated activation takes the probability inside its
      kernel (`weighted_bias_swiglu_impl`); an unfused gated one keeps what `_unfused_glu_outputs` says besides;
    - 2f: fc2's input;
    - 8 + 2: the int64 index that sorts it (`permute`'s `sorted_indices`, kept by index_select and by
      `unpermute`'s scatter_add_) and its 16-bit probability, kept by the multiply.
    Nothing else is kept: the experts' outputs (torch.cat), the unpermuted sum (scatter_add_) and the
    all-to-all buffers are not saved for backward. Counted on CPU against megatron-core 0.16.1, whose saved
    tensors are the same for these paths (0.16.1's `permute` selects with masked_select, 0.19.0's with argsort).
    """
    f = shape.moe_ffn_hidden_size or shape.ffn
    a = activation_bytes(shape)
    glu = 2 if shape.gated_linear_unit else 1
    if not shape.gated_linear_unit:
        activation_outputs = a * f
    elif shape.bias_activation_fusion:
        activation_outputs = 0
    else:
        activation_outputs = _unfused_glu_outputs(f, a) + a * f
    etp = shape.expert_tensor_parallel_size or shape.tensor_parallel
    per_token = a * shape.hidden_size + (8 + a) + (a * f * glu + activation_outputs + a * f) / etp
    return _gathered_tokens(shape) * shape.moe_router_topk * shape.routed_token_share * per_token


def _gathered_tokens(shape: RunShape) -> float:
    """The tokens of a rank's expert-tensor-parallel group: ETP x the rank's own (s x b, over TP with sequence
    parallelism)."""
    own = tokens_per_rank(shape) / (shape.tensor_parallel if shape.sequence_parallel else 1)
    return own * (shape.expert_tensor_parallel_size or shape.tensor_parallel)


def _unfused_glu_outputs(f: int, a: int) -> int:
    """Bytes per token an unfused gated activation keeps besides fc1's output and fc2's input (mlp.py MLP.forward
    `glu`, megatron-core 0.19.0): the activation's output and `x_linear + glu_linear_offset` (a new tensor even
    when the offset is 0), both kept by their product. Counted on CPU (tools/count_moe_saved_tensors.py)."""
    return a * f + a * f


def router_bytes(shape: RunShape) -> float:
    """Bytes the router and the dispatcher's bookkeeping save for backward per micro-batch on a rank (megatron-core
    0.19.0, unfused router): per token of its own, the int64 top-k indices (moe_utils.py
    `topk_routing_with_score_function`, kept by torch.topk's and scatter's backward) and the fp32 softmax output
    (`softmax(..., dtype=torch.float32)`: over the top-k scores, or over every expert with --moe-router-pre-softmax);
    then the allgather dispatcher's `local_probs.T.contiguous().masked_select(local_map.T.contiguous())` keeps its
    16-bit input and bool mask over the tokens it gathered from the TP x EP group, its local experts' columns
    (token_dispatcher.py MoEAllGatherTokenDispatcher.dispatch_postprocess: ETP x the rank's tokens x every expert),
    the alltoall dispatcher's `probs.T.contiguous().reshape(-1)[flat_sorted]` the int64 argsort of its own tokens
    over every expert (moe_utils.py `permute`)."""
    experts = shape.num_experts or 0
    topk = shape.moe_router_topk
    softmax = 4 * (experts if shape.moe_router_pre_softmax else topk)
    own = tokens_per_rank(shape) / (shape.tensor_parallel if shape.sequence_parallel else 1)
    if shape.moe_token_dispatcher_type == "alltoall":
        return own * (8 * topk + softmax + 8 * experts)
    return own * (8 * topk + softmax) + _gathered_tokens(shape) * (activation_bytes(shape) + 1) * experts


def micro_batches_in_flight(shape: RunShape, stage: int) -> float:
    """Micro-batches whose activations a pipeline stage holds at its peak (1F1B; interleaved with VPP)."""
    p = shape.pipeline_parallel
    if p == 1:
        return 1
    micro = shape.num_microbatches
    if shape.virtual_pipeline and shape.virtual_pipeline > 1:
        # Megatron's interleaved schedule (pipeline_parallel/schedules.py, get_pp_rank_microbatches): rank r
        # runs (p - r - 1) x 2 + (v - 1) x p model-chunk forwards before its first backward, so it holds one
        # more than that; each chunk holds 1/v of the stage's layers (microbatch_group_size_per_vp_stage = p).
        v = shape.virtual_pipeline
        chunks = (p - stage - 1) * 2 + (v - 1) * p + 1
        if micro is not None:
            chunks = min(chunks, micro * v)
        return chunks / v
    held = p - stage
    return held if micro is None else min(micro, held)


def in_flight_words(shape: RunShape, stage: int, layers: int) -> str:
    """What a stage holds in flight, in words: micro-batches, or with VPP the model chunks (a fraction of
    micro-batches reads badly: 7 chunks of 4 layers, not 2.33333 micro-batches)."""
    in_flight = micro_batches_in_flight(shape, stage)
    v = shape.virtual_pipeline or 1
    if v > 1 and layers % v == 0:
        chunks = round(in_flight * v)
        return f"{chunks} model chunk{'s' if chunks != 1 else ''} of {layers // v} layers in flight"
    return f"{in_flight:g} micro-batch{'es' if in_flight != 1 else ''} in flight"


def offloaded_layers(shape: RunShape, layers: int) -> int:
    """Layers of a stage whose activations activation offloading moves to the host (none with recompute, which
    Megatron refuses beside it; one layer always stays)."""
    return 0 if shape.recompute_granularity else min(shape.cpu_offloading_num_layers, max(0, layers - 1))


RECOMPUTED = "recomputed during one layer's or chunk's backward"
GRADIENTS = "of attention-score gradients during a layer's backward"


def stored_layers(shape: RunShape, layers: int, one: LayerActivations) -> tuple[float, float, str, str]:
    """For `layers` layers of a stage and one micro-batch: (bytes kept from forward to backward, bytes one layer's
    or chunk's backward adds, which never coexist with the logits), how, and what those added bytes are."""
    granularity = shape.recompute_granularity
    if granularity == "full":
        chunk = min(layers, max(1, shape.recompute_num_layers or 1))
        if shape.recompute_method == "block":
            kept = chunk * one.layer_input + (layers - chunk) * one.total
            # Block recompute checkpoints each of its layers on its own: one layer is recomputed at a time.
            how = (
                f"full recompute of {chunk} of {layers} layers (block): their {chunk} inputs of "
                f"{one.layer_input / MIB:,.1f} MiB kept, the other layers' whole"
            )
            return kept, one.total + one.attention_backward, how, RECOMPUTED
        checkpoints = math.ceil(layers / chunk)
        transient = chunk * one.total + one.attention_backward
        how = (
            f"full recompute in chunks of {chunk} layers: {checkpoints} chunk inputs of {one.layer_input / MIB:,.1f} "
            "MiB kept"
        )
        return checkpoints * one.layer_input, transient, how, RECOMPUTED
    if granularity == "selective":
        if "core_attn" in shape.recompute_modules:
            # The recomputed attention core and its gradient exist during one layer's backward.
            transient = one.core_attention + one.attention_backward
            how = f"selective recompute of the attention core: {one.linear / MIB:,.1f} MiB a layer kept"
            return layers * one.linear, transient, how, RECOMPUTED
        return layers * one.total, one.core_backward, "selective recompute outside the attention core", GRADIENTS
    offloaded = offloaded_layers(shape, layers)
    if offloaded:
        # Offloaded layers leave the GPU; one layer's worth is in flight to or from the host.
        how = f"{offloaded} layers' activations offloaded to the CPU ({layers - offloaded + 1} layers' kept, one in flight)"
        return (layers - offloaded + 1) * one.total, one.core_backward, how, GRADIENTS
    # A layer's attention-core gradients exist during its backward, after the logits are freed (n81-n85, n06).
    return layers * one.total, one.core_backward, "every layer's activations kept", GRADIENTS
