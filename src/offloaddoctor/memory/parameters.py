"""Parameter counts per pipeline stage and tensor-parallel rank, the way Megatron-Core builds a GPT model.

Checked against the `number of parameters on (tensor, pipeline) model parallel rank` lines of every
recorded run (fixtures/memory-calibration): equal to the parameter.
"""

from __future__ import annotations

from typing import NamedTuple

from offloaddoctor.memory.shape import RunShape


class StageParameters(NamedTuple):
    """Parameters one GPU of a pipeline stage holds: `dense` is sharded by the distributed optimizer over
    DP x CP, `expert` over the expert-data-parallel ranks."""

    stage: int
    layers: int
    dense: int
    expert: int

    @property
    def total(self) -> int:
        return self.dense + self.expert


def layers_per_stage(shape: RunShape) -> list[int]:
    p, first, last = shape.pipeline_parallel, shape.first_stage_layers, shape.last_stage_layers
    if p == 1:
        return [shape.num_layers]
    counts = [0] * p
    remaining, middle = shape.num_layers, list(range(p))
    if first is not None:
        counts[0], remaining, middle = first, remaining - first, middle[1:]
    if last is not None:
        counts[-1], remaining, middle = last, remaining - last, middle[:-1]
    for index, stage in enumerate(middle):
        counts[stage] = remaining // len(middle) + (1 if index < remaining % len(middle) else 0)
    return counts


def dense_layer_parameters(shape: RunShape) -> tuple[int, int]:
    """(sharded by TP, replicated) parameters of one transformer layer, experts excluded."""
    h, t = shape.hidden_size, shape.tensor_parallel
    q = shape.num_attention_heads * shape.head_dim
    kv = 2 * shape.heads_kv * shape.head_dim
    bias = shape.add_bias_linear
    glu = 2 if shape.gated_linear_unit else 1
    norm = 2 * h if shape.normalization == "LayerNorm" else h
    attention = h * (q + kv) + (q + kv if bias else 0) + q * h
    replicated = 2 * norm + (h if bias else 0)  # two norms, the row-parallel projection's bias
    if shape.num_experts:
        mlp = 0
        if shape.moe_shared_expert_intermediate_size:
            mlp = (
                3 * h * shape.moe_shared_expert_intermediate_size
                if glu == 2
                else 2 * h * shape.moe_shared_expert_intermediate_size
            )
        replicated += h * shape.num_experts  # router
    else:
        f = shape.ffn
        mlp = h * f * glu + (f * glu if bias else 0) + f * h
        replicated += h if bias else 0  # fc2 bias
    return (attention + mlp) // t, replicated


def expert_layer_parameters(shape: RunShape) -> int:
    """Routed-expert parameters of one MoE layer on one GPU (sharded by EP and expert TP)."""
    if not shape.num_experts:
        return 0
    f = shape.moe_ffn_hidden_size or shape.ffn
    glu = 2 if shape.gated_linear_unit else 1
    per_expert = shape.hidden_size * f * glu + f * shape.hidden_size
    etp = shape.expert_tensor_parallel_size or shape.tensor_parallel
    return shape.num_experts * per_expert // (shape.expert_model_parallel_size * etp)


def stage_parameters(shape: RunShape) -> list[StageParameters]:
    h, t, p = shape.hidden_size, shape.tensor_parallel, shape.pipeline_parallel
    sharded, replicated = dense_layer_parameters(shape)
    expert = expert_layer_parameters(shape)
    embedding = shape.padded_vocab_size * h // t
    norm = 2 * h if shape.normalization == "LayerNorm" else h
    stages = []
    for stage, layers in enumerate(layers_per_stage(shape)):
        dense = layers * (sharded + replicated)
        if stage == 0:
            dense += embedding
            if shape.learned_position_embeddings:
                dense += (shape.max_position_embeddings or shape.seq_length) * h
        if stage == p - 1:
            dense += norm
            if not shape.tied_embeddings or p > 1:
                dense += embedding  # the output layer (a copy of the word embeddings when tied)
        stages.append(StageParameters(stage, layers, dense, layers * expert))
    return stages


def largest_tensor(shape: RunShape, first: bool, last: bool) -> int:
    """The elements of the largest single parameter on a stage: what a temporary made tensor by tensor is sized by."""
    h, t = shape.hidden_size, shape.tensor_parallel
    glu = 2 if shape.gated_linear_unit else 1
    sizes = [h * (shape.num_attention_heads + 2 * shape.heads_kv) * shape.head_dim // t]  # the fused QKV projection
    if shape.num_experts:
        f = shape.moe_ffn_hidden_size or shape.ffn
        sizes.append(h * f * glu // (shape.expert_tensor_parallel_size or t))
        if shape.moe_shared_expert_intermediate_size:
            sizes.append(h * shape.moe_shared_expert_intermediate_size * glu // t)
    else:
        sizes.append(h * shape.ffn * glu // t)
    if first or (last and (not shape.tied_embeddings or shape.pipeline_parallel > 1)):
        sizes.append(shape.padded_vocab_size * h // t)
    return max(sizes)
