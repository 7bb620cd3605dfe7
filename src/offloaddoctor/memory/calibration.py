"""Constants of the memory model that come from measurement, each with the runs it was read from.

The calibration runs are fixtures/memory-calibration/c*.log and fixtures/compare-family/*.log (real
Megatron-LM on an H100/H200, megatron-core 0.19.0, torch 2.11). The h*.log runs were never used to set
anything here: they are the hold-out set benchmarks/memory_accuracy.py reports separately.
"""

from __future__ import annotations

import math

from offloaddoctor.byte_units import MIB

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from offloaddoctor.memory.shape import RunShape

# Allocated after every iteration besides parameters, gradients and optimizer state: 64 MiB in every
# calibration run (cuBLAS workspaces, RNG trackers, loss and grad-norm buffers).
RESIDENT_OVERHEAD_BYTES = 64 * MIB

# With the unfused (local) attention one attention-score tensor, 2 bytes x heads/TP x b x s^2, stays
# allocated between iterations (c01-c13: the whole remainder to the byte, for 8 to 32 heads).
LOCAL_ATTENTION_RESIDENT_SCORES = 1

# Logits and loss on the last stage: bytes per logit element (s x b x vocab/TP). 2 for the bf16 logits
# plus 4 for the fp32 copy the cross entropy keeps (c05 vs compare-family baseline: vocab 128k vs 32k).
LOGITS_BYTES_PER_ELEMENT = 6
# A model trained in fp32: its fp32 logits only (cross_entropy.py shifts and exponentiates them in place).
FP32_LOGITS_BYTES_PER_ELEMENT = 4

# Per token x hidden, around the transformer layers: the embedding output and its dropout mask on the
# first stage (per micro-batch in flight), the final norm on the last stage (PP=1 runs: 5.6; m02-pp2's
# first stage: 9.1 for two micro-batches).
FIRST_STAGE_BYTES_PER_TOKEN_HIDDEN = 4.5
LAST_STAGE_BYTES_PER_TOKEN_HIDDEN = 1.5

# torch's foreach Adam (Megatron's fallback without TE/Apex) takes one fp32 temporary the size of the
# parameters it updates during the step (c02: 22 B/parameter at the step, to 0.01 %).
TORCH_ADAM_STEP_TEMPORARY_BYTES = 4

# 16-bit main gradients (fp16's default; bf16 with --grad-reduce-in-bf16) reach the optimizer as fp32 copies: the
# distributed optimizer's `shard_model_grad.float()` from the step until the next zero_grad (c09, fp16: 20 B/parameter
# between iterations, 16 B during forward/backward); with optimizer offloading HybridDeviceOptimizer's
# `fp32_param.grad = grad.to(fp32)` for the part it keeps on the GPU, from the first step on (n119: 4.0 % under
# without it). fp32 gradients are handed over as they are.
FP32_GRAD_COPY_BYTES = 4

