"""What offloading the optimizer, selective recompute, TP and a smaller micro-batch cost in iteration time: measured
curves, interpolated between their points.
Dense runs: a 0.47B GPT on one H100 (fixtures/compare-family) to Qwen3-30B-A3B (the CPU-offloading guide). MoE
runs: Qwen3-30B-A3B to a MoE whose parameters, not its compute, set the step (fixtures/memory-calibration e52,
e55, e58: the CPU's Adam over the offloaded share grows with the parameters, the step's compute with the active
ones). The OOM fix (fix_numbers.py) and the memory model's changes (changes.py) both quote them."""

from __future__ import annotations

# (fraction, iteration-time ratio) measured.
SMALL_MODEL = ((0.0, 1.0), (0.25, 1.21), (0.5, 1.42), (1.0, 2.07))
GUIDE_MODEL = ((0.0, 1.0), (0.25, 1.9), (1.0, 4.2))
# 5.6B parameters, 40 experts of which 2 active, 1,024 tokens a GPU a step, two H200: median of iterations 4-12
# (402 ms without offloading, 1,120 ms at 0.15, 3,844 ms at 0.5); measured up to 0.5.
PARAMETER_BOUND_MOE = ((0.0, 1.0), (0.15, 2.78), (0.5, 9.56))
# Selective recompute of the attention core with the local implementation, which recomputes the materialised
# attention scores: (sequence / hidden, iteration-time ratio), one H100, median of iterations 4-14
# (fixtures/memory-calibration n23/n24 hidden 4096, n16/n17 hidden 2048, n21/n22 hidden 2048 at sequence 4096).
SELECTIVE_RECOMPUTE_LOCAL = ((0.5, 1.13), (1.0, 1.19), (2.0, 1.26))
# Doubling TP where DP halves, by the degree it doubles to, within a node. To 2: (hidden, iteration-time ratio),
# GPTs on two H200, median of iterations 4-12/14 (fixtures/memory-calibration n36/n38 hidden 2048, n44/n46 hidden
# 4096): the activations' all-reduces grow with the hidden size, the layers' compute with its square. To 4: the
# 3.35B GPT on four H200 (n47/n48). To 8: the memory-tuning guide's Llama3 70B, TP 4 -> 8 on 32 H100: -28.4 %
# TFLOP/s, 1 / (1 - 0.284) in step time.
TENSOR_PARALLEL_TO_2 = ((2048, 1.16), (4096, 1.03))
TENSOR_PARALLEL_TO_4 = 1.21
GUIDE_TENSOR_PARALLEL_TO_8 = 1 / (1 - 0.284)
# A smaller micro-batch at the same global batch, by how many times the micro-batches a step runs: (times,
# iteration-time ratio), median of iterations 4-14. Less than half: 1.02x at 4/3 (the 0.87B GPT 4 -> 3, n115/n116)
# and at 3/2 (e10's MoE 12 -> 8, e92/e93), measured after the advice came to cut to less than half, where it quoted
# "at most half's"; half: 1.04x-1.06x (n16/n19, n23/n25, n30/n31, n33/n34; H100 and H200); a quarter: 1.23x (e10's
# MoE 12 -> 3, e83/e84) and 1.28x (the 0.87B GPT 4 -> 1, n100/n101); a twelfth: 2.63x (the MoE 12 -> 1, e83/e85);
# one H100. Not measured beyond a twelfth. Hidden 2048, the dearest measured: a wider model's quarter stepped 1.10x
# (n23's 2B GPT, hidden 4096, n102/n103), where the curve says 1.255x.
MICRO_BATCH_CUT = ((1.0, 1.0), (4 / 3, 1.019), (1.5, 1.024), (2.0, 1.05), (4.0, 1.255), (12.0, 2.63))


# The tokens a step SMALL_MODEL was measured at (fixtures/compare-family: global batch 32 x sequence 1,024).
SMALL_MODEL_TOKENS = 32_768


# The share of optimizer offloading's added step time that stays when the distributed optimizer shards the offloaded
# state over more ranks (the rest shrinks with a rank's shard): least squares over t22's 5B Llama at DP 2 (n55,
# n57 against n52) and t18's 3.35B GPT at DP 4 (n60 against n58), 16 OpenMP threads a rank, two and four H200.
SHARDED_FIXED_SHARE = 0.36


