"""Which parameters optimizer offloading really moves to the CPU: whole tensors, in Megatron's order.

megatron-core 0.19 `HybridDeviceOptimizer._get_sub_optimizer_param_groups` walks the parameter groups in
order and moves each tensor to the CPU while the numel moved so far is below `fraction` x the total: the
tensor that crosses the threshold goes too, so the real share is the fraction rounded up to a tensor.
The groups are the distributed optimizer's: weight-decayed (2-D) parameters first, then biases and 1-D
parameters (`get_standard_config_overrides`: wd_mult 0), each in the gradient buffer's order, which is the
reverse of the model's (`param_and_grad_buffer.py`: `for param in params[::-1]`): the output layer (untied),
the transformer layers from the last to the first (fc2, fc1, QKV, projection), the position and the word
embeddings. With a 128k vocabulary an embedding is a tenth of a 4B model: at fraction 0.9 the whole model but
its norms went to the CPU (fixtures/offload-sweep a-llama4b-gqa-f050-2).

Only one GPU's whole tensors follow this order: when the distributed optimizer shards the buffer over
several ranks (DP x CP > 1), or for MoE layers, the nominal fraction is used.
"""

from __future__ import annotations

from offloaddoctor.memory.parameters import StageParameters
from offloaddoctor.memory.shape import RunShape


# Tensor sizes as runs: (block, times) is the block's tensors `times` times over (a layer's, once per layer), so
# that walking them costs the same for 32 layers as for a mistyped 10**12.
Runs = list[tuple[tuple[int, ...], int]]


def offloaded_share(shape: RunShape, params: StageParameters) -> float:
    """The share of this GPU's optimizer parameters updated on the CPU (0 without optimizer offloading)."""
    if shape.optimizer_shards > 1:
        return shape.gpu_offload_fraction
    weights, flat = _tensor_groups(shape, params)
    return _walk(shape, params, weights + flat)[0]


def pinned_rounding(shape: RunShape, params: StageParameters) -> float:
    """What PyTorch's pinned-memory allocator holds for the offloaded tensors' fp32 buffers, over their size.

    `CachingHostAllocator::allocate` (ATen/core/CachingHostAllocator.h, PyTorch 2.4-2.13) rounds every block up to
    a power of two: a 4096 x 11008 SwiGLU fc1's 361 MB gradient takes 512 MiB. Over the tensors offloading moves on
    one GPU; where the distributed optimizer shards them, or for MoE, over all of the stage's tensors (a rank's
    shard is mostly whole tensors). 1.0 for a layout this inventory does not know.
    """
    weights, flat = _tensor_groups(shape, params)
    if shape.optimizer_shards > 1 or shape.num_experts:
        shape = shape.with_changes(optimizer_offload_fraction=1.0, optimizer_cpu_offload=True)
    return _walk(shape, params, weights + flat)[1]


def first_build_offloaded_share(shape: RunShape, params: StageParameters) -> float:
    """The same for the HybridDeviceOptimizer Megatron builds first (memory/model.py `_uncollected_first_build`):
    it gets the model's own parameters, unsharded, in the model's order (`_get_param_groups`)."""
    weights, flat = _tensor_groups(shape, params)
    return _walk(shape, params, _reversed(weights) + _reversed(flat))[0]


def _reversed(runs: Runs) -> Runs:
    return [(block[::-1], times) for block, times in reversed(runs)]


def _walk(shape: RunShape, params: StageParameters, runs: Runs) -> tuple[float, float]:
    """(the share of the parameters moved, their fp32 buffers' pinned bytes over their size)."""
    fraction = shape.gpu_offload_fraction
    total = sum(sum(block) * times for block, times in runs)
    if total != params.total:  # a layout this inventory does not know: keep the nominal fraction
        return fraction, 1.0
    threshold = fraction * total if fraction < 1.0 and not shape.num_experts else float(total)
    moved, pinned = 0, 0
    for block, times in runs:
        size, block_pinned = sum(block), sum(_pinned(4 * numel) for numel in block)
        if size and times > 2:
            # Whole blocks that end two blocks short of the threshold all move: counted at once.
            whole = min(times, max(0, int((threshold - moved) // size) - 2))
            moved, pinned, times = moved + whole * size, pinned + whole * block_pinned, times - whole
        for _ in range(times):
            for numel in block:
                if moved >= threshold:
                    return _shares(shape, moved, total, pinned)
                moved, pinned = moved + numel, pinned + _pinned(4 * numel)
    return _shares(shape, moved, total, pinned)


def _shares(shape: RunShape, moved: int, total: int, pinned: int) -> tuple[float, float]:
    share = (
        shape.gpu_offload_fraction if shape.num_experts or shape.gpu_offload_fraction in (0.0, 1.0) else moved / total
    )
    return share, pinned / (4 * moved) if moved else 1.0


def _pinned(size: int) -> int:
    return 1 << (size - 1).bit_length() if size > 1 else size


def _tensor_groups(shape: RunShape, params: StageParameters) -> tuple[Runs, Runs]:
    """(2-D weights, biases and norms), each in the gradient buffer's order (the reverse of the model's)."""
    h, t = shape.hidden_size, shape.tensor_parallel
    q = shape.num_attention_heads * shape.head_dim
    kv = 2 * shape.heads_kv * shape.head_dim
    glu = 2 if shape.gated_linear_unit else 1
    f = shape.ffn
    bias = shape.add_bias_linear
    first, last = params.stage == 0, params.stage == shape.pipeline_parallel - 1
    embedding = shape.padded_vocab_size * h // t
    norm_params = 2 if shape.normalization == "LayerNorm" else 1  # weight (+ bias) of each norm

    weights: Runs = []  # 2-D, weight decay: in the buffer's order
    if last and (not shape.tied_embeddings or shape.pipeline_parallel > 1):
        weights.append(((embedding,), 1))
    weights.append(((f * h // t, h * f * glu // t, h * (q + kv) // t, q * h // t), params.layers))
    if first and shape.learned_position_embeddings:
        weights.append((((shape.max_position_embeddings or shape.seq_length) * h,), 1))
    if first:
        weights.append(((embedding,), 1))

    flat: Runs = []  # biases and norms, no weight decay
    if last:
        flat.append(((h,) * norm_params, 1))
    layer: tuple[int, ...] = (
        *[h] * (1 if bias else 0),  # fc2 bias (replicated)
        *[f * glu // t] * (1 if bias else 0),  # fc1 bias
        *[h] * norm_params,  # pre-MLP norm
        *[(q + kv) // t] * (1 if bias else 0),  # QKV bias
        *[h] * (1 if bias else 0),  # projection bias
        *[h] * norm_params,  # input norm
    )
    flat.append((layer, params.layers))
    return weights, flat