# Host memory of optimizer offloading, a rank: measured, not counted (fixtures/memory-calibration/host-memory: each
# rank's own trace of the host's MemAvailable, tools/probe_host_memory.py; one-H100 hosts of 125 GiB, torch 2.11,
# megatron-core 0.19.0). By the source a rank keeps 16 B a parameter it offloads (its fp32 copy, the CPU AdamW's two
# moments, a pinned fp32 gradient: hybrid_optimizer.py). What the rank's own process holds, beside its pinned fp32
# buffers (`memory/offload_split.py` pinned_rounding: each rounded up to a power of two), fitted on p02/p05 (the
# precision-aware optimizer) and p04 (without it, where the offloaded fp32 main parameters are pinned too):
HOST_BYTES_PER_OFFLOADED_PARAMETER = {True: 12.24, False: 8.4}  # with the precision-aware optimizer, without
HOST_PINNED_FP32_BUFFERS = {True: 1, False: 2}  # the gradient; without it the main parameter too
# What the training process holds on the host besides (p02/p05's intercept, 2.61 GiB with two data-loader workers,
# less theirs: CUDA's and the libraries' own), and what a process of a job on several GPUs holds more (p07's, data
# parallel 2: NCCL's and the gloo groups').
HOST_PROCESS_BYTES = 1.70 * 2**30
HOST_PROCESS_BYTES_SEVERAL_GPUS = 0.57 * 2**30
# Each data-loader worker's own pages (those it writes itself: the interpreter's objects it touches): p23, p05's run
# without its two workers, gave up 0.91 GiB less than the figure without this. Held out at 4 and 8 (Bridge's default):
# p33 +0.5 %, p32 +0.3 %; more were not measured.
HOST_WORKER_BYTES = 0.455 * 2**30
HOST_WORKERS_MEASURED = 8
# Workers a loader forks in the training loop (a cyclic loader: at the first step, or at the first evaluation) kept
# less beyond its first two: p41 (p35 with 8 workers a loader, both forked so) gave up 31.8 GiB where 0.455 a worker
# said 35.5; fitted on it. Not the collector: p42, p41 without --manual-gc, kept as little (planned before it ran).
HOST_LATE_WORKER_BYTES = 0.14 * 2**30
HOST_LATE_WORKERS_AT_FULL_COST = 2
# What the data-loader workers keep. The ranks that load data (tensor-parallel rank 0 of the first and last pipeline
# stages: `is_dataset_built_on_rank`) fork --num-workers workers (torch DataLoader, fork) before training: they keep
# the parent's pages as they were. Megatron builds a first HybridDeviceOptimizer over the model's own parameters,
# unsharded, before the distributed optimizer replaces it: its fp32 copies (4 B a parameter of the first build,
# `param.detach().clone().float()`), freed by the collection before training, stay with the workers (p05's trace: the
# resident size fell by them, the host's available memory did not rise); where nothing collects them before the
# peak (no --manual-gc) they stay in the parent. And the fp32 parameters CPU Adam writes each step (unpinned with the
# precision-aware optimizer) are copied on write: 4 B more; without it they are pinned, a shared mapping no fork
# copies (p28, p04 without workers: +0.2 % with the workers' own pages, above). Measured: with --num-workers 0 and
# --manual-gc p05's run gave up 53.6 GiB instead of 79.5 (p23), and the 6.66B GPT its 125 GiB host killed three times
# trained at 104.6 GiB (p24), l1's 5.1B Llama its host killed at 86.7 (p27); tensor parallel's other ranks fork none.
HOST_FIRST_BUILD_BYTES = 4
HOST_WORKERS_STEP_BYTES = {True: 4, False: 0}
# The host figure's error on the probes it was not fitted on, without tensor parallelism (p08-p12, p15, p20, p24, p27-p29,
# p31, planned before they ran: -1.3 % to +2.8 %; none under by more than 3 %): the host verdict's margin. Under
# tensor parallelism it was over on every run (p13, p16, p18, p19, p21, p22, p30), which its verdict's low end allows for.
HOST_MODEL_ERROR = 0.03
HOST_OVER_UNDER_TENSOR_PARALLEL = (0.020, 0.041)  # benchmarks/host_memory_accuracy.py: the tensor-parallel probes

# Caching-allocator slack over the peak (max reserved / max allocated): median and range, calibration runs.
RESERVED_OVER_ALLOCATED = (1.06, 1.03, 1.27)

# What nvidia-smi shows beyond PyTorch's reserved memory: CUDA context, cuBLAS/cuDNN handles, NCCL.
# (nvidia-smi used - max reserved) over the calibration runs, MiB (median, low, high): 14 one-GPU runs,
# and the two two-GPU runs (NCCL's buffers come on top; the median of two is their mean).
NON_PYTORCH_MIB_ONE_GPU = (2864, 2474, 2864)
NON_PYTORCH_MIB_SEVERAL_GPUS = (3902, 3344, 4460)

# What PyTorch may reserve on a GPU: nvidia-smi's total less what the driver keeps (nvidia-smi says 81,559 MiB
# for the H100 80GB HBM3; PyTorch's OOM messages there say "total capacity of 79.18 GiB" = 81,080 MiB) less
# the CUDA context, library handles and NCCL (NON_PYTORCH_MIB_*): 78,216 MiB on that H100. In the recorded
# runs (fixtures/offload-sweep) the largest `max reserved` of a run that ran was 77,712 MiB (g1-f020), and
# every run that needed more ran out of memory.
DRIVER_RESERVED_MIB = 479