def measured_slowdown(fraction: float, tokens_per_rank: int | None = None, optimizer_shards: int = 1) -> float:
    """Iteration-time ratio at an offload fraction, for ordering changes. A dense run whose tokens a step are known:
    the 0.47B GPT's curve, its excess over 1 scaled by 32,768 / the tokens a data-parallel rank steps over (the
    CPU's Adam grows with the offloaded parameters, the GPU's step with the parameters times the tokens), and by
    SHARDED_FIXED_SHARE + the rest / the ranks the distributed optimizer shards the state over. Held on runs not
    used to make it (last of three iterations unless said), all at DP 1: the 3.35B GPT at 4,096 tokens
    (fixtures/offload-sweep g1: 2.34x at 0.2, 3.8x at 0.4, 4.5x at 0.5; scaled 2.34x, 3.69x, 4.36x; the guide's
    1.72x, 2.36x, 2.67x) and at 8,192 (n33/n30, twelve iterations: 2.54x at 0.4, scaled 2.34x); a 3B Llama at PP 2,
    131,072 tokens (t21: 1.23x at 0.65 and 1.27x at 0.8, scaled 1.15x and 1.20x, the guide's 3.2x and 3.6x). Past
    0.5 over on g1 by up to 37 % (4.25x-5.07x at 0.6-0.75, scaled 5.40x-6.96x). Sharded, twelve iterations, with
    the host's cores over its GPUs as OpenMP threads a rank (16), as the advice sets them: t22 (a 5B Llama, 8,192
    tokens a rank, DP 2, two H200) 1.34x at 0.15 and 2.13x at 0.5 (n55, n57 / n52), t18's 3.35B GPT (4,096 tokens a
    rank, DP 4, four H200) 2.81x at 0.5 (n60 / n58): 1.34x, 2.14x, 2.75x with the shards (the points the share was
    fitted on), 1.50x, 2.68x, 4.36x without. Held out (planned with the share as committed, four H100 of a
    64-core host, each against its own base): the 3.35B GPT at DP 2 and 0.3 1.60x and 1.53x (n62, n72; quoted
    1.69x), t22 at DP 4 and 0.3 1.82x and 1.77x (n64, n69; quoted 2.05x), the 3.35B GPT at DP 4 and 0.25 1.89x (n66;
    quoted 1.87x): from 1 % under to 16 % over, where the unsharded curve was over by 25-71 %; on two H200 the
    3.35B GPT at DP 2 and 0.1, as `estimate` printed it, 1.30x (n74 / n73; quoted 1.23x): 6 % under. With torchrun's
    default of one thread a rank (it sets OMP_NUM_THREADS=1 when it starts several processes) the runs took 1.89x,
    3.73x, 4.39x (n54, n56, n59), 2.26x and 2.01x (n68, n71): 1.1-1.7x the quote. Otherwise, and for a MoE, the
    guide's Qwen3-30B-A3B curve."""
    if not tokens_per_rank:
        return _interpolate(GUIDE_MODEL, fraction)
    excess = (_interpolate(SMALL_MODEL, fraction) - 1) * SMALL_MODEL_TOKENS / tokens_per_rank
    return 1 + excess * (SHARDED_FIXED_SHARE + (1 - SHARDED_FIXED_SHARE) / max(1, optimizer_shards))


def expected_slowdown(
    fraction: float, moe: bool = False, tokens_per_rank: int | None = None, optimizer_shards: int = 1
) -> str:
    if not moe and tokens_per_rank:
        shards = f" and to the optimizer state's {optimizer_shards} shards" if optimizer_shards > 1 else ""
        return (
            f"~{measured_slowdown(fraction, tokens_per_rank, optimizer_shards):.1f}x (a 0.47B GPT's curve on an H100, "
            f"scaled from its {SMALL_MODEL_TOKENS:,} tokens a step to this run's {tokens_per_rank:,} a data-parallel "
            f"rank{shards}; on runs of 4,096-131,072 tokens within 16 % to fraction 0.5 and over by up to 37 % past "
            f"it; at DP 2-4, with OMP_NUM_THREADS at the host's cores over its GPUs, from 6 % under to 16 % over on "
            f"runs it was not fitted on, and 1.1-1.7x that with torchrun's 1) at fraction {fraction:g}"
        )
    if not moe:
        small, large = _interpolate(SMALL_MODEL, fraction), _interpolate(GUIDE_MODEL, fraction)
        return (
            f"~{small:.1f}x (0.47B GPT, H100) to ~{large:.1f}x (Qwen3-30B-A3B, the CPU-offloading guide) "
            f"at fraction {fraction:g}"
        )
    guide, heavy = _interpolate(GUIDE_MODEL, fraction), _interpolate(PARAMETER_BOUND_MOE, fraction)
    beyond = fraction > PARAMETER_BOUND_MOE[-1][0]
    return (
        f"~{guide:.1f}x (Qwen3-30B-A3B, the CPU-offloading guide) to {'over ' if beyond else ''}~{heavy:.1f}x "
        f"(a 5.6B-parameter MoE at 1,024 tokens a GPU a step, two H200{', measured to 0.5' if beyond else ''}) "
        f"at fraction {fraction:g}"
    )


def selective_recompute_slowdown(seq_length: int, hidden_size: int) -> float:
    """Selective recompute's iteration-time ratio with the local implementation, by sequence / hidden (held to
    the nearest end of the measured points outside them)."""
    return _interpolate(SELECTIVE_RECOMPUTE_LOCAL, seq_length / hidden_size)


def tensor_parallel_slowdown(degree: int, hidden_size: int) -> float:
    """Iteration-time ratio of doubling TP to `degree` (2, 4 or 8) where DP halves."""
    if degree <= 2:
        return _interpolate(TENSOR_PARALLEL_TO_2, hidden_size)
    return TENSOR_PARALLEL_TO_4 if degree == 4 else GUIDE_TENSOR_PARALLEL_TO_8


def micro_batch_cut_slowdown(times: float) -> float:
    """Iteration-time ratio of running `times` as many micro-batches a step (held to a twelfth's beyond it)."""
    return _interpolate(MICRO_BATCH_CUT, times)


def _interpolate(points, x: float) -> float:
    if x < points[0][0]:
        return points[0][1]
    for (x0, y0), (x1, y1) in zip(points, points[1:]):
        if x0 <= x <= x1:
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    return points[-1][1]