# The fit verdict's allocator slack over the peak. Assumed for "fits": the calibration median above (the
# partial-offload runs of fixtures/offload-sweep g1-*, median 1.052, range 1.038-1.085, do not fragment more).
# Squeezed for "does not fit": near the limit the caching allocator frees its cache and retries before it
# gives up, but 0.1-0.3 GiB stayed reserved and unallocated in every recorded OOM (g1-f010, l1-f030).
FIT_SLACK = RESERVED_OVER_ALLOCATED[0]
# A MoE layer's routed tensors change size every step (tokens per expert), and the caching allocator's blocks
# fragment: MoE runs reserved up to 1.148 x their peak (e29; e25 1.133 and ran, near an H200's limit), and three
# near the limit ran out of memory where a contiguous block was missing, needing 1.08 (e19), 1.09 (e23's rank 1)
# and 1.11 (e31, judged "fits" with FIT_SLACK) x what was allocated. With expandable segments the same runs reserved
# 1.007 x (e20, e27): FIT_SLACK stays for them and for dense runs, and for runs padded to a capacity factor, whose
# routed tensors keep their sizes (e36, e38 near an H100's limit: 1.031 and 1.023 x).
MOE_FIT_SLACK = 1.15
SQUEEZED_SLACK = 1.01
# The unfused attention's score tensors (2 B x heads/TP x b x s/CP x s, one per layer, with their gradients and
# softmax outputs of the same size) are the largest blocks a step asks for. Without expandable segments the caching
# allocator cannot hand a freed block to a larger request: n80 (8,192 MiB score tensors) ran out of memory asking
# for one with 14.41 GiB reserved but unallocated, where x 1.06 over its peak allowed 4.0 GiB and "fits" had 5.1 GB
# to spare. "Fits" allows this many score tensors over the peak (x 1.025 for the model's error) where that is more
# than the slack: from 1.36 up, "fits" is not said of n80 on any card (its request would have been served with
# 70.24 GiB reserved + the 8 GiB asked, 1.36 score tensors over its peak x 1.025); below 1.67 t21-4-cap (3,072 MiB
# tensors, offloading 0.8 under an H100's limit), which ran, is "fits". With expandable segments n81 (n80 as
# advised) ran. n80 run again as it was (n99) trained, with 0.71 of a score tensor reserved over its peak: such a
# failure is a chance, not a certainty, which is what "tight" says. Held out at 1.5: n88, n90, n91 and n98 ("fits",
# 266-2,300 MiB to spare, 4-8 GiB tensors) ran.
FRAGMENTED_SCORE_TENSORS = 1.5
# "Fits" also allows for the model being low. Near an 80 GB limit x 1.025 is ~1.9 GB, more than the largest
# absolute underestimate of any dense run recorded (1,358 MiB: t21-llama3b-pp2-vpp3-mbs4-4, -1.9 %; 1,550 MiB
# when the margin was set, before the rotated Q/K term). Without it, two advised changes with 127 and 399 MiB to
# spare were run under an H100's limit: one ran, one (t21-llama3b-pp2-vpp3-mbs4-3, the model then -2.1 % low)
# ran out of memory. Small runs are lower in relative terms, far from any limit (n06 -4.5 %, ~0.7 GB).
MODEL_UNDERESTIMATE = 0.025
# With expert parallelism a rank's experts get top-k x its tokens only when the router balances them; nothing in
# a config bounds what one rank gets without a capacity factor, and the routed tokens' activations on one rank
# grow with its share. Measured over the balanced share, without an auxiliary loss (docs/estimate.md): e05 (EP 2,
# 4 experts a rank) +28 % of its routed activations; e23 (EP 4, 2 experts a rank) at least +40 % on the rank that
# ran out of memory. A rank's share varies less the more experts it holds (as 1/sqrt of them: 0.28 x sqrt 4 and
# 0.40 x sqrt 2 are both ~0.57 for one expert), so "fits" allows the routed activations ROUTED_IMBALANCE /
# sqrt(experts a rank) more: 0.75 for one expert, above the ~0.57 measured. With it e19 and e23 are "tight" (both
# ran out of memory; e23 was judged "fits" by the x 1.05 on the whole peak that this replaced). Planned with it:
# e25, the largest EP 4 micro-batch it calls "fits" on four H200, ran (rank 0 4.9 % over the balanced model).
ROUTED_IMBALANCE = 0.75


def fit_slack(shape: RunShape) -> float:
    """The allocator's slack over the peak that "fits" assumes for this run."""
    varying = shape.num_experts and not shape.padded_to_capacity
    return MOE_FIT_SLACK if varying and not shape.expandable_segments else FIT_SLACK


def routed_imbalance(shape: RunShape) -> float:
    """How much more than its balanced share of routed tokens one rank may get: the excess "fits" allows for."""
    ranks = shape.expert_model_parallel_size
    if not shape.num_experts or ranks <= 1 or shape.padded_to_capacity:
        return 0.0  # padded to capacity: every rank the same, whatever the router does
    allowance = ROUTED_IMBALANCE / math.sqrt(max(1.0, shape.num_experts / ranks))
    capacity = shape.moe_expert_capacity_factor
    return allowance if capacity is None else min(allowance, max(0.0, capacity - 1.0))
