#!/usr/bin/env python3
"""Record the real runs behind fixtures/memory-calibration/ on the GPU machine.

Each run is Megatron-LM's real training code from the megatron-core 0.19.0 wheel (entry script
tools/compare_family_pretrain_gpt.py, as for fixtures/compare-family), a few iterations with
`--log-memory-interval 1`, so the log carries the arguments block, Megatron's theoretical-memory line
and `max allocated` after every iteration. Several runs share the GPU at once (each process has its own
caching allocator, so `max allocated` is per run); an nvidia-smi poller records each run's largest
`used_memory` (what nvidia-smi shows: CUDA context + reserved + NCCL) keyed by the run's process.

    device: source tools/megatron_wheel_setup.sh && python3 tools/record_memory_calibration.py $OUT [GROUP]
    here:   python3 tools/finish_memory_calibration.py <folder with the fetched archive>

GROUP selects the runs (`single`: one GPU each; `multi`: two GPUs, TP/PP/DP = 2; `build`: the model-build OOMs (b*),
each alone; `two`: issue 25's runs, each
alone on its GPUs, with DEADLINE_S in the environment to stop in time; `moe`: the one-GPU MoE hold-outs of benchmarks/moe_plan.json,
each alone on a GPU, DEADLINE_S as for `two`). Writes OUTDIR/raw-GROUP.tar.gz
holding NAME.raw.log, NAME.cmd, NAME.smi (peak nvidia-smi MiB) and meta-GROUP.txt.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import threading
import time
from pathlib import Path

COMMON = (
    "--transformer-impl local --mock-data --tokenizer-type NullTokenizer --seed 1234 "
    "--lr 1e-4 --min-lr 1e-5 --lr-decay-style cosine --train-iters 3 "
    "--log-interval 1 --log-throughput --log-memory-interval 1 --eval-iters 0 --eval-interval 100000 "
    "--split 100,0,0 --no-masked-softmax-fusion --no-bias-gelu-fusion --no-bias-dropout-fusion "
    "--no-gradient-accumulation-fusion --no-persist-layer-norm"
)
DISTOPT = "--use-distributed-optimizer"
OFFLOAD = "--optimizer-cpu-offload --use-precision-aware-optimizer --optimizer-offload-fraction"
LLAMA = "--swiglu --normalization RMSNorm --position-embedding-type rope --no-rope-fusion --disable-bias-linear"
GQA = "--group-query-attention --num-query-groups"
FULL = "--recompute-granularity full --recompute-method uniform --recompute-num-layers 1"
SELECTIVE = "--recompute-granularity selective"
# The default initial loss scale (2**32) skips the first ~30 steps, so the optimizer state would never exist.
FP16 = "--fp16 --initial-loss-scale 4096"


def shape(layers, hidden, heads, seq, mbs, vocab, gbs=None):
    return (
        f"--num-layers {layers} --hidden-size {hidden} --num-attention-heads {heads} "
        f"--seq-length {seq} --max-position-embeddings {seq} --micro-batch-size {mbs} "
        f"--global-batch-size {gbs or 2 * mbs} --vocab-size {vocab}"
    )


def moe_ep2_top2(mbs: int, gbs: int | None = None) -> str:
    """Expert parallelism 2 on two GPUs (8 experts, 4 a rank), top-2 without an auxiliary loss."""
    return (
        f"{shape(8, 1024, 16, 1024, mbs, 32000, gbs=gbs or 2 * mbs)} --bf16 {DISTOPT} --disable-bias-linear "
        "--num-experts 8 --moe-router-topk 2 --moe-ffn-hidden-size 2816 --expert-model-parallel-size 2"
    )


# name -> (GPUs, rough GB for scheduling, arguments). Names starting with "h" are held out of calibration.
RUNS = {
    "c01-h1024-s2048-v50k": (1, 8, f"{shape(12, 1024, 16, 2048, 2, 50257)} --bf16 {DISTOPT}"),
    "c02-h4096-l4": (1, 14, f"{shape(4, 4096, 32, 1024, 1, 32000)} --bf16 {DISTOPT}"),
    "c03-s4096": (1, 26, f"{shape(8, 2048, 16, 4096, 1, 32000)} --bf16 {DISTOPT}"),
    "c04-mbs8": (1, 22, f"{shape(8, 2048, 16, 1024, 8, 32000)} --bf16 {DISTOPT}"),
    "c05-v128k": (1, 20, f"{shape(8, 2048, 16, 1024, 4, 128256)} --bf16 {DISTOPT}"),
    "c06-full-recompute": (1, 12, f"{shape(8, 2048, 16, 1024, 8, 32000)} --bf16 {DISTOPT} {FULL}"),
    "c07-selective": (1, 18, f"{shape(8, 2048, 16, 1024, 8, 32000)} --bf16 {DISTOPT} {SELECTIVE}"),
    "c08-no-distopt": (1, 16, f"{shape(8, 2048, 16, 1024, 4, 32000)} --bf16"),
    "c09-fp16": (1, 16, f"{shape(8, 2048, 16, 1024, 4, 32000)} {FP16} {DISTOPT}"),
    "c10-llama-gqa": (
        1,
        16,
        f"{shape(8, 2048, 16, 2048, 2, 32000)} --ffn-hidden-size 5632 --bf16 "
        f"{DISTOPT} {LLAMA} {GQA} 4 --untie-embeddings-and-output-weights",
    ),
    "c11-h3072": (1, 18, f"{shape(6, 3072, 24, 2048, 2, 32000)} --bf16 {DISTOPT}"),
    "c12-h1536-l16-mbs8": (1, 22, f"{shape(16, 1536, 12, 1024, 8, 32000)} --bf16 {DISTOPT}"),
    "c13-tiny": (1, 3, f"{shape(4, 1024, 8, 1024, 1, 32000)} --bf16 {DISTOPT}"),
    "c14-opt075": (1, 10, f"{shape(8, 2048, 16, 1024, 4, 32000)} --bf16 {DISTOPT} {OFFLOAD} 0.75"),
    "h01-h3072-opt050": (1, 14, f"{shape(6, 3072, 24, 2048, 2, 32000)} --bf16 {DISTOPT} {OFFLOAD} 0.5"),
    "h02-gqa-s3072": (
        1,
        22,
        f"{shape(8, 2560, 20, 3072, 1, 64000)} --ffn-hidden-size 6912 --bf16 {DISTOPT} {LLAMA} {GQA} 4",
    ),
    "h03-h4096-s4096-v128k": (
        1,
        34,
        f"{shape(2, 4096, 32, 4096, 2, 128256)} --ffn-hidden-size 11008 "
        f"--bf16 {DISTOPT} {LLAMA} {GQA} 8 --untie-embeddings-and-output-weights",
    ),
    "h04-v64k-s2048": (1, 12, f"{shape(4, 2048, 16, 2048, 2, 64000)} --bf16 {DISTOPT}"),
    "h05-l24-h1024": (1, 12, f"{shape(24, 1024, 16, 1024, 4, 32000)} --bf16 {DISTOPT}"),
    "h06-fp16-h1536": (1, 12, f"{shape(12, 1536, 12, 2048, 2, 32000)} {FP16} {DISTOPT}"),
    "h07-selective-s4096": (1, 20, f"{shape(8, 2048, 16, 4096, 2, 32000)} --bf16 {DISTOPT} {SELECTIVE}"),
    "h08-full-no-distopt": (1, 16, f"{shape(6, 3072, 24, 2048, 4, 32000)} --bf16 {FULL}"),
    "h09-mbs1-opt100": (1, 6, f"{shape(8, 2048, 16, 1024, 1, 32000)} --bf16 {DISTOPT} {OFFLOAD} 1.0"),
    "h10-h1024-mbs8-s2048": (1, 18, f"{shape(8, 1024, 16, 2048, 8, 32000)} --bf16 {DISTOPT}"),
    # Two GPUs: TP, PP (1F1B with 4 micro-batches) and DP with the distributed optimizer.
    "m01-tp2-sp": (
        2,
        0,
        f"{shape(8, 2048, 16, 2048, 2, 32000)} --bf16 {DISTOPT} --tensor-model-parallel-size 2 --sequence-parallel",
    ),
    "m02-pp2": (
        2,
        0,
        f"{shape(8, 2048, 16, 1024, 4, 32000, gbs=16)} --bf16 {DISTOPT} --pipeline-model-parallel-size 2",
    ),
    "m03-dp2": (2, 0, f"{shape(8, 2048, 16, 1024, 4, 32000, gbs=16)} --bf16 {DISTOPT}"),
    "h11-tp2-no-sp": (2, 0, f"{shape(8, 2048, 16, 1024, 4, 32000)} --bf16 {DISTOPT} --tensor-model-parallel-size 2"),
    "h12-pp2-dp1-opt050": (
        2,
        0,
        f"{shape(8, 2048, 16, 1024, 2, 32000, gbs=8)} --bf16 {DISTOPT} --pipeline-model-parallel-size 2 {OFFLOAD} 0.5",
    ),
    # Recorded after the model was frozen (commit 23e1289): a second, clean hold-out set.
    "n01-selective-v50k": (1, 24, f"{shape(10, 2560, 20, 2048, 2, 50257)} --bf16 {DISTOPT} {SELECTIVE}"),
    "n02-block-recompute-s4096": (
        1,
        30,
        f"{shape(16, 1024, 16, 4096, 1, 32000)} --bf16 {DISTOPT} "
        "--recompute-granularity full --recompute-method block "
        "--recompute-num-layers 4",
    ),
    "n03-opt030": (1, 18, f"{shape(12, 2048, 16, 2048, 4, 32000)} --bf16 {DISTOPT} {OFFLOAD} 0.3"),
    "n04-fp16-gqa": (
        1,
        22,
        f"{shape(8, 3072, 24, 1024, 2, 32000)} --ffn-hidden-size 8192 {FP16} {DISTOPT} {LLAMA} {GQA} 8",
    ),
    "n05-mbs16-v128k-untied": (
        1,
        32,
        f"{shape(6, 1536, 12, 1024, 16, 128256)} --bf16 {DISTOPT} --untie-embeddings-and-output-weights",
    ),
    "n06-no-dropout-hd64": (
        1,
        16,
        f"{shape(8, 2048, 32, 2048, 2, 32000)} --bf16 {DISTOPT} --attention-dropout 0.0 --hidden-dropout 0.0",
    ),
    "n07-h4096-no-distopt": (1, 20, f"{shape(3, 4096, 32, 2048, 1, 32000)} --bf16"),
    "n08-full-chunk2": (
        1,
        14,
        f"{shape(8, 2048, 16, 1024, 4, 32000)} --bf16 {DISTOPT} "
        "--recompute-granularity full --recompute-method uniform --recompute-num-layers 2",
    ),
    "n09-opt100-overlap": (
        1,
        10,
        f"{shape(8, 2048, 16, 1024, 4, 32000)} --bf16 {DISTOPT} {OFFLOAD} 1.0 --overlap-cpu-optimizer-d2h-h2d",
    ),
    "n11-pp2-vpp2": (
        2,
        0,
        f"{shape(8, 2048, 16, 1024, 2, 32000, gbs=16)} --bf16 {DISTOPT} "
        "--pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 2",
    ),
    "n12-dp2-no-distopt": (2, 0, f"{shape(8, 2048, 16, 1024, 4, 32000, gbs=16)} --bf16"),
    "n13-tp2-gqa": (
        2,
        0,
        f"{shape(8, 2048, 16, 2048, 2, 32000)} --ffn-hidden-size 5632 --bf16 {DISTOPT} "
        f"{LLAMA} {GQA} 4 --tensor-model-parallel-size 2",
    ),
    "n14-pp2-mbs1-s4096": (
        2,
        0,
        f"{shape(8, 2048, 16, 4096, 1, 32000, gbs=8)} --bf16 {DISTOPT} --pipeline-model-parallel-size 2",
    ),
    # A dense Llama with an unfused SwiGLU (`x_linear + glu_linear_offset` kept: found on e06), planned in
    # benchmarks/moe_plan.json before recording, group `moe`.
    "n15-llama-swiglu-unfused": (
        1,
        30,
        f"{shape(8, 2048, 16, 2048, 4, 32000)} --ffn-hidden-size 5632 --bf16 {DISTOPT} {LLAMA} --no-bias-swiglu-fusion",
    ),
    # MoE (local experts, SequentialMLP), recorded after the model's MoE formulas were written. Expert biases
    # are off: with them megatron-core 0.19's local experts add the bias in place on a view, which autograd
    # refuses ("Output 0 of _ReduceFromModelParallelRegionBackward is a view and is being modified inplace").
    "e01-moe8-top2": (
        1,
        16,
        f"{shape(8, 1024, 16, 1024, 4, 32000)} --bf16 {DISTOPT} --disable-bias-linear --num-experts 8 "
        "--moe-router-topk 2 --moe-ffn-hidden-size 2816",
    ),
    "e02-moe16-shared-gqa": (
        1,
        20,
        f"{shape(8, 2048, 16, 1024, 2, 32000)} --bf16 {DISTOPT} {LLAMA} {GQA} 4 "
        "--num-experts 16 --moe-router-topk 2 --moe-ffn-hidden-size 1408 "
        "--moe-shared-expert-intermediate-size 2816",
    ),
    "e03-moe4-top1-s2048": (
        1,
        24,
        f"{shape(4, 2048, 16, 2048, 2, 32000)} --bf16 {DISTOPT} --disable-bias-linear "
        "--num-experts 4 --moe-router-topk 1 --moe-router-pre-softmax "
        "--moe-ffn-hidden-size 8192",
    ),
    "e04-moe8-top4-mbs8": (
        1,
        20,
        f"{shape(6, 1536, 12, 1024, 8, 32000)} --bf16 {DISTOPT} --disable-bias-linear --num-experts 8 "
        "--moe-router-topk 4 --moe-ffn-hidden-size 1536",
    ),
    "e05-moe8-ep2": (
        2,
        0,
        f"{shape(8, 1024, 16, 1024, 4, 32000, gbs=16)} --bf16 {DISTOPT} --disable-bias-linear "
        "--num-experts 8 --moe-router-topk 2 --moe-ffn-hidden-size 2816 "
        "--expert-model-parallel-size 2 --moe-token-dispatcher-type alltoall",
    ),
    # MoE hold-outs, planned after the MoE activation terms were derived from megatron-core 0.19.0's source
    # (memory/activations.py routed_expert_bytes, router_bytes); benchmarks/moe_plan.json holds the predictions
    # made before recording. One GPU each, each alone on it (group `moe`): unfused SwiGLU experts with top-3,
    # a shared expert with top-1 at micro-batch 8, the alltoall dispatcher on one GPU at sequence 4096, fp16.
    "e06-moe8-top3-swiglu-unfused": (
        1,
        10,
        f"{shape(6, 1024, 16, 1024, 4, 32000)} --bf16 {DISTOPT} {LLAMA} --no-bias-swiglu-fusion "
        "--num-experts 8 --moe-router-topk 3 --moe-ffn-hidden-size 1408",
    ),
    "e07-moe16-shared-top1-mbs8": (
        1,
        17,
        f"{shape(6, 1024, 16, 1024, 8, 32000)} --bf16 {DISTOPT} --disable-bias-linear --num-experts 16 "
        "--moe-router-topk 1 --moe-router-pre-softmax --moe-ffn-hidden-size 2048 "
        "--moe-shared-expert-intermediate-size 2048",
    ),
    "e08-moe8-alltoall-s4096": (
        1,
        12,
        f"{shape(4, 1536, 12, 4096, 1, 32000)} --bf16 {DISTOPT} --disable-bias-linear --num-experts 8 "
        "--moe-router-topk 2 --moe-ffn-hidden-size 2048 --moe-token-dispatcher-type alltoall",
    ),
    "e09-moe4-top2-fp16": (
        1,
        12,
        f"{shape(4, 2048, 16, 2048, 2, 32000)} {FP16} {DISTOPT} --disable-bias-linear --num-experts 4 "
        "--moe-router-topk 2 --moe-ffn-hidden-size 4096",
    ),
    # Near an H100's limit, run alone on a real H100: e10 "fits" (69.0 GB predicted; the model before the MoE
    # terms said 62.9 GB), e11 "does not fit" (78.4 GB; before: 71.2 GB, "fits") and is meant to run out of memory.
    "e10-moe8-top4-mbs12": (
        1,
        70,
        f"{shape(8, 2048, 16, 2048, 12, 32000)} --bf16 {DISTOPT} --disable-bias-linear --num-experts 8 "
        "--moe-router-topk 4 --moe-ffn-hidden-size 2048",
    ),
    "e11-moe8-top4-mbs14": (
        1,
        80,
        f"{shape(8, 2048, 16, 2048, 14, 32000)} --bf16 {DISTOPT} --disable-bias-linear --num-experts 8 "
        "--moe-router-topk 4 --moe-ffn-hidden-size 2048",
    ),
    # The two cheapest changes `estimate` advises for e11 (on its log), each run as printed: selective recompute
    # of the attention core (43,609 MiB predicted), micro-batch 14 -> 7 at the same global batch (45,606 MiB).
    "e12-moe8-top4-mbs14-selective": (
        1,
        45,
        f"{shape(8, 2048, 16, 2048, 14, 32000)} --bf16 {DISTOPT} --disable-bias-linear --num-experts 8 "
        "--moe-router-topk 4 --moe-ffn-hidden-size 2048 --recompute-granularity selective --recompute-modules core_attn",
    ),
    "e13-moe8-top4-mbs7": (
        1,
        47,
        f"{shape(8, 2048, 16, 2048, 7, 32000, gbs=28)} --bf16 {DISTOPT} --disable-bias-linear --num-experts 8 "
        "--moe-router-topk 4 --moe-ffn-hidden-size 2048",
    ),
    # Expert parallelism 2 on two GPUs, to test the wider fit margin for EP (memory/calibration.py
    # MODEL_UNDERESTIMATE_EXPERT_PARALLEL, from e05 alone): top-4 with the auxiliary load-balancing loss and the
    # alltoall dispatcher; top-2 at micro-batch 8 with the default dispatcher and no auxiliary loss.
    "e14-moe8-ep2-top4-aux": (
        2,
        0,
        f"{shape(8, 1024, 16, 1024, 4, 32000, gbs=16)} --bf16 {DISTOPT} --disable-bias-linear "
        "--num-experts 8 --moe-router-topk 4 --moe-ffn-hidden-size 2048 --moe-aux-loss-coeff 1e-2 "
        "--expert-model-parallel-size 2 --moe-token-dispatcher-type alltoall",
    ),
    "e15-moe8-ep2-top2-mbs8": (
        2,
        0,
        f"{shape(8, 1024, 16, 1024, 8, 32000, gbs=32)} --bf16 {DISTOPT} --disable-bias-linear "
        "--num-experts 8 --moe-router-topk 2 --moe-ffn-hidden-size 2816 --expert-model-parallel-size 2",
    ),
    # Expert parallelism 2 near the limit, to test the x 1.05 margin where it decides the verdict (top-2, no
    # auxiliary loss: the imbalanced case of e05/e15). On an H100 80GB: e16 "fits" with the EP margin (68.0 GB
    # predicted), e17 "tight" with it but "fits" with the dense x 1.025 (70.6 GB). e18/e19: the same pair on an
    # H200, for when two H200 come (benchmarks/moe_plan.py plans each on its card).
    **{
        name: (2, 0, moe_ep2_top2(mbs))
        for name, mbs in (
            ("e16-moe8-ep2-top2-mbs49", 49),
            ("e17-moe8-ep2-top2-mbs51", 51),
            ("e18-moe8-ep2-top2-mbs92-h200", 92),
            ("e19-moe8-ep2-top2-mbs94-h200", 94),
        )
    },
    # Issue 25, planned with the model as committed before recording (benchmarks/two_gpu_plan.json holds its
    # predictions): pipeline parallel 2 with interleaving (VPP 2 and 3) at two shapes and micro-batches 1-4 with
    # 8 micro-batches a step; data parallel 2 sharding a partially offloaded optimizer (0.25/0.5/0.75) at two
    # shapes; TP 2 x PP 2 with VPP on four GPUs. Names start with "t": held out, a set of their own.
    **{
        f"t{n:02d}-{name}": (gpus, 0, args)
        for n, (name, gpus, args) in enumerate(
            [
                *(
                    (
                        f"gpt13b-pp2-vpp{v}-mbs{m}",
                        2,
                        f"{shape(24, 2048, 16, 2048, m, 32000, gbs=8 * m)} --bf16 "
                        f"{DISTOPT} --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage {12 // v}",
                    )
                    for v, m in ((2, 1), (2, 2), (2, 4), (3, 1), (3, 2))
                ),
                *(
                    (
                        f"llama3b-pp2-vpp{v}-mbs{m}",
                        2,
                        f"{shape(24, 3072, 24, 4096, m, 32000, gbs=8 * m)} "
                        f"--ffn-hidden-size 8192 --bf16 {DISTOPT} {LLAMA} {GQA} 8 --untie-embeddings-and-output-weights "
                        f"{SELECTIVE} --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage {12 // v}",
                    )
                    for v, m in ((2, 1), (3, 2))
                ),
                *(
                    (
                        f"gpt3b-dp2-f{round(f * 100):03d}",
                        2,
                        f"{shape(16, 4096, 32, 2048, 1, 32000, gbs=4)} "
                        f"--ffn-hidden-size 16384 --bf16 {DISTOPT} {OFFLOAD} {f}",
                    )
                    for f in (0.25, 0.5, 0.75)
                ),
                *(
                    (
                        f"llama5b-dp2-f{round(f * 100):03d}",
                        2,
                        f"{shape(24, 4096, 32, 2048, 1, 32000, gbs=4)} "
                        f"--ffn-hidden-size 11008 --bf16 {DISTOPT} {LLAMA} --untie-embeddings-and-output-weights "
                        f"{SELECTIVE} {OFFLOAD} {f}",
                    )
                    for f in (0.25, 0.5, 0.75)
                ),
                # With --sequence-parallel the local implementation's torch LayerNorm refuses to build (recorded).
                (
                    "gpt13b-tp2-pp2-vpp2-mbs2",
                    4,
                    f"{shape(24, 2048, 16, 2048, 2, 32000, gbs=16)} --bf16 {DISTOPT} --tensor-model-parallel-size 2 "
                    "--sequence-parallel --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 6",
                ),
                # Planned after the first recording (t01-t14), with the model as it was committed then.
                (
                    "gpt13b-tp2-pp2-vpp2-mbs2-nosp",
                    4,
                    f"{shape(24, 2048, 16, 2048, 2, 32000, gbs=16)} --bf16 {DISTOPT} --tensor-model-parallel-size 2 "
                    "--pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 6",
                ),
                (
                    "llama5b-dp2-f025-gc",
                    2,
                    f"{shape(24, 4096, 32, 2048, 1, 32000, gbs=4)} --ffn-hidden-size 11008 --bf16 {DISTOPT} {LLAMA} "
                    f"--untie-embeddings-and-output-weights {SELECTIVE} {OFFLOAD} 0.25 --manual-gc",
                ),
                (
                    "gpt13b-pp2-vpp2-mbs2-f050",
                    2,
                    f"{shape(24, 2048, 16, 2048, 2, 32000, gbs=16)} --bf16 {DISTOPT} --pipeline-model-parallel-size 2 "
                    f"--num-virtual-stages-per-pipeline-rank 2 {OFFLOAD} 0.5",
                ),
                (
                    "gpt3b-dp4-f050",
                    4,
                    f"{shape(16, 4096, 32, 2048, 1, 32000, gbs=8)} --ffn-hidden-size 16384 --bf16 {DISTOPT} "
                    f"{OFFLOAD} 0.5",
                ),
                (
                    "llama3b-tp2-dp2-f050",
                    4,
                    f"{shape(24, 3072, 24, 4096, 1, 32000, gbs=4)} --ffn-hidden-size 8192 --bf16 {DISTOPT} {LLAMA} "
                    f"{GQA} 8 --untie-embeddings-and-output-weights {SELECTIVE} --tensor-model-parallel-size 2 "
                    f"{OFFLOAD} 0.5",
                ),
            ],
            1,
        )
    },
    # Meant to run out of memory on an 80 GB H100 (the estimate: ~93 GiB): a real OOM with its arguments block.
    "oom-h4096-s4096": (1, 80, f"{shape(8, 4096, 32, 4096, 2, 128256)} --bf16 {DISTOPT}"),
}

# The two changes `diagnose` advises on e19's out-of-memory log (fixtures/memory-calibration/out-of-memory), each
# run as printed: expandable segments first (zero cost), then selective recompute of the attention core.
E19 = RUNS["e19-moe8-ep2-top2-mbs94-h200"]
RUNS["e20-moe8-ep2-top2-mbs94-expandable-h200"] = E19
RUNS["e21-moe8-ep2-top2-mbs94-selective-h200"] = (2, 0, f"{E19[2]} {SELECTIVE} --recompute-modules core_attn")


def moe_ep4_top2(mbs: int, experts: int = 8, gbs: int | None = None) -> tuple[int, int, str]:
    """Expert parallelism 4 on four GPUs (experts / 4 a rank), top-2 without an auxiliary loss."""
    return (
        4,
        0,
        f"{shape(8, 1024, 16, 1024, mbs, 32000, gbs=gbs or 4 * mbs)} --bf16 {DISTOPT} --disable-bias-linear "
        f"--num-experts {experts} --moe-router-topk 2 --moe-ffn-hidden-size 2816 --expert-model-parallel-size 4",
    )


# Planned before recording: e22 far from any limit; near it, judged "fits" with the x 1.05 EP margin, e23 on an
# H200 (micro-batch 92), e24 on an H100 (49). e23 ran out of memory: planned with the routed-imbalance allowance
# that replaced the margin (memory/calibration.py ROUTED_IMBALANCE), the largest micro-batch it calls "fits" (e25
# on an H200, e26 on an H100), and the two changes `diagnose` advises on e23's log, each as printed (e27 expandable
# segments, e28 selective recompute of the attention core).
for name, mbs in (
    ("e22-moe8-ep4-top2-mbs8", 8),
    ("e23-moe8-ep4-top2-mbs92-h200", 92),
    ("e24-moe8-ep4-top2-mbs49", 49),
    ("e25-moe8-ep4-top2-mbs86-h200", 86),
    ("e26-moe8-ep4-top2-mbs47", 47),
    ("e27-moe8-ep4-top2-mbs92-expandable-h200", 92),
):
    RUNS[name] = moe_ep4_top2(mbs)
RUNS["e28-moe8-ep4-top2-mbs92-selective-h200"] = (
    4,
    0,
    f"{moe_ep4_top2(92)[2]} {SELECTIVE} --recompute-modules core_attn",
)
# The other two changes `estimate` advises for e23 that need no Transformer Engine, each as printed: micro-batch
# 92 -> 46 at the same global batch (e29), tensor parallel 2 with expert TP pinned to 1 (e30).
RUNS["e29-moe8-ep4-top2-mbs46-h200"] = moe_ep4_top2(46, gbs=368)
RUNS["e30-moe8-ep4-top2-mbs92-tp2-h200"] = (
    4,
    0,
    f"{moe_ep4_top2(92)[2]} --tensor-model-parallel-size 2 --expert-tensor-parallel-size 1",
)
# A hold-out of the allowance's 1/sqrt(experts a rank): sixteen experts at EP 4 (four a rank, as e05 had at EP 2),
# the largest micro-batch it calls "fits" on an H200 (87; 1,280 MiB to spare in the worst case).
# e31 ran out of memory with 13.48 GiB reserved but unallocated: planned with the MoE allocator slack that followed
# (memory/calibration.py MOE_FIT_SLACK), e32, the largest micro-batch it calls "fits" (80), and e33, `diagnose`'s
# first change for e31 (expandable segments).
for name, mbs in (
    ("e31-moe16-ep4-top2-mbs87-h200", 87),
    ("e32-moe16-ep4-top2-mbs80-h200", 80),
    ("e33-moe16-ep4-top2-mbs87-expandable-h200", 87),
):
    RUNS[name] = moe_ep4_top2(mbs, experts=16)
# One GPU, planned with the MoE allocator slack: e10's model at the largest micro-batch it calls "fits" (e34 on
# an H100: 11; e35 on an H200: 22). e10 (micro-batch 12) ran and is "tight" under it.
for name, mbs in (("e34-moe8-top4-mbs11", 11), ("e35-moe8-top4-mbs22-h200", 22)):
    RUNS[name] = (
        1,
        0,
        f"{shape(8, 2048, 16, 2048, mbs, 32000)} --bf16 {DISTOPT} --disable-bias-linear --num-experts 8 "
        "--moe-router-topk 4 --moe-ffn-hidden-size 2048",
    )
# A capacity factor, padded (--moe-pad-expert-input-to-capacity): every expert takes exactly c x its balanced share
# of routed tokens (top-4 of 8 experts: at most 8/4 = 2 x), the same sizes every step. e34's model, planned with
# the routed tokens' share and a dense run's allocator slack for padded runs: e36 and e38 the largest micro-batch
# "fits" for c = 1.5 and 2, e37 e10's micro-batch (12, which ran dropless) with c = 2, "does not fit".
for name, mbs, factor in (
    ("e36-moe8-top4-cf1.5-pad-mbs11", 11, 1.5),
    ("e37-moe8-top4-cf2-pad-mbs12", 12, 2),
    ("e38-moe8-top4-cf2-pad-mbs10", 10, 2),
):
    RUNS[name] = (
        1,
        0,
        f"{shape(8, 2048, 16, 2048, mbs, 32000)} --bf16 {DISTOPT} --disable-bias-linear --num-experts 8 "
        f"--moe-router-topk 4 --moe-ffn-hidden-size 2048 --moe-expert-capacity-factor {factor} "
        "--moe-pad-expert-input-to-capacity",
    )
# A capacity factor that drops (no padding) with expert parallelism: a rank's experts take at most c x their
# balanced share, so "fits" allows no router imbalance at c = 1. e18's model (EP 2) at the largest micro-batch it
# then calls "fits": e39 on two H200 (86), e40 on two H100 (46).
for name, mbs in (("e39-moe8-ep2-top2-cf1-mbs86-h200", 86), ("e40-moe8-ep2-top2-cf1-mbs46", 46)):
    RUNS[name] = (
        2,
        0,
        f"{shape(8, 1024, 16, 1024, mbs, 32000, gbs=2 * mbs)} --bf16 {DISTOPT} --disable-bias-linear --num-experts 8 "
        "--moe-router-topk 2 --moe-ffn-hidden-size 2816 --expert-model-parallel-size 2 --moe-expert-capacity-factor 1.0",
    )
# Dropping at capacity factor 1.25 with expert parallelism: "fits" allows a rank's experts at most 25 % over their
# balanced share (the 0.375 allowance of two experts a rank, capped at c - 1). The largest micro-batch "fits", where
# dropless is "tight": e43 on two H200 (82), e44 on two H100 (44).
for name, mbs in (("e43-moe8-ep2-top2-cf1.25-mbs82-h200", 82), ("e44-moe8-ep2-top2-cf1.25-mbs44", 44)):
    RUNS[name] = (
        2,
        0,
        f"{shape(8, 1024, 16, 1024, mbs, 32000, gbs=2 * mbs)} --bf16 {DISTOPT} --disable-bias-linear --num-experts 8 "
        "--moe-router-topk 2 --moe-ffn-hidden-size 2816 --expert-model-parallel-size 2 --moe-expert-capacity-factor 1.25",
    )
# Padded to capacity 1 with expert parallelism: every rank takes exactly its balanced share, no imbalance, the same
# sizes every step (a dense run's slack). The largest micro-batch "fits": e41 on two H200 (94, where e19 dropless
# ran out of memory), e42 on two H100 (50).
for name, mbs in (("e41-moe8-ep2-top2-cf1-pad-mbs94-h200", 94), ("e42-moe8-ep2-top2-cf1-pad-mbs50", 50)):
    RUNS[name] = (
        2,
        0,
        f"{shape(8, 1024, 16, 1024, mbs, 32000, gbs=2 * mbs)} --bf16 {DISTOPT} --disable-bias-linear --num-experts 8 "
        "--moe-router-topk 2 --moe-ffn-hidden-size 2816 --expert-model-parallel-size 2 --moe-expert-capacity-factor 1.0 "
        "--moe-pad-expert-input-to-capacity",
    )


# Expert parallelism as advised (advice/changes.py _double_expert): a MoE model whose experts' weights and
# gradients do not fit two GPUs at EP 1 (estimate: "does not fit"), run at EP 1 and with `estimate`'s changes as
# printed. 80 experts for two H200 (e45 EP 2, e46 as it was, e49 offloading, e51 PP 2), 44 for two H100 (e47, e48,
# e50, e60). Twelve iterations, so the advised changes' step times can be compared.
GC = "--manual-gc --manual-gc-interval 100"
EP = "--expert-model-parallel-size"
PP2 = "--pipeline-model-parallel-size 2"


def moe_heavy(experts: int, mbs: int = 1, gbs: int = 2) -> str:
    """8 layers of hidden 2048, `experts` experts of FFN 4096, top-2: most of its parameters are the experts'."""
    return (
        f"{shape(8, 2048, 16, 1024, mbs, 32000, gbs=gbs)} --bf16 {DISTOPT} --disable-bias-linear --num-experts "
        f"{experts} --moe-router-topk 2 --moe-ffn-hidden-size 4096 --train-iters 12"
    )


RUNS["e45-moe80-ep2-advised-h200"] = (2, 0, f"{moe_heavy(80)} {EP} 2")
RUNS["e46-moe80-ep1-h200"] = (2, 0, moe_heavy(80))
RUNS["e47-moe44-ep2-advised"] = (2, 0, f"{moe_heavy(44)} {EP} 2")
RUNS["e48-moe44-ep1"] = (2, 0, moe_heavy(44))
RUNS["e49-moe80-ep1-offload015-advised-h200"] = (2, 0, f"{moe_heavy(80)} {OFFLOAD} 0.15 {GC}")
RUNS["e51-moe80-ep1-pp2-advised-h200"] = (2, 0, f"{moe_heavy(80)} {PP2}")
# What each advised change costs on a MoE that fits without it (40 experts, two H200): the baseline (e52), EP 2
# (e53), PP 2 (e54), optimizer offloading 0.15 and 0.5 (e55, e58); at micro-batch 8 (eight times the tokens a step
# for the same parameters) the baseline (e56), offloading (e57) and EP 2 (e59).
RUNS["e52-moe40-ep1-base-h200"] = (2, 0, f"{moe_heavy(40)} {GC}")
RUNS["e53-moe40-ep2-h200"] = (2, 0, f"{moe_heavy(40)} {EP} 2 {GC}")
RUNS["e54-moe40-pp2-h200"] = (2, 0, f"{moe_heavy(40)} {GC} {PP2}")
RUNS["e55-moe40-offload015-h200"] = (2, 0, f"{moe_heavy(40)} {GC} {OFFLOAD} 0.15")
RUNS["e56-moe40-ep1-mbs8-base-h200"] = (2, 0, f"{moe_heavy(40, 8, 16)} {GC}")
RUNS["e57-moe40-mbs8-offload015-h200"] = (2, 0, f"{moe_heavy(40, 8, 16)} {GC} {OFFLOAD} 0.15")
RUNS["e58-moe40-offload050-h200"] = (2, 0, f"{moe_heavy(40)} {GC} {OFFLOAD} 0.5")
RUNS["e59-moe40-ep2-mbs8-h200"] = (2, 0, f"{moe_heavy(40, 8, 16)} {GC} {EP} 2")
RUNS["e50-moe44-ep1-offload020-advised"] = (2, 0, f"{moe_heavy(44)} {OFFLOAD} 0.2 {GC}")
RUNS["e60-moe44-ep1-pp2-advised"] = (2, 0, f"{moe_heavy(44)} {PP2}")
# The fraction diagnose gives e46's OOM for the run as it collects (no --manual-gc: the first optimizer build
# may linger): 0.5 (with --manual-gc 0.15, e49).
RUNS["e63-moe80-ep1-offload050-nogc-h200"] = (2, 0, f"{moe_heavy(80)} {OFFLOAD} 0.5")
# EP's cost past 1 -> 2 on one node: the 40-expert MoE on four GPUs (global batch 4) at EP 1, 2 and 4.
RUNS["e64-moe40-ep1-4gpu"] = (4, 0, f"{moe_heavy(40, gbs=4)} {GC}")
RUNS["e65-moe40-ep2-4gpu"] = (4, 0, f"{moe_heavy(40, gbs=4)} {GC} {EP} 2")
RUNS["e66-moe40-ep4-4gpu"] = (4, 0, f"{moe_heavy(40, gbs=4)} {GC} {EP} 4")


# What the cheap changes the advice ranks first cost on a dense model (one H100, each alone, 14 iterations): a
# 0.87B GPT at micro-batch 4 of 16 (n16) with selective recompute (n17), full recompute (n18), micro-batch 2 of the
# same global batch (n19) and manual gc (n20); at sequence 4096 (local attention's s^2 scores) the base and selective
# recompute (n21, n22).
def dense_cost(seq: int = 2048, mbs: int = 4, gbs: int = 16) -> str:
    return f"{shape(16, 2048, 16, seq, mbs, 32000, gbs=gbs)} --bf16 {DISTOPT} --train-iters 14"


RUNS["n16-gpt1b-base"] = (1, 0, dense_cost())
RUNS["n17-gpt1b-selective"] = (1, 0, f"{dense_cost()} {SELECTIVE}")
RUNS["n18-gpt1b-full"] = (1, 0, f"{dense_cost()} {FULL}")
RUNS["n19-gpt1b-mbs2"] = (1, 0, dense_cost(mbs=2))
RUNS["n20-gpt1b-gc"] = (1, 0, f"{dense_cost()} {GC}")
RUNS["n21-gpt1b-s4096-base"] = (1, 0, dense_cost(4096, 2, 8))
RUNS["n22-gpt1b-s4096-selective"] = (1, 0, f"{dense_cost(4096, 2, 8)} {SELECTIVE}")


# The same at hidden 4096 (attention a smaller share of the step): base at micro-batch 2 of 8 (n23), selective
# recompute (n24), micro-batch 1 (n25).
def wide_cost(mbs: int = 2) -> str:
    return f"{shape(8, 4096, 32, 2048, mbs, 32000, gbs=8)} --bf16 {DISTOPT} --train-iters 14"


RUNS["n23-gpt2b-h4096-base"] = (1, 0, wide_cost())
RUNS["n24-gpt2b-h4096-selective"] = (1, 0, f"{wide_cost()} {SELECTIVE}")
RUNS["n25-gpt2b-h4096-mbs1"] = (1, 0, wide_cost(mbs=1))

# The first change the advice now names, where the measured costs above moved it from selective recompute to a
# smaller micro-batch, each run as printed with twelve iterations, beside the selective recompute that ran before:
# g2-f040's OOM (fixtures/offload-sweep) with micro-batch 1 and manual gc (n26) against g2-f040-sel-gc again
# (n27); oom-capacity-recorded with micro-batch 1 (n28) against selective (n29); e19's with micro-batch 47 (e67)
# against e21 again (e68). The same global batch each time.
# The issue's GPT (fixtures/offload-sweep g1, g2): 3.35B parameters, biases, LayerNorm, tied embeddings.
GPT_3B = (
    "--num-layers 16 --hidden-size 4096 --ffn-hidden-size 16384 --num-attention-heads 32 --seq-length 2048 "
    f"--max-position-embeddings 2048 --vocab-size 32000 --bf16 {DISTOPT}"
)
TWELVE = "--train-iters 12"
RUNS["n26-gpt3b-f040-mbs1-gc-advised"] = (
    1,
    0,
    f"{GPT_3B} --micro-batch-size 1 --global-batch-size 4 {OFFLOAD} 0.4 {GC} {TWELVE}",
)
RUNS["n27-gpt3b-f040-sel-gc"] = (
    1,
    0,
    f"{GPT_3B} --micro-batch-size 2 --global-batch-size 4 {OFFLOAD} 0.4 {SELECTIVE} {GC} {TWELVE}",
)
RUNS["n28-h4096-s4096-mbs1-advised"] = (1, 0, f"{shape(8, 4096, 32, 4096, 1, 128256, gbs=4)} --bf16 {DISTOPT} {TWELVE}")
RUNS["n29-h4096-s4096-selective"] = (
    1,
    0,
    f"{shape(8, 4096, 32, 4096, 2, 128256)} --bf16 {DISTOPT} {SELECTIVE} {TWELVE}",
)
# n26 stepped 1.09x slower than n27 while n16-n25 put a smaller micro-batch before selective recompute: the same
# three (micro-batch 2, 1, selective at 2) without offloading (n30-n32) and with it (n33-n35) on one H200, where
# neither is near the memory limit.
for offload, first in (("", 30), (f"{OFFLOAD} 0.4 {GC}", 33)):
    for step, (name, flags) in enumerate((("mbs2", ""), ("mbs1", ""), ("sel", SELECTIVE))):
        mbs = 1 if name == "mbs1" else 2
        tag = f"-f040-{name}-gc" if offload else f"-{name}"
        RUNS[f"n{first + step}-gpt3b{tag}-h200"] = (
            1,
            0,
            " ".join(filter(None, (GPT_3B, f"--micro-batch-size {mbs} --global-batch-size 4", offload, flags, TWELVE))),
        )
RUNS["e67-moe8-ep2-top2-mbs47-advised-h200"] = (
    2,
    0,
    f"{moe_ep2_top2(47, gbs=188)} {TWELVE}",
)
RUNS["e68-moe8-ep2-top2-mbs94-selective-h200"] = (
    2,
    0,
    f"{moe_ep2_top2(94)} {SELECTIVE} --recompute-modules core_attn {TWELVE}",
)
# The other two OOMs whose first change moved to a smaller micro-batch, each as printed: e31 at 87 -> 29, the
# largest that divides its global batch over four data-parallel ranks (e69, four H200; 43 would be refused), and
# e37 at 12 -> 6 (e70, one H100).
# What PP x 2 and TP x 2 cost a dense run when data parallelism halves (the guide: ~6 % and -28 % on Llama3 70B):
# the 0.87B GPT on two H200 (H100 pairs were not lent), global batch 16: DP 2 (n36), PP 2 (n37: four micro-batches,
# a pipeline bubble of 1/4), TP 2 (n38), PP 2 at micro-batch 1 (n39: sixteen micro-batches).
RUNS["n36-gpt1b-dp2-h200"] = (2, 0, dense_cost())
RUNS["n37-gpt1b-pp2-h200"] = (2, 0, f"{dense_cost()} {PP2}")
RUNS["n38-gpt1b-tp2-h200"] = (2, 0, f"{dense_cost()} --tensor-model-parallel-size 2")
RUNS["n39-gpt1b-pp2-mbs1-h200"] = (2, 0, f"{dense_cost(mbs=1)} {PP2}")
# The bubble at eight micro-batches (1/8): global batch 32, DP 2 (n42) against PP 2 (n43).
RUNS["n42-gpt1b-dp2-gbs32-h200"] = (2, 0, dense_cost(gbs=32))
RUNS["n43-gpt1b-pp2-gbs32-h200"] = (2, 0, f"{dense_cost(gbs=32)} {PP2}")
# TP against PP where the advice's order turns on them (four micro-batches: PP's bubble 1/4 ranks before the guide's
# TP figure): the 3.35B GPT (hidden 4096), global batch 8 at micro-batch 2. Two GPUs: DP 2 (n44), PP 2 (n45), TP 2
# (n46); four: TP 2 x DP 2 (n47), TP 4 (n48, TP doubled past 2), TP 2 x PP 2 (n49).
TP = "--tensor-model-parallel-size"
GPT_3B_GBS8 = f"{GPT_3B} --micro-batch-size 2 --global-batch-size 8 {TWELVE}"
RUNS["n44-gpt3b-dp2-h200"] = (2, 0, GPT_3B_GBS8)
RUNS["n45-gpt3b-pp2-h200"] = (2, 0, f"{GPT_3B_GBS8} {PP2}")
RUNS["n46-gpt3b-tp2-h200"] = (2, 0, f"{GPT_3B_GBS8} {TP} 2")
RUNS["n47-gpt3b-tp2-dp2-h200"] = (4, 0, f"{GPT_3B_GBS8} {TP} 2")
RUNS["n48-gpt3b-tp4-h200"] = (4, 0, f"{GPT_3B_GBS8} {TP} 4")
RUNS["n49-gpt3b-tp2-pp2-h200"] = (4, 0, f"{GPT_3B_GBS8} {TP} 2 {PP2}")
# g1-f000's two cheapest changes, which the ranking of dense offloading by the guide's curve put in this order on
# a three-iteration comparison (g1-f000-sel-gc, g1-f005-gc): each for twelve iterations on one H100.
G1 = f"{GPT_3B} --micro-batch-size 1 --global-batch-size 2 {OFFLOAD}"
RUNS["n40-gpt3b-g1-sel-gc"] = (1, 0, f"{G1} 0.0 {SELECTIVE} {GC} {TWELVE}")
RUNS["n41-gpt3b-g1-f005-gc"] = (1, 0, f"{G1} 0.05 {GC} {TWELVE}")
RUNS["e69-moe16-ep4-top2-mbs29-advised-h200"] = (4, 0, f"{moe_ep4_top2(29, experts=16, gbs=348)[2]} {TWELVE}")
RUNS["e70-moe8-top4-cf2-pad-mbs6-advised"] = (
    1,
    0,
    f"{shape(8, 2048, 16, 2048, 6, 32000, gbs=24)} --bf16 {DISTOPT} --disable-bias-linear --num-experts 8 "
    f"--moe-router-topk 4 --moe-ffn-hidden-size 2048 --moe-expert-capacity-factor 2 --moe-pad-expert-input-to-capacity "
    f"{TWELVE}",
)
# A run's environment beyond the machine's (written to NAME.env; the finisher puts it before the command).
EXPANDABLE = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
RUN_ENV = dict.fromkeys(
    (
        "e20-moe8-ep2-top2-mbs94-expandable-h200",
        "e27-moe8-ep4-top2-mbs92-expandable-h200",
        "e33-moe16-ep4-top2-mbs87-expandable-h200",
    ),
    EXPANDABLE,
)
# The expandable-segments fix for a run that already sets allocator options keeps them in the same variable
# (config/derived.py allocator_options): e19 with a garbage-collection threshold of its own (e61), and with the
# variable `diagnose` prints for e61's out-of-memory log (e62).
RUNS["e61-moe8-ep2-top2-mbs94-gcthreshold-h200"] = E19
RUNS["e62-moe8-ep2-top2-mbs94-gcthreshold-expandable-h200"] = E19
RUN_ENV["e61-moe8-ep2-top2-mbs94-gcthreshold-h200"] = {"PYTORCH_CUDA_ALLOC_CONF": "garbage_collection_threshold:0.9"}
RUN_ENV["e62-moe8-ep2-top2-mbs94-gcthreshold-expandable-h200"] = {
    "PYTORCH_CUDA_ALLOC_CONF": "garbage_collection_threshold:0.9,expandable_segments:True"
}


def _planned_advice() -> dict:
    """The multi-GPU advice runs benchmarks/two_gpu_plan.py planned (entries with their own launch flags)."""
    import json

    plan = Path(__file__).resolve().parents[1] / "benchmarks" / "two_gpu_plan.json"
    entries = json.loads(plan.read_text()) if plan.exists() else {}
    return {name: (e["gpus"], 0, e["args"]) for name, e in entries.items() if "args" in e}


# t22 (fixtures/multi-gpu-advice: a 5B Llama at DP 2, out of memory under an H100's limit) whose first change
# moved to TP 1 -> 2 when TP was ranked by its measured cost (n44-n49): that change as printed (n50) and the
# micro-batch 1 it replaced (n51), each under the H100 cap, and the base uncapped on the H200s (n52), twelve
# iterations each.
H100_CAP = {"ODR_CAP_MIB": "77178"}
T22 = _planned_advice()["t22-llama5b-dp2-mbs2-0"][2]
RUNS["n50-llama5b-t22-tp2-advised-cap"] = (2, 0, f"{T22} --tensor-model-parallel-size 2 {TWELVE}")
RUNS["n51-llama5b-t22-mbs1-cap"] = (2, 0, f"{T22} --micro-batch-size 1 {TWELVE}")
RUNS["n52-llama5b-t22-base-h200"] = (2, 0, f"{T22} {TWELVE}")
RUN_ENV["n50-llama5b-t22-tp2-advised-cap"] = H100_CAP
RUN_ENV["n51-llama5b-t22-mbs1-cap"] = H100_CAP
# The offloading curve scaled by a rank's tokens a step (advice/slowdown.py) puts fraction 0.05 (~1.04x) first for
# the 0.87B GPT at 32,768 tokens (n16) at a 60 GiB target, ahead of micro-batch 4 -> 2 (n19, 1.04x): as printed.
RUNS["n53-gpt1b-f005-gc-advised"] = (1, 0, f"{dense_cost()} {OFFLOAD} 0.05 {GC}")

# Why t22's offloading cost more than the 0.47B GPT's curve scaled to its tokens (1.85x at 0.15 against 1.50x):
# torchrun sets OMP_NUM_THREADS=1 for every process when it starts more than one ("Setting OMP_NUM_THREADS
# environment variable for each process to be 1 in default"), so the CPU's Adam step ran on one core per rank,
# where the one-GPU curve's ran on all of them. The same runs with the threads a rank may use (32 cores, 2 ranks),
# twelve iterations each, against the uncapped base n52.
OMP_16 = {"OMP_NUM_THREADS": "16"}
RUNS["n54-llama5b-t22-f015-gc-h200"] = (2, 0, f"{T22} {OFFLOAD} 0.15 {GC} {TWELVE}")
RUNS["n55-llama5b-t22-f015-gc-omp16-h200"] = (2, 0, f"{T22} {OFFLOAD} 0.15 {GC} {TWELVE}")
RUNS["n56-llama5b-t22-f050-gc-h200"] = (2, 0, f"{T22} {OFFLOAD} 0.5 {GC} {TWELVE}")
RUNS["n57-llama5b-t22-f050-gc-omp16-h200"] = (2, 0, f"{T22} {OFFLOAD} 0.5 {GC} {TWELVE}")
RUN_ENV["n55-llama5b-t22-f015-gc-omp16-h200"] = OMP_16
RUN_ENV["n57-llama5b-t22-f050-gc-omp16-h200"] = OMP_16
# The same on four GPUs and another model (t18's 3.35B GPT at DP 4, 4,096 tokens a rank, offloading 0.5): the
# threads the advice's export gives there (64 cores over 4 GPUs: 16), against torchrun's one and no offloading.
GPT_3B_DP4 = f"{shape(16, 4096, 32, 2048, 1, 32000, gbs=8)} --ffn-hidden-size 16384 --bf16 {DISTOPT} {TWELVE}"
RUNS["n58-gpt3b-dp4-base-h200"] = (4, 0, GPT_3B_DP4)
RUNS["n59-gpt3b-dp4-f050-gc-h200"] = (4, 0, f"{GPT_3B_DP4} {OFFLOAD} 0.5 {GC}")
RUNS["n60-gpt3b-dp4-f050-gc-omp16-h200"] = (4, 0, f"{GPT_3B_DP4} {OFFLOAD} 0.5 {GC}")
RUN_ENV["n60-gpt3b-dp4-f050-gc-omp16-h200"] = OMP_16

# Offloading's cost with the optimizer state sharded over DP 2 and 4 (advice/slowdown.py SHARDED_FIXED_SHARE, fitted
# on n55, n57, n60), held out: the 3.35B GPT at DP 2 (8,192 tokens a rank), t22's 5B Llama at DP 4 (4,096), the
# 3.35B GPT at DP 4 at another fraction, each against its own base on the same machine, 16 threads a rank (the
# advice's export on a 64-core, 4-GPU host). Predicted before they ran (measured_slowdown as committed with them):
# n62 1.69x, n64 2.05x, n66 1.87x.
GPT_3B_DP2 = GPT_3B_DP4  # the same arguments on two GPUs
T22_DP4 = f"{T22} {TWELVE}"
RUNS["n61-gpt3b-dp2-base"] = (2, 0, GPT_3B_DP2)
RUNS["n62-gpt3b-dp2-f030-gc-omp16"] = (2, 0, f"{GPT_3B_DP2} {OFFLOAD} 0.3 {GC}")
RUNS["n63-llama5b-t22-dp4-base"] = (4, 0, T22_DP4)
RUNS["n64-llama5b-t22-dp4-f030-gc-omp16"] = (4, 0, f"{T22_DP4} {OFFLOAD} 0.3 {GC}")
RUNS["n65-gpt3b-dp4-base-again"] = (4, 0, GPT_3B_DP4)
RUNS["n66-gpt3b-dp4-f025-gc-omp16"] = (4, 0, f"{GPT_3B_DP4} {OFFLOAD} 0.25 {GC}")
# (Asked for four H200, they ran on four H100 of a 64-core host.) The OpenMP threads' change on that H100 host:
# two of them again with torchrun's one thread a rank, each beside its base and its 16-thread run again.
RUNS["n67-llama5b-t22-dp4-base-again"] = (4, 0, T22_DP4)
RUNS["n68-llama5b-t22-dp4-f030-gc"] = (4, 0, f"{T22_DP4} {OFFLOAD} 0.3 {GC}")
RUNS["n69-llama5b-t22-dp4-f030-gc-omp16-again"] = (4, 0, f"{T22_DP4} {OFFLOAD} 0.3 {GC}")
RUNS["n70-gpt3b-dp2-base-again"] = (2, 0, GPT_3B_DP2)
RUNS["n71-gpt3b-dp2-f030-gc"] = (2, 0, f"{GPT_3B_DP2} {OFFLOAD} 0.3 {GC}")
RUNS["n72-gpt3b-dp2-f030-gc-omp16-again"] = (2, 0, f"{GPT_3B_DP2} {OFFLOAD} 0.3 {GC}")
for _name in (
    "n62-gpt3b-dp2-f030-gc-omp16",
    "n64-llama5b-t22-dp4-f030-gc-omp16",
    "n66-gpt3b-dp4-f025-gc-omp16",
    "n69-llama5b-t22-dp4-f030-gc-omp16-again",
    "n72-gpt3b-dp2-f030-gc-omp16-again",
):
    RUN_ENV[_name] = OMP_16

# The sharded quote moved offloading ahead of full recompute in the 3.35B GPT's estimate at DP 2 and a 60 GiB target
# (n70: offloading 0.1 ~1.23x, full recompute 1.31x): the two as printed, against the base again, on one machine
# (the printed export gives 16 threads a rank on a 32-core, 2-GPU host). Planned for four GPUs first (n65's
# estimate), which were no longer lent; asked for two H100, they ran on two H200.
RUNS["n73-gpt3b-dp2-base-third-h200"] = (2, 0, GPT_3B_DP2)
RUNS["n74-gpt3b-dp2-f010-gc-omp16-advised-h200"] = (2, 0, f"{GPT_3B_DP2} {OFFLOAD} 0.1 {GC}")
RUNS["n75-gpt3b-dp2-full-recompute-advised-h200"] = (
    2,
    0,
    f"{GPT_3B_DP2} --recompute-granularity full --recompute-method uniform --recompute-num-layers 1",
)
RUN_ENV["n74-gpt3b-dp2-f010-gc-omp16-advised-h200"] = OMP_16

# Optimizer offloading without the precision-aware optimizer, as a config built without Megatron-LM's argument check
# has it (Megatron-LM#4042: HybridDeviceOptimizer's KeyError at the first step): the 0.87B GPT offloading 0.5
# without and with the distributed optimizer (ODR_PRECISION_AWARE_OFF: tools/compare_family_pretrain_gpt.py), and
# with both flags, as Megatron-LM requires them.
DENSE_NO_DISTOPT = dense_cost().replace(f" {DISTOPT}", "")
PRECISION_AWARE_OFF = {"ODR_PRECISION_AWARE_OFF": "1"}
RUNS["n76-gpt1b-f050-precision-aware-off"] = (1, 0, f"{DENSE_NO_DISTOPT} {OFFLOAD} 0.5 {GC}")
RUNS["n77-gpt1b-f050-precision-aware-off-distopt"] = (1, 0, f"{dense_cost()} {OFFLOAD} 0.5 {GC}")
RUNS["n78-gpt1b-f050-precision-aware-distopt"] = (1, 0, f"{dense_cost()} {OFFLOAD} 0.5 {GC}")
RUN_ENV["n76-gpt1b-f050-precision-aware-off"] = PRECISION_AWARE_OFF
RUN_ENV["n77-gpt1b-f050-precision-aware-off-distopt"] = PRECISION_AWARE_OFF


def unfused_gpt(layers, hidden, heads, seq, mbs=1, gbs=4, extra=""):
    """One GPU, the local (unfused) attention at a long sequence: the runs whose score tensors decide."""
    return (1, 0, f"{shape(layers, hidden, heads, seq, mbs, 32000, gbs=gbs)} --bf16 {DISTOPT}{extra}")


def again_with(name, run, env):
    """`run` (another run's launch) recorded again under `name` with `env` exported."""
    RUNS[name] = RUNS[run]
    RUN_ENV[name] = env


# One allocation larger than the whole GPU (the "larger than the GPU" OOM finding, from EasyEdit#563's figures until
# now): the local implementation's attention scores of 16 sequences of 16,384 tokens and 16 heads are one 128 GiB
# tensor. Expected: out of memory in the first forward, asking for more than the card's total capacity.
RUNS["n79-gpt-s16k-mbs16-one-allocation-over-the-gpu"] = unfused_gpt(2, 2048, 16, 16384, 16, gbs=32)

# n79's report: the one 128 GiB allocation is no memory setting's to fix; its numbers' cheapest change that fits the
# whole step is micro-batch 16 -> 1 (same global batch): run as printed.
RUNS["n80-gpt-s16k-mbs1-advised"] = unfused_gpt(2, 2048, 16, 16384, 1, gbs=32)

# n80 ran out of memory in its first backward (8 GiB asked; 55.83 GiB allocated, 14.41 GiB reserved but unallocated):
# `diagnose` calls it fragmentation and leads with expandable segments: run as printed.
again_with("n81-gpt-s16k-mbs1-expandable-advised", "n80-gpt-s16k-mbs1-advised", EXPANDABLE)

# The score gradient counted for every run with unfused attention (after n81), held out at other shapes: sequence
# 8,192 with 32 heads, and 12,288 with hidden 4,096, each with expandable segments (n80's lesson).
RUNS["n82-gpt-s8k-h32-expandable"] = unfused_gpt(2, 2048, 32, 8192)
RUNS["n83-gpt-s12k-h4096-expandable"] = unfused_gpt(2, 4096, 16, 12288)
RUN_ENV["n82-gpt-s8k-h32-expandable"] = EXPANDABLE
RUN_ENV["n83-gpt-s12k-h4096-expandable"] = EXPANDABLE

# What is still missing at long sequences (n81, n82: ~0.94 B per score element over the model, n83: 0.65): n82 without
# attention dropout (does the excess go with the dropout's backward?), and another shape (sequence 10,240, 20 heads).
RUNS["n84-gpt-s8k-h32-no-attention-dropout-expandable"] = unfused_gpt(2, 2048, 32, 8192, extra=" --attention-dropout 0")
RUNS["n85-gpt-s10k-h20-expandable"] = unfused_gpt(2, 2560, 20, 10240)
RUN_ENV["n84-gpt-s8k-h32-no-attention-dropout-expandable"] = EXPANDABLE
RUN_ENV["n85-gpt-s10k-h20-expandable"] = EXPANDABLE

# The attention core's backward as counted after n84 (6 B a score without attention dropout, 3 B with it), held out:
# no dropout at sequence 6,144 with 24 heads and three layers, and dropout at 12,288 with hidden 2,048.
RUNS["n86-gpt-s6k-h24-no-dropout-expandable"] = unfused_gpt(
    3, 3072, 24, 6144, extra=" --attention-dropout 0 --hidden-dropout 0"
)
RUNS["n87-gpt-s12k-h16-expandable"] = unfused_gpt(2, 2048, 16, 12288)
RUN_ENV["n86-gpt-s6k-h24-no-dropout-expandable"] = EXPANDABLE
RUN_ENV["n87-gpt-s12k-h16-expandable"] = EXPANDABLE

# The score tensors' fragmentation without expandable segments (memory/calibration.py FRAGMENTED_SCORE_TENSORS: "fits"
# allows 1.5 of them over the peak, between n80, which ran out of memory, and t21-4-cap, which ran), planned before
# recording on an H100, none with expandable segments unless named so. "Fits" near the edge: n88 (5,760 MiB score
# tensors, 1,001 MiB to spare), n90 (4,096 MiB, 266 to spare), n91 (7,776 MiB, 2,300 to spare); n89, n88 with
# expandable segments (the setting's step time). "Tight" only by the allowance: n92 (7,840 MiB tensors; the x 1.06
# slack alone leaves 6.3 GB), and n93, n92 as its estimate advises (expandable segments).
RUNS["n88-gpt-s12k-h20-l3-fits"] = unfused_gpt(3, 2560, 20, 12288)
again_with("n89-gpt-s12k-h20-l3-expandable", "n88-gpt-s12k-h20-l3-fits", EXPANDABLE)
RUNS["n90-gpt-s8k-h32-l5-fits"] = unfused_gpt(5, 2048, 32, 8192)
RUNS["n91-gpt-s18k-h12-l2-fits"] = unfused_gpt(2, 1536, 12, 18432)
RUNS["n92-gpt-s14k-h20-l2-tight"] = unfused_gpt(2, 2560, 20, 14336)
again_with("n93-gpt-s14k-h20-l2-expandable-advised", "n92-gpt-s14k-h20-l2-tight", EXPANDABLE)

# What expandable segments cost, the first change the advice now gives a run that only the score tensors'
# fragmentation keeps from fitting (quoted from the memory-tuning guide: 0.8 % less throughput). Fourteen
# iterations each, one after the other on one H100: n92's shape (n94) and with the setting (n95), and n16's 0.87B
# GPT (n96) and with it (n97). Expected: within 2 % of 1.00x at both.
RUNS["n94-gpt-s14k-h20-l2-base"] = unfused_gpt(2, 2560, 20, 14336, extra=" --train-iters 14")
again_with("n95-gpt-s14k-h20-l2-expandable", "n94-gpt-s14k-h20-l2-base", EXPANDABLE)
RUNS["n96-gpt1b-base-again"] = (1, 0, dense_cost())
RUNS["n97-gpt1b-expandable"] = (1, 0, dense_cost())
RUN_ENV["n97-gpt1b-expandable"] = EXPANDABLE

# The allowance on n80's own pattern (two layers, 16 heads, sequence 16,384: 8,192 MiB score tensors), hidden 1,024:
# "fits" with 358 MiB to spare at 1.5 tensors (n98; expected to run), and n80 again as it was (n99: is its
# out-of-memory repeatable?).
RUNS["n98-gpt-s16k-h1024-mbs1-fits"] = unfused_gpt(2, 1024, 16, 16384, 1, gbs=32)
RUNS["n99-gpt-s16k-mbs1-again"] = RUNS["n80-gpt-s16k-mbs1-advised"]

# Expert parallelism on H100s (every EP run so far was on H200s): e19's model at EP 2 on two H100, the largest
# micro-batch the verdict calls "fits" (43, 631 MiB to spare with the router's imbalance and the MoE slack; expected
# to run) and the smallest it calls "does not fit" (56: even the best case 735 MiB over; expected out of memory).
RUNS["e71-moe8-ep2-top2-mbs43-fits"] = (2, 0, moe_ep2_top2(43))
RUNS["e72-moe8-ep2-top2-mbs56-does-not-fit"] = (2, 0, moe_ep2_top2(56))
# Asked for two H100, e71 and e72 ran on two H200 (both trained, uncapped): the same two under the H100's limit
# (ODR_CAP_MIB, as n50/n51), e73 expected to run, e74 out of memory.
again_with("e73-moe8-ep2-top2-mbs43-fits-cap", "e71-moe8-ep2-top2-mbs43-fits", H100_CAP)
again_with("e74-moe8-ep2-top2-mbs56-does-not-fit-cap", "e72-moe8-ep2-top2-mbs56-does-not-fit", H100_CAP)
# The same two on real H100s, where they come (e75 expected to run, e76 out of memory).
RUNS["e75-moe8-ep2-top2-mbs43-fits"] = RUNS["e71-moe8-ep2-top2-mbs43-fits"]
RUNS["e76-moe8-ep2-top2-mbs56-does-not-fit"] = RUNS["e72-moe8-ep2-top2-mbs56-does-not-fit"]
# e74/e76 (micro-batch 56, "does not fit" on an H100 by the model, even the best case 735 MiB over; e72's rank 0
# peaked at 77,967 MiB allocated uncapped) ran out of memory, and e74's rank 0 with its request covered by
# reserved-but-unallocated memory: is that fragmentation? With expandable segments (e77; e77-cap on H200s under the
# H100's limit): expected out of memory again (capacity). The cheapest change `diagnose` prints for e74/e76,
# micro-batch 56 -> 28 (e78, e78-cap): expected to run.
again_with("e77-moe8-ep2-top2-mbs56-expandable", "e72-moe8-ep2-top2-mbs56-does-not-fit", EXPANDABLE)
again_with("e77-moe8-ep2-top2-mbs56-expandable-cap", "e72-moe8-ep2-top2-mbs56-does-not-fit", {**H100_CAP, **EXPANDABLE})
RUNS["e78-moe8-ep2-top2-mbs28-advised"] = (2, 0, moe_ep2_top2(28, 112))
again_with("e78-moe8-ep2-top2-mbs28-advised-cap", "e78-moe8-ep2-top2-mbs28-advised", H100_CAP)


# A MoE run's allocator slack (x 1.15 assumed, calibration.MOE_FIT_SLACK) falls to a dense run's with expandable
# segments, and the advice now offers the setting where that alone makes the run fit: e10 (micro-batch 12 on one
# H100, "tight") leads with it. e10 again, fourteen iterations (e79), and as advised (e80: "fits"; expected to
# run within the 78,216 MiB PyTorch may reserve): what the setting costs a MoE run's step, and its verdict.
def moe_top4_cost(mbs: int, gbs: int = 24, extra: str = "") -> tuple:
    """e10's MoE on one GPU, fourteen iterations: the runs that time a change against its base."""
    return (
        1,
        0,
        f"{shape(8, 2048, 16, 2048, mbs, 32000, gbs=gbs)} --bf16 {DISTOPT} --disable-bias-linear --num-experts 8 "
        f"--moe-router-topk 4 --moe-ffn-hidden-size 2048 --train-iters 14{extra}",
    )


RUNS["e79-moe8-top4-mbs12-base"] = moe_top4_cost(12)
again_with("e80-moe8-top4-mbs12-expandable-advised", "e79-moe8-top4-mbs12-base", EXPANDABLE)
# With that credit e46's third change (two H200, 80 experts, EP 1) is offloading 0.05 with expandable segments, where
# it was 0.15 (e49, which ran): as printed, with the host's cores over its GPUs as OpenMP threads (e81; "fits").
RUNS["e81-moe80-ep1-offload005-expandable-advised-h200"] = (2, 0, f"{moe_heavy(80)} {OFFLOAD} 0.05 {GC}")
RUN_ENV["e81-moe80-ep1-offload005-expandable-advised-h200"] = {**OMP_16, **EXPANDABLE}
# And e19's first change on an H100 (it was micro-batch 94 -> 2): 94 -> 47 with expandable segments, twelve
# iterations as e67 (47 on an H200 without them: its router drifted to 70,430 MiB, 7.7 % over the balanced
# model, reserving 76,542). Expected to run under the H100's limit (e82 on two H100; e82-cap on H200s).
RUNS["e82-moe8-ep2-top2-mbs47-expandable-advised"] = (2, 0, RUNS["e67-moe8-ep2-top2-mbs47-advised-h200"][2])
RUN_ENV["e82-moe8-ep2-top2-mbs47-expandable-advised"] = EXPANDABLE
again_with(
    "e82-moe8-ep2-top2-mbs47-expandable-advised-cap",
    "e82-moe8-ep2-top2-mbs47-expandable-advised",
    {**H100_CAP, **EXPANDABLE},
)


# What a micro-batch cut costs beyond halving (the advice quotes 1.04x-1.06x, measured at 4 -> 2 and 2 -> 1, for cuts
# such as 56 -> 7 or 94 -> 2): one H100, fourteen iterations each, one after the other, each base again on the same
# machine. e10's MoE at the same global batch (24): 12 (e83), 3 (e84, a quarter), 1 (e85, a twelfth); the 0.87B GPT
# (n16's) at 4 (n100) and 1 (n101, a quarter).
RUNS["e83-moe8-top4-mbs12-base-again"] = RUNS["e79-moe8-top4-mbs12-base"]
RUNS["e84-moe8-top4-mbs3"] = moe_top4_cost(3)
RUNS["e85-moe8-top4-mbs1"] = moe_top4_cost(1)
RUNS["n100-gpt1b-base-third"] = (1, 0, dense_cost())
RUNS["n101-gpt1b-mbs1"] = (1, 0, dense_cost(mbs=1))


# The order that cost now gives e34 (e10's MoE at micro-batch 11, one H100) at a 60 GiB target: selective recompute
# (~1.19x), full recompute (1.31x), micro-batch 11 -> 2 (~1.51x, interpolated between a quarter and a twelfth), each
# as printed, fourteen iterations, after the base (e86).
RUNS["e86-moe8-top4-mbs11-base"] = moe_top4_cost(11, 22)
RUNS["e87-moe8-top4-mbs11-selective"] = moe_top4_cost(
    11, 22, " --recompute-granularity selective --recompute-modules core_attn"
)
RUNS["e88-moe8-top4-mbs11-full"] = moe_top4_cost(11, 22, f" {FULL}")
RUNS["e89-moe8-top4-mbs2"] = moe_top4_cost(2, 22)
# Held out: the cut's curve on a wider model (n23's 2B GPT, hidden 4096, where 2 -> 1 stepped 1.06x): 4 (n102)
# -> 1 (n103), a quarter, quoted ~1.26x.
RUNS["n102-gpt2b-h4096-mbs4"] = (1, 0, wide_cost(mbs=4))
RUNS["n103-gpt2b-h4096-mbs1-again"] = (1, 0, wide_cost(mbs=1))

# Optimizer offloading with fp32 model parameters (Megatron-LM#6212, fixed on main by NVIDIA/Megatron-LM#6982, not in
# the 0.19.2 release): the distributed optimizer's shard of an fp32 parameter is a view of it, not a leaf, and
# HybridDeviceOptimizer hands it to torch.optim.Optimizer. n16's 0.87B GPT without --bf16, offloading 0.5 (n104) and
# 1.0 (n105: every shard is copied to the host, but the optimizer's own constructor sees the views first), both
# expected to be refused with "ValueError: can't optimize a non-leaf Tensor"; n104 with --bf16, the fix as printed
# (n106, expected to train). Then resuming an offloaded run from its checkpoint (NovaSky-AI/SkyRL#1403: a KeyError in
# HybridDeviceOptimizer._update_fp32_params_by_new_state on load): n78's launch saving at iteration 4 (n107), resumed
# to 8 (n108); the same with --dist-ckpt-optim-fully-reshardable (n109, n110). Outcome not predicted.
FP32_DENSE = dense_cost().replace(" --bf16", "")
RUNS["n104-gpt1b-fp32-f050"] = (1, 0, f"{FP32_DENSE} {OFFLOAD} 0.5 {GC}")
RUNS["n105-gpt1b-fp32-f100"] = (1, 0, f"{FP32_DENSE} {OFFLOAD} 1.0 {GC}")
RUNS["n106-gpt1b-fp32-f050-bf16-advised"] = (1, 0, f"{FP32_DENSE} {OFFLOAD} 0.5 {GC} --bf16")
SAVED = "--train-iters 4 --save /tmp/odr-ckpt-{0} --save-interval 4"
RESUMED = "--train-iters 8 --load /tmp/odr-ckpt-{0}"
RESHARDABLE = " --dist-ckpt-optim-fully-reshardable"
RUNS["n107-gpt1b-f050-save"] = (1, 0, f"{dense_cost()} {OFFLOAD} 0.5 {GC} {SAVED.format('a')}")
RUNS["n108-gpt1b-f050-resume"] = (1, 0, f"{dense_cost()} {OFFLOAD} 0.5 {GC} {RESUMED.format('a')}")
RUNS["n109-gpt1b-f050-save-reshardable"] = (1, 0, f"{dense_cost()} {OFFLOAD} 0.5 {GC} {SAVED.format('b')}{RESHARDABLE}")
RUNS["n110-gpt1b-f050-resume-reshardable"] = (
    1,
    0,
    f"{dense_cost()} {OFFLOAD} 0.5 {GC} {RESUMED.format('b')}{RESHARDABLE}",
)


# The memory model on a model trained in fp32 (activations 4 bytes an element, the logits without a copy), planned
# before they ran: n16's 0.87B GPT without --bf16 at micro-batch 2 (n111) and 4 (n112), one H100, three iterations.
def fp32_dense(mbs: int, gbs: int = 16) -> tuple:
    """n16's GPT trained in fp32 (no --bf16), three iterations."""
    return (1, 0, dense_cost(mbs=mbs, gbs=gbs).replace(" --bf16", "").replace(" --train-iters 14", ""))


RUNS["n111-gpt1b-fp32-mbs2"] = fp32_dense(2)
RUNS["n112-gpt1b-fp32-mbs4"] = fp32_dense(4)
# At micro-batch 5 of 20 the estimate says "does not fit" an H100 (n113, expected out of memory); its first change,
# now the largest smaller micro-batch that fits rather than at most half, 5 -> 4 (n114, expected to run).
RUNS["n113-gpt1b-fp32-mbs5"] = fp32_dense(5, 20)
RUNS["n114-gpt1b-fp32-mbs4-gbs20-advised"] = fp32_dense(4, 20)
# The same rule's other first changes, as printed: e10 at a 60 GiB target, micro-batch 12 -> 8 with expandable
# segments (was 12 -> 6), under the limit PyTorch may reserve of it (58,097 MiB: e90); e37 (capacity factor 2, padded)
# on an H100, 12 -> 8 (was 12 -> 6, which ran as e70: e91). Both expected to run.
RUNS["e90-moe8-top4-mbs8-expandable-cap60-advised"] = (
    1,
    0,
    RUNS["e10-moe8-top4-mbs12"][2].replace("--micro-batch-size 12", "--micro-batch-size 8"),
)
RUN_ENV["e90-moe8-top4-mbs8-expandable-cap60-advised"] = {"ODR_CAP_MIB": "58097", **EXPANDABLE}
RUNS["e91-moe8-top4-cf2-pad-mbs8-advised"] = (
    1,
    0,
    RUNS["e37-moe8-top4-cf2-pad-mbs12"][2].replace("--micro-batch-size 12", "--micro-batch-size 8"),
)

# What a cut to less than half costs (now the advice's first cut wherever such a size fits; quoted "at most the
# 1.04x-1.06x measured at half", not measured): one H100, fourteen iterations, each base again on the same machine.
# e10's MoE 12 -> 8 (e92 the base, e93; 1.5 times the micro-batches), the 0.87B GPT at global batch 24, 4 -> 3 (n115
# the base, n116; 1.33 times).
RUNS["e92-moe8-top4-mbs12-base-third"] = moe_top4_cost(12)
RUNS["e93-moe8-top4-mbs8"] = moe_top4_cost(8)
RUNS["n115-gpt1b-gbs24-mbs4"] = (1, 0, dense_cost(mbs=4, gbs=24))
RUNS["n116-gpt1b-gbs24-mbs3"] = (1, 0, dense_cost(mbs=3, gbs=24))


def moe_top4_etp(mbs: int, etp: int, ep: int) -> tuple:
    """Four GPUs, TP 1: 8 experts of f 1,024 at hidden 2,048, top-4, over expert TP `etp` x EP `ep` (= 4)."""
    return (
        4,
        0,
        f"{shape(8, 2048, 16, 1024, mbs, 32000, gbs=4 * mbs)} --bf16 {DISTOPT} --disable-bias-linear "
        f"--num-experts 8 --moe-router-topk 4 --moe-ffn-hidden-size 1024 --expert-model-parallel-size {ep} "
        f"--expert-tensor-parallel-size {etp}",
    )


# Expert tensor parallelism other than TP (memory/activations.py routed_expert_bytes, 2026-11-27): both dispatchers
# gather the expert-TP group's tokens, so a rank's experts process ETP x topk x its tokens, at 1/ETP of f. The model
# before read ETP only in the parameters and gave these three one figure, 26,636 MiB; now 32,804 (ETP 4), 28,692
# (ETP 2 x EP 2) and 26,636 (EP 4). On an H100's limit (H100_CAP): e97, ETP 4 at micro-batch 33, the largest "fits"
# now (64,524; expected to train), e98 at 44, "does not fit" now (85,049; before: 68,087, "tight"; expected out of
# memory). Planned in benchmarks/moe_plan.json before they ran.
RUNS["e94-moe8-top4-etp4-mbs16"] = moe_top4_etp(16, 4, 1)
RUNS["e95-moe8-top4-etp2-ep2-mbs16"] = moe_top4_etp(16, 2, 2)
RUNS["e96-moe8-top4-ep4-mbs16"] = moe_top4_etp(16, 1, 4)
RUNS["e97-moe8-top4-etp4-mbs33-fits-cap"] = moe_top4_etp(33, 4, 1)
RUNS["e98-moe8-top4-etp4-mbs44-does-not-fit-cap"] = moe_top4_etp(44, 4, 1)
RUN_ENV["e97-moe8-top4-etp4-mbs33-fits-cap"] = H100_CAP
RUN_ENV["e98-moe8-top4-etp4-mbs44-does-not-fit-cap"] = H100_CAP
# The alltoall dispatcher gathers the expert-TP group's tokens after its all-to-all (token_dispatcher.py
# MoEAlltoAllTokenDispatcher: `gather_from_sequence_parallel_region` over `expt_tp`), its bookkeeping being an argsort
# of the rank's own tokens: e94 and e95 with `--moe-token-dispatcher-type alltoall` (e99: ETP 4, no expert
# parallelism, so no router imbalance; e100: ETP 2 x EP 2). Planned in benchmarks/moe_plan.json before they ran.
_ALLTOALL = " --moe-token-dispatcher-type alltoall"
RUNS["e99-moe8-top4-etp4-alltoall-mbs16"] = (4, 0, RUNS["e94-moe8-top4-etp4-mbs16"][2] + _ALLTOALL)
RUNS["e100-moe8-top4-etp2-ep2-alltoall-mbs16"] = (4, 0, RUNS["e95-moe8-top4-etp2-ep2-mbs16"][2] + _ALLTOALL)
# The verdict with expert TP beside EP, where the router's imbalance counts (e95): under an H100's limit, ETP 2 x EP 2
# at micro-batch 35, the largest "fits" (59,261 MiB balanced; expected to train), and at 46, the smallest "does not
# fit" (76,958; expected out of memory). Planned in benchmarks/moe_plan.json before they ran.
RUNS["e101-moe8-top4-etp2-ep2-mbs35-fits-cap"] = moe_top4_etp(35, 2, 2)
RUNS["e102-moe8-top4-etp2-ep2-mbs46-does-not-fit-cap"] = moe_top4_etp(46, 2, 2)
RUN_ENV["e101-moe8-top4-etp2-ep2-mbs35-fits-cap"] = H100_CAP
RUN_ENV["e102-moe8-top4-etp2-ep2-mbs46-does-not-fit-cap"] = H100_CAP
# The fix diagnose prints for e98's out-of-memory log, as printed: `--micro-batch-size 22` (44 -> 22 at the same global
# batch, 176: "peak 43,999 MiB"), under the same limit (expected to train). Planned in benchmarks/moe_plan.json.
RUNS["e103-moe8-top4-etp4-mbs22-cap-advised"] = (
    4,
    0,
    RUNS["e98-moe8-top4-etp4-mbs44-does-not-fit-cap"][2].replace("--micro-batch-size 44", "--micro-batch-size 22"),
)
RUN_ENV["e103-moe8-top4-etp4-mbs22-cap-advised"] = H100_CAP

# Optimizer offloading in fp16 (dynamic loss scaling, the precision-aware optimizer's fp32 master weights): n16's GPT
# with --fp16 offloading 0.5 (n117), three iterations; outcome not predicted, memory planned.
RUNS["n117-gpt1b-fp16-f050"] = (
    1,
    0,
    f"{dense_cost().replace(' --bf16', ' ' + FP16).replace(' --train-iters 14', '')} {OFFLOAD} 0.5 {GC}",
)

# n117 stopped at its first step on `assert param.decoupled_grad.dtype in [torch.float32, torch.bfloat16]`
# (clip_grads.py): the precision-aware optimizer's fp16 gradients. In bf16, the fix the signature prints (n118:
# --fp16 removed, --bf16 added), and with gradient clipping off (n119: --clip-grad 0.0, the assert's only caller
# skipped). Both expected to train.
N117 = RUNS["n117-gpt1b-fp16-f050"][2]
RUNS["n118-gpt1b-fp16-f050-bf16-advised"] = (1, 0, f"{N117.replace(' --fp16', '')} --bf16")
RUNS["n119-gpt1b-fp16-f050-no-clip"] = (1, 0, f"{N117} --clip-grad 0.0")
# The decoupled gradient is the DDP gradient buffer's shard: fp16 in fp16, where Megatron-LM leaves
# --accumulate-allreduce-grads-in-fp32 off (it turns it on for bf16). n117 with it (n120): expected to train, in fp16.
RUNS["n120-gpt1b-fp16-f050-grads-fp32"] = (1, 0, f"{N117} --accumulate-allreduce-grads-in-fp32")

# 16-bit gradients reach the optimizer as fp32 copies (calibration.FP32_GRAD_COPY_BYTES, mended on n119). Held out,
# planned before they ran. With offloading, HybridDeviceOptimizer keeps the copies of the part on the GPU: bf16 with
# --grad-reduce-in-bf16 (n121, n78's launch, three iterations) and fp16 at a quarter offloaded (n122, n119's launch).
# Without it the distributed optimizer's copy lives from the step to zero_grad, seen where the step is the peak: c02's
# 4-layer GPT with --grad-reduce-in-bf16 (n123), and n04's fp16 GQA with --accumulate-allreduce-grads-in-fp32 (n124:
# fp32 gradients are not copied; the model counted a copy for every fp16 run before).
N78_SHORT = RUNS["n78-gpt1b-f050-precision-aware-distopt"][2].replace(" --train-iters 14", "")
RUNS["n121-gpt1b-f050-grads-bf16"] = (1, 0, f"{N78_SHORT} --grad-reduce-in-bf16")
RUNS["n122-gpt1b-fp16-f025-no-clip"] = (1, 0, f"{N117.replace(f'{OFFLOAD} 0.5', f'{OFFLOAD} 0.25')} --clip-grad 0.0")
RUNS["n123-h4096-l4-grads-bf16"] = (1, 0, f"{RUNS['c02-h4096-l4'][2]} --grad-reduce-in-bf16")
RUNS["n124-fp16-gqa-grads-fp32"] = (1, 0, f"{RUNS['n04-fp16-gqa'][2]} --accumulate-allreduce-grads-in-fp32")
# Fine-grained activation offloading without Transformer Engine (Megatron-LM's validate_args refuses it; outcome
# expected: "Fine-grained activation offloading is only supported with transformer_engine implementation").
RUNS["n125-gpt1b-fine-grained-local"] = (
    1,
    0,
    f"{dense_cost().replace(' --train-iters 14', '')} --fine-grained-activation-offloading --offload-modules core_attn",
)
# Is n108's resume failure (`assert len(steps) == 1`, distrib_optimizer.py, the branch taken without Apex or TE)
# offloading's? The same save (n126) and resume (n127) without offloading: by the source, expected to fail alike.
RUNS["n126-gpt1b-save"] = (1, 0, f"{dense_cost()} {GC} {SAVED.format('c')}")
RUNS["n127-gpt1b-resume"] = (1, 0, f"{dense_cost()} {GC} {RESUMED.format('c')}")

# Optimizer offloading without the precision-aware optimizer (what Bridge and megatron-core take; Megatron-LM's check
# refuses it, so ODR_PRECISION_AWARE_OFF as n77): the distributed optimizer's fp32 main parameters of the offloaded
# part stay on the GPU (mended on n77: -4.0 % -> -0.01 %), and its step copies every shard's 16-bit gradients. Held
# out, planned: n77's launch at a quarter offloaded (n128); c02's 4-layer GPT (its peak at the step) offloading half
# with --grad-reduce-in-bf16, without (n129) and with (n130) the precision-aware optimizer.
RUNS["n128-gpt1b-f025-precision-aware-off-distopt"] = (
    1,
    0,
    RUNS["n77-gpt1b-f050-precision-aware-off-distopt"][2].replace(f"{OFFLOAD} 0.5", f"{OFFLOAD} 0.25"),
)
RUN_ENV["n128-gpt1b-f025-precision-aware-off-distopt"] = PRECISION_AWARE_OFF


def without_and_with_precision_aware(without: str, with_it: str, args: str) -> None:
    """One launch twice: without the precision-aware optimizer (ODR_PRECISION_AWARE_OFF, as n77), and with it."""
    RUNS[without] = (1, 0, args)
    RUN_ENV[without] = PRECISION_AWARE_OFF
    RUNS[with_it] = (1, 0, args)


without_and_with_precision_aware(
    "n129-h4096-l4-f050-grads-bf16-precision-aware-off",
    "n130-h4096-l4-f050-grads-bf16",
    f"{RUNS['c02-h4096-l4'][2]} {OFFLOAD} 0.5 {GC} --grad-reduce-in-bf16",
)

# The advice's new change for offloading without the precision-aware optimizer (Bridge's and megatron-core's
# default): benchmarks/advice_runs.json's 6.66B GPT (full recompute, micro-batch 2, offloading all of its optimizer)
# with 40 layers (8.2B), planned on one H100: without the flag (ODR_PRECISION_AWARE_OFF, as n77) "does not fit" (the
# offloaded fp32 main parameters stay: 33 GB), expected out of memory; with it, the only change `estimate` offers
# (`--use-precision-aware-optimizer`, measured 1.18x at n77/n78), "fits", expected to train.
GPT8B_F100 = (
    "--num-layers 40 --hidden-size 4096 --ffn-hidden-size 16384 --num-attention-heads 32 --seq-length 2048 "
    "--max-position-embeddings 2048 --vocab-size 50304 --bf16 --use-distributed-optimizer --micro-batch-size 2 "
    "--global-batch-size 4 --optimizer-cpu-offload --use-precision-aware-optimizer --optimizer-offload-fraction 1.0 "
    "--recompute-granularity full --recompute-method uniform --recompute-num-layers 1"
)
without_and_with_precision_aware(
    "n131-gpt8b-f100-full-precision-aware-off-does-not-fit", "n132-gpt8b-f100-full-precision-aware-advised", GPT8B_F100
)

# The precision-aware change where the host holds the state: n132's host did not (8.27B offloaded). g1's 3.35B GPT
# offloading all of it (fixtures/offload-sweep g1-f100) at micro-batch 3, planned on one H100: without the flag
# (n133, ODR_PRECISION_AWARE_OFF) "does not fit", expected out of memory; with it (n134, the change `estimate`
# prints; the host at least 50 GiB) "fits", expected to train.
G1_MBS3 = (
    "--num-layers 16 --hidden-size 4096 --ffn-hidden-size 16384 --num-attention-heads 32 --seq-length 2048 "
    "--max-position-embeddings 2048 --vocab-size 32000 --bf16 --use-distributed-optimizer --micro-batch-size 3 "
    f"--global-batch-size 6 {OFFLOAD} 1.0 {GC}"
)
without_and_with_precision_aware(
    "n133-gpt3b-f100-mbs3-precision-aware-off-does-not-fit", "n134-gpt3b-f100-mbs3-precision-aware-advised", G1_MBS3
)

# The host-memory finding's fix where the GPU has room: l1's 5.1B Llama (fixtures/offload-sweep l1-f075, which
# trained) offloading all of it (n135: the host at least 76 GiB; the 6.66B GPT's 0.8, at least 80 GiB, was killed on
# this host kind: expected killed) and at 0.75, a smaller share (n136: at least 58 GiB, the GPU 56,604 MiB: expected
# to train).
L1_F100 = (
    "--num-layers 24 --hidden-size 4096 --ffn-hidden-size 11008 --num-attention-heads 32 --seq-length 2048 "
    "--max-position-embeddings 2048 --vocab-size 32000 --bf16 --use-distributed-optimizer --swiglu --normalization "
    "RMSNorm --position-embedding-type rope --no-rope-fusion --disable-bias-linear "
    "--untie-embeddings-and-output-weights --recompute-granularity selective --micro-batch-size 1 "
    f"--global-batch-size 2 {OFFLOAD} 1.0"
)
RUNS["n135-llama5b-f100-host"] = (1, 0, L1_F100)
RUNS["n136-llama5b-f075-host-advised"] = (1, 0, L1_F100.replace(f"{OFFLOAD} 1.0", f"{OFFLOAD} 0.75"))

# The slowdown finding's fix pastes the guide's 0.25 (optimizer-offload-slowdown). For p38's 6.66B GPT, which trained
# at 0.65 (68,712 MiB on one H100), `estimate --gpu H100-80GB` says 0.25 DOES NOT FIT: 99,134 MiB, 29,494 short
# (planned before it ran; the finding now says what the lower fraction costs the GPU). Expected: out of memory.
A7B_FULL = (
    "--num-layers 32 --hidden-size 4096 --ffn-hidden-size 16384 --num-attention-heads 32 --seq-length 2048 "
    "--max-position-embeddings 2048 --vocab-size 50304 --bf16 --use-distributed-optimizer --micro-batch-size 2 "
    "--global-batch-size 4 --recompute-granularity full --recompute-method uniform --recompute-num-layers 1"
)
RUNS["n137-gpt7b-f025-gc-slowdown-fix"] = (1, 0, f"{A7B_FULL} {OFFLOAD} 0.25 {GC}")

RUNS.update(_planned_advice())
# Shares one GPU; the runs are packed under this many GB at once.
GPU_BUDGET_GB = 70
PARALLEL = 4


# An OOM raised while the model is built (scanning/oom.py raised_while_building; fixtures/held-out ms-swift#9191):
# a 4.97B GPT (24 layers, hidden 4096) on two GPUs where PyTorch may reserve 24,291 MiB each, what `estimate
# --gpu-memory 28GiB` gives (ODR_CAP_MIB, as n50/n51). At DP 2 each rank builds the whole model: 28,429 MiB of
# weights and fp32 gradient buffers in get_model (b01). The claim the fix makes, run: the optimizer's offloading
# cannot help it (b02, out of memory in get_model too); spreading the parameters gets past the build (b03, PP 2:
# out of memory later, at the optimizer's state); and PP 2 with the change `estimate` prints for b03's launch
# (offloading at fraction 0.95, --manual-gc, OMP_NUM_THREADS at the host's cores over its GPUs) trains: "fits",
# 21,973 MiB (b04). Planned in benchmarks/build_oom_plan.json before they ran.
GPT_5B_BUILD = f"{shape(24, 4096, 32, 1024, 1, 32000, gbs=8)} --bf16 {DISTOPT}"
CAP_28G = {"ODR_CAP_MIB": "24291"}
RUNS["b01-gpt5b-dp2-cap28-build-oom"] = (2, 0, GPT_5B_BUILD)
RUNS["b02-gpt5b-dp2-offload-cap28-build-oom"] = (2, 0, f"{GPT_5B_BUILD} {OFFLOAD} 1 {GC}")
RUNS["b03-gpt5b-pp2-cap28"] = (2, 0, f"{GPT_5B_BUILD} {PP2}")
RUNS["b04-gpt5b-pp2-offload-gc-cap28-advised"] = (2, 0, f"{GPT_5B_BUILD} {PP2} {OFFLOAD} 0.95 {GC}")
for _name in ("b01-gpt5b-dp2-cap28-build-oom", "b02-gpt5b-dp2-offload-cap28-build-oom", "b03-gpt5b-pp2-cap28"):
    RUN_ENV[_name] = CAP_28G
RUN_ENV["b04-gpt5b-pp2-offload-gc-cap28-advised"] = {**CAP_28G, "OMP_NUM_THREADS": "16"}
# The lines diagnose printed for b01's and b02's logs, each run as printed (planned after b01-b04 ran, before these
# did): b01's, PP 2 first and then selective recompute and offloading at fraction 1 ("fits", 19,469 MiB: b06); b02's,
# TP 2 beside the offloading it has ("fits", 18,971 MiB: b05).
RUNS["b05-gpt5b-tp2-offload-cap28-advised"] = (2, 0, f"{GPT_5B_BUILD} {OFFLOAD} 1 {GC} --tensor-model-parallel-size 2")
RUNS["b06-gpt5b-pp2-sel-offload-cap28-advised"] = (
    2,
    0,
    f"{GPT_5B_BUILD} {PP2} {SELECTIVE} --optimizer-cpu-offload --optimizer-offload-fraction 1 "
    "--use-precision-aware-optimizer",
)
RUN_ENV["b05-gpt5b-tp2-offload-cap28-advised"] = CAP_28G
RUN_ENV["b06-gpt5b-pp2-sel-offload-cap28-advised"] = CAP_28G
# Another process on the GPU (scanning/oom.py other_processes_first; held-out verl#5840): n16's 0.87B GPT (46,388 MiB
# at its peak on an H100) started while a second process holds 40 GiB of the card (the device command starts it;
# b07), then alone (b08): the change diagnose prints for b07's OOM, "free them first".
RUNS["b07-gpt1b-beside-a-40g-process"] = (1, 0, dense_cost())
RUNS["b08-gpt1b-alone-advised"] = (1, 0, dense_cost())
# Where the other process must stay: the change diagnose prints next for b07's OOM, micro-batch 4 -> 2, beside the
# same 40 GiB process ("fits": 36,734 MiB left to PyTorch; planned after b07/b08 ran, before b09 did).
RUNS["b09-gpt1b-mbs2-beside-a-40g-process-advised"] = (1, 0, dense_cost(mbs=2))
# A mostly frozen model (advice/fix_numbers.py trainable_share; held-out FlagScale LoRA run): n21's GPT at 8,192
# tokens, every parameter but the layer norms frozen before DDP wraps it (ODR_TRAIN_ONLY), so its gradient buckets
# hold 0.01 % of the parameters. Out of memory in the forward's attention scores (b10); diagnose's fix for it,
# selective recompute, trains (b11); the optimizer lines the fix gave before, at their most (the distributed
# optimizer, all of the state offloaded), do not (b12). Planned in benchmarks/build_oom_plan.json before they ran.
FROZEN_S8K = f"{shape(16, 2048, 16, 8192, 1, 32000, gbs=2)} --bf16"
RUNS["b10-gpt1b-frozen-s8k-oom"] = (1, 0, FROZEN_S8K)
RUNS["b11-gpt1b-frozen-s8k-sel-advised"] = (1, 0, f"{FROZEN_S8K} {SELECTIVE}")
RUNS["b12-gpt1b-frozen-s8k-offload-all"] = (1, 0, f"{FROZEN_S8K} {DISTOPT} {OFFLOAD} 1 {GC}")
for _name in ("b10-gpt1b-frozen-s8k-oom", "b11-gpt1b-frozen-s8k-sel-advised", "b12-gpt1b-frozen-s8k-offload-all"):
    RUN_ENV[_name] = {"ODR_TRAIN_ONLY": "layernorm"}
# Held-out megatron-legacy-gpt2-mbs10 (batch 6): GPT-2 small in fp16 at micro-batch 10 ran out of memory on a
# 15.77 GiB card; diagnose's fix, once the tokenizer's vocabulary was read, is a smaller micro-batch. Its shape on
# the wheel route, where PyTorch may reserve what `estimate --gpu-memory 15.77GiB` gives it (12,805 MiB): b13 the
# OOM, b14/b15 micro-batch 5 and 4 (the fix diagnose prints for b13's own log names one of them). Planned in
# benchmarks/build_oom_plan.json before they ran.
GPT2_SMALL = f"{shape(12, 768, 12, 1024, 10, 50257, gbs=10)} {FP16}"
CAP_16G = {"ODR_CAP_MIB": "12805"}
RUNS["b13-gpt2s-mbs10-cap16-oom"] = (1, 0, GPT2_SMALL)
RUNS["b14-gpt2s-mbs5-cap16"] = (1, 0, GPT2_SMALL.replace("--micro-batch-size 10", "--micro-batch-size 5"))
RUNS["b15-gpt2s-mbs4-cap16"] = (
    1,
    0,
    GPT2_SMALL.replace("--micro-batch-size 10", "--micro-batch-size 4").replace(
        "--global-batch-size 10", "--global-batch-size 8"
    ),
)
for _name in ("b13-gpt2s-mbs10-cap16-oom", "b14-gpt2s-mbs5-cap16", "b15-gpt2s-mbs4-cap16"):
    RUN_ENV[_name] = CAP_16G
# The expert grid's refusal on a real launch (signature expert-grid-divides-world): e05's MoE with EP 4 on two GPUs,
# refused by initialize_model_parallel (b16); diagnose's fix for that log names EP 2, which is e05 itself, run again
# here (b17). Planned in benchmarks/build_oom_plan.json before they ran.
MOE_EP4 = RUNS["e05-moe8-ep2"][2].replace("--expert-model-parallel-size 2", "--expert-model-parallel-size 4")
RUNS["b16-moe8-ep4-on-2-gpus-refused"] = (2, 0, MOE_EP4)
RUNS["b17-moe8-ep2-advised"] = (2, 0, RUNS["e05-moe8-ep2"][2])
# "No single change fits; the one that frees the most" (advice/fix_numbers.py change_that_helps_most): a 0.88B GPT at
# 4,096 tokens, local implementation, capped at what `estimate --gpu-memory 16GiB` lets PyTorch reserve (13,041 MiB),
# runs out of memory (b18). The model ranks the single changes it tries, none of which fits: full recompute
# 19,032 MiB, selective recompute of core_attn 21,868, optimizer offloading at fraction 1 31,257 (Transformer Engine
# does not install here). b19-b22 run the base and each change without the cap, to measure each peak: the claim
# holds if every change peaks over 13,041 MiB and full recompute lowest. Planned before they ran.
HELPS_MOST = f"{shape(16, 2048, 16, 4096, 1, 32000, gbs=2)} --bf16"
RUNS["b18-gpt1b-s4k-cap16-oom"] = (1, 0, HELPS_MOST)
RUN_ENV["b18-gpt1b-s4k-cap16-oom"] = {"ODR_CAP_MIB": "13041"}
RUNS["b19-gpt1b-s4k-full"] = (1, 0, f"{HELPS_MOST} {FULL}")
RUNS["b20-gpt1b-s4k-selective"] = (1, 0, f"{HELPS_MOST} {SELECTIVE} --recompute-modules core_attn")
RUNS["b21-gpt1b-s4k-offload-all"] = (1, 0, f"{HELPS_MOST} {DISTOPT} {OFFLOAD} 1 {GC}")
RUNS["b22-gpt1b-s4k"] = (1, 0, HELPS_MOST)
# Start-up refusals of the catalogue whose fixes need no Transformer Engine, on a real launch (b23-b29, odd: the
# refusal); each fix is the one diagnose prints for that run's own log, run in a second batch (even numbers), planned
# after the refusals were recorded and before the fixes ran (benchmarks/build_oom_plan.json).
TINY_GPT = f"{shape(4, 512, 8, 512, 2, 32000)} --bf16"
TINY_MOE = (
    f"{shape(4, 512, 8, 512, 2, 32000)} --bf16 {DISTOPT} --disable-bias-linear --num-experts 4 --moe-router-topk 2 "
    "--moe-ffn-hidden-size 1024 --moe-token-dispatcher-type alltoall"
)
RUNS["b23-tiny-offload-no-distopt-refused"] = (
    1,
    0,
    f"{TINY_GPT} --optimizer-cpu-offload --optimizer-offload-fraction 0.5 --use-precision-aware-optimizer",
)
RUNS["b25-tiny-moe-pad-no-factor-refused"] = (1, 0, f"{TINY_MOE} --moe-pad-expert-input-to-capacity")
RUNS["b27-tiny-moe-factor-sinkhorn-refused"] = (
    1,
    0,
    f"{TINY_MOE} --moe-expert-capacity-factor 1.0 --moe-router-load-balancing-type sinkhorn",
)
RUNS["b29-gpt6l-pp2-vpp2-refused"] = (
    2,
    0,
    f"{shape(6, 512, 8, 512, 1, 32000, gbs=8)} --bf16 {PP2} --num-virtual-stages-per-pipeline-rank 2",
)
# The fix diagnose printed for each refusal's log (recorded 10:24 UTC; planned before these ran).
RUNS["b24-tiny-offload-distopt-advised"] = (1, 0, f"{RUNS['b23-tiny-offload-no-distopt-refused'][2]} {DISTOPT}")
RUNS["b26-tiny-moe-pad-factor-advised"] = (
    1,
    0,
    f"{RUNS['b25-tiny-moe-pad-no-factor-refused'][2]} --moe-expert-capacity-factor 1",
)
RUNS["b28-tiny-moe-factor-aux-loss-advised"] = (
    1,
    0,
    RUNS["b27-tiny-moe-factor-sinkhorn-refused"][2].replace("balancing-type sinkhorn", "balancing-type aux_loss"),
)
RUNS["b30-gpt6l-pp2-advised"] = (
    2,
    0,
    RUNS["b29-gpt6l-pp2-vpp2-refused"][2].replace(" --num-virtual-stages-per-pipeline-rank 2", ""),
)
# Two refusals recorded earlier whose printed fix had not been run (planned before these ran): n125, fine-grained
# activation offloading on the local implementation, fixed by `remove --fine-grained-activation-offloading from the
# launch command` (its --offload-modules stays, as printed); fixtures/cpu-offload-requires-te's run, layer-level
# activation offloading without Transformer Engine, fixed by `--cpu-offloading-num-layers 0`.
RUNS["b31-gpt1b-fine-grained-removed-advised"] = (
    1,
    0,
    f"{shape(16, 2048, 16, 2048, 4, 32000, gbs=16)} --bf16 {DISTOPT} --offload-modules core_attn",
)
RUNS["b32-gpt8l-cpu-offload-layers-0-advised"] = (
    1,
    0,
    f"{shape(8, 2048, 16, 1024, 4, 32000, gbs=8)} --bf16 {DISTOPT} --cpu-offloading-num-layers 0",
)
# optimizer-offload-fraction-range: megatron-core does not check the fraction. HybridDeviceOptimizer offloads
# parameters while the offloaded count is under fraction x all of them (_get_sub_optimizer_param_groups), so a
# fraction over 1 should offload all of it, as 1 does, and a negative one none, as 0 does (read in 0.19.0's source;
# planned before these ran): b33-b36 measure each pair's peak.
RANGE_GPT = f"{shape(8, 1024, 16, 1024, 2, 32000)} --bf16 {DISTOPT} {GC} --optimizer-cpu-offload --use-precision-aware-optimizer"
for _name, _fraction in (("b33", "1.5"), ("b34", "1.0"), ("b35", "-1"), ("b36", "0.0")):
    RUNS[f"{_name}-gpt-offload-fraction-{_fraction}"] = (1, 0, f"{RANGE_GPT} --optimizer-offload-fraction {_fraction}")
# nccl-ub-expandable-segments: megatron-core 0.16.1 refuses NCCL user buffers with expandable segments on any torch;
# 0.19.0 only below torch 2.11 (DistributedDataParallelConfig.__post_init__). On this machine's torch 2.11 and 0.19.0:
# the pair at DP 2 (b37), and user buffers alone (b38). Planned before they ran.
NCCL_UB_GPT = f"{shape(8, 1024, 16, 1024, 2, 32000, gbs=8)} --bf16 {DISTOPT} --use-nccl-ub"
RUNS["b37-gpt-dp2-nccl-ub-expandable"] = (2, 0, NCCL_UB_GPT)
RUN_ENV["b37-gpt-dp2-nccl-ub-expandable"] = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
RUNS["b38-gpt-dp2-nccl-ub"] = (2, 0, NCCL_UB_GPT)
# The line diagnose prints today for n133's OOM (g1's 3.35B GPT offloading all of it at micro-batch 3, without the
# precision-aware optimizer): selective recompute, the model's cheapest change that fits, never run (n134 ran the
# precision-aware change). On an H100, as n133 was; planned before it ran.
RUNS["b39-gpt3b-f100-mbs3-selective-advised"] = (1, 0, f"{G1_MBS3} {SELECTIVE} --recompute-modules core_attn")
RUN_ENV["b39-gpt3b-f100-mbs3-selective-advised"] = {"ODR_PRECISION_AWARE_OFF": "1"}

# Refusals of activation offloading on the local implementation, where Transformer Engine is not there to offload at
# all (cpu-offload-requires-te). Their own fixes (recompute off; fewer layers) would stop at that refusal next, so
# diagnose now prints the fix that settles both (report/fixes.py _leads_into_another_refusal). Planned before they
# ran, from diagnose on logs composed with the same config; the tests check each refusal's own log prints them.
# b40-b42: recompute with activation offloading, on a 32 GiB card's budget (`estimate --gpu-memory 32GiB`: PyTorch
# may reserve 29,425 MiB). The printed fix keeps full recompute (b41, expected to train near b19's 19,032 MiB); the
# lines printed before (recompute removed, offloading off) are run as printed (b42, expected out of memory: b22
# peaked over 41 GiB).
CAP_32G = {"ODR_CAP_MIB": "29425"}
RUNS["b40-gpt1b-s4k-full-cpu-offload-refused"] = (1, 0, f"{HELPS_MOST} {FULL} --cpu-offloading-num-layers 2")
RUNS["b41-gpt1b-s4k-full-offload-off-cap32-advised"] = (1, 0, f"{HELPS_MOST} {FULL} --cpu-offloading-num-layers 0")
RUNS["b42-gpt1b-s4k-recompute-off-cap32-before"] = (
    1,
    0,
    f"{HELPS_MOST} --recompute-method uniform --recompute-num-layers 1 --cpu-offloading-num-layers 0",
)
for _name in ("b40-gpt1b-s4k-full-cpu-offload-refused", "b41-gpt1b-s4k-full-offload-off-cap32-advised"):
    RUN_ENV[_name] = CAP_32G
RUN_ENV["b42-gpt1b-s4k-recompute-off-cap32-before"] = CAP_32G
# b43-b44: every layer offloaded (cpu-offload-num-layers); b45-b46: activation offloading with PP 2 (pp-cpu-offload);
# b47-b48: optimizer offloading without the precision-aware optimizer (optimizer-offload-precision-aware); b49:
# b33's fraction 1.5 with the fraction diagnose prints for b33's log (optimizer-offload-fraction-range).
RUNS["b43-tiny-cpu-offload-all-layers-refused"] = (1, 0, f"{TINY_GPT} --cpu-offloading-num-layers 4")
RUNS["b44-tiny-cpu-offload-off-advised"] = (1, 0, f"{TINY_GPT} --cpu-offloading-num-layers 0")
PP2_OFFLOAD = f"{shape(6, 512, 8, 512, 1, 32000, gbs=8)} --bf16 {PP2}"
RUNS["b45-gpt6l-pp2-cpu-offload-refused"] = (2, 0, f"{PP2_OFFLOAD} --cpu-offloading-num-layers 1")
RUNS["b46-gpt6l-pp2-optimizer-offload-advised"] = (
    2,
    0,
    f"{PP2_OFFLOAD} --cpu-offloading-num-layers 0 {DISTOPT} {OFFLOAD} 0.5",
)
RUNS["b47-tiny-offload-no-precision-aware-refused"] = (
    1,
    0,
    f"{TINY_GPT} {DISTOPT} --optimizer-cpu-offload --optimizer-offload-fraction 0.5",
)
RUNS["b48-tiny-offload-precision-aware-advised"] = (
    1,
    0,
    f"{RUNS['b47-tiny-offload-no-precision-aware-refused'][2]} --use-precision-aware-optimizer --optimizer adam",
)
RUNS["b49-gpt-offload-fraction-0.5-advised"] = (1, 0, f"{RANGE_GPT} --optimizer-offload-fraction 0.5")

# cuda-graph-cpu-offload on the local implementation: CUDA graphs (`--cuda-graph-impl local`) with activation
# offloading, refused by TransformerConfig (b50). Its own fix, CUDA graphs off, would meet cpu-offload-requires-te, so
# diagnose prints activation offloading off and keeps CUDA graphs (b51): whether local CUDA graphs train without
# Transformer Engine is what b51 tells. optimizer-offload-slowdown: a 3.35B GPT at DP 2 offloading half its optimizer
# (b52, expected under 100 TFLOP/s/GPU, which the signature flags), and b52 with every line diagnose prints for it:
# fraction 0.25, the copies overlapped, OMP_NUM_THREADS at the host's cores over its GPUs (b53: expected faster, at
# the peak `estimate` gives, 43,283 MiB). Planned before they ran.
RUNS["b50-tiny-cuda-graph-cpu-offload-refused"] = (
    1,
    0,
    f"{TINY_GPT} --cuda-graph-impl local --cpu-offloading-num-layers 1",
)
RUNS["b51-tiny-cuda-graph-offload-off-advised"] = (
    1,
    0,
    f"{TINY_GPT} --cuda-graph-impl local --cpu-offloading-num-layers 0",
)
SLOW_GPT = f"{GPT_3B} --micro-batch-size 2 --global-batch-size 8 {TWELVE} {OFFLOAD} 0.5 {GC}"
RUNS["b52-gpt3b-dp2-f050-slow"] = (2, 0, SLOW_GPT)
RUNS["b53-gpt3b-dp2-f025-overlap-advised"] = (
    2,
    0,
    f"{SLOW_GPT.replace('fraction 0.5', 'fraction 0.25')} --overlap-cpu-optimizer-d2h-h2d",
)
RUN_ENV["b53-gpt3b-dp2-f025-overlap-advised"] = {"OMP_NUM_THREADS": "16"}

# Fixes that need Transformer Engine, on a log that says it is not installed (megatron-core's "Transformer Engine and
# Apex are not installed. Falling back to Torch optimizers."): signature fix.instead. b54: sequence parallelism on the
# local implementation at TP 2, refused; b55: the line printed for it without TE, sequence parallelism off. b56: TE's
# CUDA graphs with expandable segments, refused by Megatron-LM's arguments (megatron-core 0.19.0 asserts it for the
# transformer_engine implementation only; 0.16.1's local CudaGraphManager did too); b57: b56 with the signature's fix
# (NCCL_GRAPH_REGISTER=0), expected to stop next for want of Transformer Engine; b58: local CUDA graphs at TP 2 with
# expandable segments and no NCCL_GRAPH_REGISTER (does 0.19.0 train them?); b59: b56 with local CUDA graphs instead,
# the candidate line for a log without TE. Planned before they ran.
TP2 = "--tensor-model-parallel-size 2"
RUNS["b54-tiny-tp2-sp-local-refused"] = (2, 0, f"{TINY_GPT} {TP2} --sequence-parallel")
RUNS["b55-tiny-tp2-sp-off-advised"] = (2, 0, f"{TINY_GPT} {TP2}")
EXPANDABLE_ONLY = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
RUNS["b56-tiny-te-cuda-graph-expandable-refused"] = (1, 0, f"{TINY_GPT} --cuda-graph-impl transformer_engine")
RUNS["b57-tiny-te-cuda-graph-expandable-graph-register-0"] = (1, 0, f"{TINY_GPT} --cuda-graph-impl transformer_engine")
RUNS["b58-tiny-tp2-local-cuda-graph-expandable"] = (2, 0, f"{TINY_GPT} {TP2} --cuda-graph-impl local")
RUNS["b59-tiny-local-cuda-graph-expandable"] = (1, 0, f"{TINY_GPT} --cuda-graph-impl local")
for _name in ("b56-tiny-te-cuda-graph-expandable-refused", "b58-tiny-tp2-local-cuda-graph-expandable"):
    RUN_ENV[_name] = EXPANDABLE_ONLY
RUN_ENV["b59-tiny-local-cuda-graph-expandable"] = EXPANDABLE_ONLY
RUN_ENV["b57-tiny-te-cuda-graph-expandable-graph-register-0"] = {**EXPANDABLE_ONLY, "NCCL_GRAPH_REGISTER": "0"}

# moe-tp-requires-sequence-parallel where Transformer Engine is not installed: a MoE at TP 2 without sequence
# parallelism, refused at its first step (b60); the printed fix, TP 1 with the experts over both GPUs (EP 2, b61).
# cuda-graph-requires-te: Transformer Engine's CUDA graphs without it (b62), and the printed fix, megatron-core's own
# graphs (b63). Planned before they ran.
RUNS["b60-tiny-moe-tp2-no-sp-refused"] = (2, 0, f"{TINY_MOE} {TP2}")
RUNS["b61-tiny-moe-ep2-advised"] = (2, 0, f"{TINY_MOE} --expert-model-parallel-size 2")
RUNS["b62-tiny-te-cuda-graph-refused"] = (1, 0, f"{TINY_GPT} --cuda-graph-impl transformer_engine")
RUNS["b63-tiny-local-cuda-graph-advised"] = (1, 0, f"{TINY_GPT} --cuda-graph-impl local")

# A training script without a main guard (Megatron-Bridge#926, held-out megatron-bridge-pcie-nccl-error-missing-main-
# guard): megatron-core's persistent asynchronous checkpoint worker is started with the spawn method, which runs the
# script again in the child, training and all. Expected: the child's traceback runs the script's top level through
# runpy.run_path into Megatron's training code, and diagnose names the missing guard (script_rerun_in_child), as for
# the held-out paste. b65: the same run from the guarded script, to show the save itself works. Planned before they ran.
RUN_SCRIPT = {"b64-tiny-async-save-no-main-guard": "tools/pretrain_gpt_without_main_guard.py"}
# megatron-core's own asynchronous strategy: 0.19.0's default, nvrx, needs nvidia-resiliency-ext (not installed here:
# the first try of b64/b65 stopped there, both alike)
ASYNC_SAVE = (
    "--save /tmp/odr-ckpt --save-interval 2 --ckpt-format torch_dist --async-save --use-persistent-ckpt-worker "
    "--async-strategy mcore"
)
RUNS["b64-tiny-async-save-no-main-guard"] = (1, 0, f"{TINY_GPT} {ASYNC_SAVE} --train-iters 4")
RUNS["b65-tiny-async-save"] = (1, 0, f"{TINY_GPT} {ASYNC_SAVE.replace('odr-ckpt', 'odr-ckpt-b65')} --train-iters 4")

# A GPU full when the job starts (scanning/oom.py raised_before_the_model; held-out megatron-deepspeed-bad-gpu-ecc-…):
# the device command starts a process that leaves about 300 MiB of GPU 0 free, as a previous job's leftover would,
# then b66, the tiny GPT, on that GPU. Expected: it fails in initialize_megatron, before any of its model exists, and
# diagnose claims no memory setting (a CUDA out-of-memory error there is no shortage of the run's), or, if the failure
# comes as NCCL's own, says what it reads. Planned before it ran.
RUNS["b66-tiny-on-a-full-gpu"] = (1, 0, TINY_GPT)

# local-impl-sequence-parallel for a MoE at TP 2 where Transformer Engine is not installed: sequence parallelism off
# alone would meet moe-tp-requires-sequence-parallel, so the fix printed is b61's layout (TP 1, EP 2, no sequence
# parallelism), which trained. b67 is the refusal. Planned before it ran.
RUNS["b67-tiny-moe-tp2-sp-local-refused"] = (2, 0, f"{TINY_MOE} {TP2} --sequence-parallel")


# The memory model's figure for a refusal's fix (a fix can move the peak: TP 1 with EP 2 puts the dense layers whole on
# each GPU). e71-e78's MoE at TP 2 without sequence parallelism, without Transformer Engine: refused at its first step
# (b68: micro-batch 28; b69: 56), both under the H100's limit as e73/e74. diagnose prints TP 1 with EP 2 and, for that
# layout, the model's peak and which GPUs it fits: 40,573 MiB, fits an H100 (b68); 77,142 MiB, does not fit an H100,
# fits an H200 (b69). The printed lines run: b70 (b68's, H100's limit; expected to train near 40,573 MiB), b71 (b69's,
# H100's limit; expected out of memory), b72 (b69's, a whole H200; expected to train near 77,142 MiB). Planned before
# they ran.
def moe_top2_tp2(mbs: int) -> str:
    """e71-e78's MoE (8 experts, top-2) at TP 2 without sequence parallelism, instead of EP 2."""
    return moe_ep2_top2(mbs, 4 * mbs).replace("--expert-model-parallel-size 2", TP2)


RUNS["b68-moe8-tp2-no-sp-mbs28-refused"] = (2, 0, moe_top2_tp2(28))
RUNS["b69-moe8-tp2-no-sp-mbs56-refused"] = (2, 0, moe_top2_tp2(56))
RUNS["b70-moe8-ep2-mbs28-advised-cap"] = (2, 0, moe_ep2_top2(28, 112))
RUNS["b71-moe8-ep2-mbs56-advised-cap"] = (2, 0, moe_ep2_top2(56, 224))
RUNS["b72-moe8-ep2-mbs56-advised"] = (2, 0, moe_ep2_top2(56, 224))
for _name in ("b68-moe8-tp2-no-sp-mbs28-refused", "b69-moe8-tp2-no-sp-mbs56-refused"):
    RUN_ENV[_name] = H100_CAP
for _name in ("b70-moe8-ep2-mbs28-advised-cap", "b71-moe8-ep2-mbs56-advised-cap"):
    RUN_ENV[_name] = H100_CAP

# A pipeline's last stage out of memory on its fp32 logits (held-out megatron-lm-pp8-a10g-last-stage-logits-oom: PP 8 on
# A10Gs, which two GPUs cannot run): a 256,000-token vocabulary at PP 2, micro-batch 4, under what an A10G (23,028 MiB)
# lets PyTorch reserve at two GPUs, 18,647 MiB (`estimate --gpu-memory 23028MiB`). The model: stage 1 (the output
# layer and the logits) the most loaded, 26,977 MiB, does not fit; its cheapest change, micro-batch 4 -> 1, 14,839
# MiB. b73 expected to run out of memory on rank 1, and diagnose to print that change; b74, the printed line under
# the same limit, expected to train near 14,839 MiB. Planned before they ran.
A10G_CAP = {"ODR_CAP_MIB": "18647"}
LOGITS_PP2 = f"{shape(4, 2048, 16, 2048, 4, 256000, gbs=32)} --bf16 {DISTOPT} --pipeline-model-parallel-size 2"
RUNS["b73-gpt-v256k-pp2-mbs4-a10g-oom"] = (2, 0, LOGITS_PP2)
RUNS["b74-gpt-v256k-pp2-mbs1-a10g-advised"] = (2, 0, LOGITS_PP2.replace("--micro-batch-size 4", "--micro-batch-size 1"))
for _name in ("b73-gpt-v256k-pp2-mbs4-a10g-oom", "b74-gpt-v256k-pp2-mbs1-a10g-advised"):
    RUN_ENV[_name] = A10G_CAP

# The same figure from two more refusals whose fix is b69's layout (TP 1, EP 2, micro-batch 56): b75, the MoE with
# EP 4 on two GPUs (expert-grid-divides-world: the fix is EP 2); b76, at TP 2 with sequence parallelism on the local
# implementation (local-impl-sequence-parallel: sequence parallelism off, TP 1, EP 2). Both under the H100's limit.
# Expected: both refused at start-up, both printed 77,142 MiB, does not fit an H100, fits an H200: what b71 (out of
# memory under the H100's limit) and b72 (trained on a whole H200) did. Planned before they ran.
RUNS["b75-moe8-ep4-on-2-gpus-mbs56-refused"] = (
    2,
    0,
    moe_ep2_top2(56, 224).replace("--expert-model-parallel-size 2", "--expert-model-parallel-size 4"),
)
RUNS["b76-moe8-tp2-sp-local-mbs56-refused"] = (2, 0, f"{moe_top2_tp2(56)} --sequence-parallel")
for _name in ("b75-moe8-ep4-on-2-gpus-mbs56-refused", "b76-moe8-tp2-sp-local-mbs56-refused"):
    RUN_ENV[_name] = H100_CAP

# An OOM raised while the optimizer was being built (get_megatron_optimizer) is offered no line that changes only the
# step's activations (scanning/oom.py optimizer_state_over_the_gpu): b03 with full recompute, the most such a line
# saves, under the same 28 GiB card's limit. Expected: out of memory again in get_megatron_optimizer, asking what b03
# asked. Planned before it ran.
RUNS["b77-gpt5b-pp2-full-recompute-cap28"] = (2, 0, f"{GPT_5B_BUILD} {PP2} {FULL}")

# An OOM whose traceback multiplies by a frozen weight (megatron-core's linear_with_frozen_weight; report/engine.py
# _frozen_model, held-out flagscale-lora-…-seq9728): a 4-layer GPT with a 256k vocabulary at micro-batch 4, every
# parameter but the layer norms frozen (ODR_TRAIN_ONLY, as b10-b12), its tied output layer frozen with the embedding,
# under an 11,000 MiB limit: the model puts weights and the layers' activations near 9 GiB before the output layer's
# 4 GiB of bf16 logits. b78 expected out of memory in the output layer, through linear_with_frozen_weight; b79 is b78
# with the optimizer lines the fix gave before the rule, at their most (the distributed optimizer, all of the state
# offloaded): expected out of memory again. The fix diagnose prints for b78's log is run after it (b80, planned then).
FROZEN_V256K = f"{shape(4, 2048, 16, 2048, 4, 256000, gbs=4)} --bf16"
CAP_11G = {"ODR_CAP_MIB": "11000", "ODR_TRAIN_ONLY": "layernorm"}
RUNS["b78-gpt-v256k-frozen-cap11g-oom"] = (1, 0, FROZEN_V256K)
RUNS["b79-gpt-v256k-frozen-cap11g-offload-all"] = (1, 0, f"{FROZEN_V256K} {DISTOPT} {OFFLOAD} 1")
for _name in ("b78-gpt-v256k-frozen-cap11g-oom", "b79-gpt-v256k-frozen-cap11g-offload-all"):
    RUN_ENV[_name] = CAP_11G
# b78 and b79 ran out of memory as expected, both asking 3.91 GiB in linear_with_frozen_weight. The fix diagnose
# prints for b78's log: `--micro-batch-size 1` ("peak 6,433 MiB"), under the same limit (b80, expected to train).
RUNS["b80-gpt-v256k-frozen-mbs1-cap11g-advised"] = (
    1,
    0,
    FROZEN_V256K.replace("--micro-batch-size 4", "--micro-batch-size 1"),
)
RUN_ENV["b80-gpt-v256k-frozen-mbs1-cap11g-advised"] = CAP_11G
RUN_ENV["b77-gpt5b-pp2-full-recompute-cap28"] = CAP_28G

# An OOM before the first optimizer step, read from the message's figures alone (advice/fix_numbers.py; held-out
# megatron-lm-gpt2.6b-tp2pp4-a10g-…: a log cut before its shape, no iteration logged, fraction 0.25 from the figures):
# Adam's moments are allocated at the first step (n16: max allocated 39,708 MiB after iteration 1, 46,388 from
# iteration 2), so at such an OOM the GPU held the fp32 master weights, 4 of the state's 12 B/parameter. n16's GPT
# (0.87B, micro-batch 4) under a 39,500 MiB limit, between its first step's peak and its own: expected out of memory in
# iteration 1's forward/backward. The fractions its log gives (without its arguments block: the figures alone) are run
# after it (b82, b83, planned then).
CAP_39500 = {"ODR_CAP_MIB": "39500"}
RUNS["b81-gpt1b-cap39500-first-step-oom"] = (1, 0, dense_cost())
RUN_ENV["b81-gpt1b-cap39500-first-step-oom"] = CAP_39500
# b81 ran out of memory in iteration 1's forward/backward, asking 1000 MiB, 598.81 MiB short. Its log without the
# arguments block (the message's figures alone) gave offload fraction 0.1 before the rule for an OOM before any
# iteration line, "at least 0.75" after it; with the block, the memory model says 1.09 (no fraction can) and leads with
# micro-batch 2 ("peak 30,738 MiB"). Each under the same limit: b82, offloading alone at 0.1 (expected out of memory:
# the model, 48,226 MiB); b83, offloading alone at 0.75 (expected out of memory: the model, 39,538 MiB, over the
# limit, so "at least" is the word); b84, the fix printed for the log without its arguments block, as printed (offload
# 0.75, precision-aware, selective recompute; the model, 19,350 MiB: expected to train); b85, the fix printed with
# them, --micro-batch-size 2 (expected to train).
B81_OFFLOAD = "--optimizer-cpu-offload --use-precision-aware-optimizer --optimizer-offload-fraction"
RUNS["b82-gpt1b-cap39500-offload-010"] = (1, 0, f"{dense_cost()} {B81_OFFLOAD} 0.1")
RUNS["b83-gpt1b-cap39500-offload-075"] = (1, 0, f"{dense_cost()} {B81_OFFLOAD} 0.75")
RUNS["b84-gpt1b-cap39500-figures-fix-advised"] = (
    1,
    0,
    f"{dense_cost()} --optimizer-cpu-offload --optimizer-offload-fraction 0.75 --use-precision-aware-optimizer "
    "--recompute-granularity selective",
)
RUNS["b85-gpt1b-cap39500-mbs2-advised"] = (1, 0, dense_cost(mbs=2))
for _name in (
    "b82-gpt1b-cap39500-offload-010",
    "b83-gpt1b-cap39500-offload-075",
    "b84-gpt1b-cap39500-figures-fix-advised",
    "b85-gpt1b-cap39500-mbs2-advised",
):
    RUN_ENV[_name] = CAP_39500
# b83 (offloading at 0.75) ran out of memory in iteration 2, 814.70 MiB short. What diagnose prints for its log: from the
# message's figures alone (without the arguments block), `--optimizer-offload-fraction 0.85
# --overlap-cpu-optimizer-d2h-h2d` (b86; the memory model puts that run's peak at 38,242 MiB allocated, TIGHT under
# the limit: expected out of memory or just in); with the block, "more than 1.0 (1.10): optimizer offloading alone
# cannot free enough" and selective recompute of the attention core with --manual-gc (b87, expected to train, the
# model 18,516 MiB); and the claim that no fraction can: b88, fraction 1.0 alone (the model, 36,365 MiB, within the
# limit's 39,500 but over the budget its margins leave: if it trains, the claim was too strong).
RUNS["b86-gpt1b-cap39500-offload-085-figures-fix"] = (
    1,
    0,
    f"{dense_cost()} {B81_OFFLOAD} 0.85 --overlap-cpu-optimizer-d2h-h2d",
)
RUNS["b87-gpt1b-cap39500-offload-075-sel-gc-advised"] = (
    1,
    0,
    f"{dense_cost()} {B81_OFFLOAD} 0.75 --recompute-granularity selective --recompute-modules core_attn --manual-gc "
    "--manual-gc-interval 100",
)
RUNS["b88-gpt1b-cap39500-offload-100"] = (1, 0, f"{dense_cost()} {B81_OFFLOAD} 1.0")
for _name in (
    "b86-gpt1b-cap39500-offload-085-figures-fix",
    "b87-gpt1b-cap39500-offload-075-sel-gc-advised",
    "b88-gpt1b-cap39500-offload-100",
):
    RUN_ENV[_name] = CAP_39500
# b86's OOM read as fragmentation (free within the limit 788.48 MiB + reserved-unallocated 1.43 GiB covered the 1000 MiB
# asked): its fix leads with expandable segments, "zero cost", then recompute "if the OOM stays". b89 is b86 with
# that first line alone, under the same limit (the memory model: 38,242 MiB allocated, TIGHT with its slack; expected
# to train, the allocator's cache no longer in pieces).
RUNS["b89-gpt1b-cap39500-offload-085-expandable"] = RUNS["b86-gpt1b-cap39500-offload-085-figures-fix"]
RUN_ENV["b89-gpt1b-cap39500-offload-085-expandable"] = {**CAP_39500, **EXPANDABLE}
# An fp16 run offloading its optimizer with the precision-aware optimizer stops at its first step unless its gradients
# are fp32 (n117 stopped, n120 trained with --accumulate-allreduce-grads-in-fp32); an out-of-memory fix that turns
# offloading on now takes that line too where the run is fp16 (report/fixes.py _held_to_the_constraints; held-out
# megatron-lm-gpt2.6b-tp2pp4-a10g-…). b98: b81's launch in fp16 under the same limit (expected out of memory: in
# iteration 2 if not 1, fp16's gradient buffer being half bf16's fp32 one). The fix its log prints without its
# arguments block is run after it, as printed (b99, expected to train) and without the fp32-gradient line (b100, as
# printed before: expected to stop at its first step as n117 did); both planned then.
CAP_39500_FP16 = dense_cost().replace(" --bf16", " " + FP16)
RUNS["b98-gpt1b-fp16-cap39500-oom"] = (1, 0, CAP_39500_FP16)
RUN_ENV["b98-gpt1b-fp16-cap39500-oom"] = CAP_39500
# b98 trained iteration 1 and ran out of memory in iteration 2 (asking 512 MiB; read as fragmentation within the
# limit). Its log without the arguments block prints expandable segments, then --optimizer-cpu-offload
# --optimizer-offload-fraction 0.05 --use-precision-aware-optimizer --recompute-granularity selective
# --accumulate-allreduce-grads-in-fp32 (the OptimizerConfig line says fp16). b99: all of it, as printed (expected to
# train: n17, selective recompute alone in bf16 with fp32 gradients, peaked at 30,940 MiB in nvidia-smi); b100: the
# same without the last line, as printed before it (expected to stop at its first step, as n117 did).
B99_FIX = (
    "--optimizer-cpu-offload --optimizer-offload-fraction 0.05 --use-precision-aware-optimizer "
    "--recompute-granularity selective"
)
RUNS["b99-gpt1b-fp16-cap39500-figures-fix-advised"] = (
    1,
    0,
    f"{CAP_39500_FP16} {B99_FIX} --accumulate-allreduce-grads-in-fp32",
)
RUNS["b100-gpt1b-fp16-cap39500-figures-fix-before"] = (1, 0, f"{CAP_39500_FP16} {B99_FIX}")
for _name in ("b99-gpt1b-fp16-cap39500-figures-fix-advised", "b100-gpt1b-fp16-cap39500-figures-fix-before"):
    RUN_ENV[_name] = {**CAP_39500, **EXPANDABLE}
# A resumed run loads its optimizer's state with its checkpoint, so its first step already holds Adam's moments and
# an OOM there is not the first step's of scanning/oom.py before_the_first_step. b90: n16's GPT for two iterations,
# saving a checkpoint (no limit); b91: the same launch resuming from it under a 43,000 MiB limit, between n16's first
# step (39,708 MiB) and its later ones (46,388). Expected: b91 out of memory in its first iteration (iteration 3), as
# a run holding its moments (a fresh run under that limit trains iteration 1).
B90_CKPT = "--ckpt-format torch --save /tmp/ckpt-b90 --save-interval 2"
RUNS["b90-gpt1b-save-at-2"] = (1, 0, f"{dense_cost()} {B90_CKPT}".replace("--train-iters 14", "--train-iters 2"))
RUNS["b91-gpt1b-resumed-cap43000-oom"] = (1, 0, f"{dense_cost()} --ckpt-format torch --load /tmp/ckpt-b90")
RUN_ENV["b91-gpt1b-resumed-cap43000-oom"] = {"ODR_CAP_MIB": "43000"}
# b91 did not get that far: megatron-core 0.19.0's torch-format load of the distributed optimizer's state raised
# KeyError: 'step' (distrib_optimizer.py _set_main_param_and_optimizer_states), before training. The same pair with the
# default distributed-checkpoint format (b92, b93), and without the distributed optimizer in the torch format (b94,
# b95), each resumed run under the same limit and expected out of memory in its first iteration.
RUNS["b92-gpt1b-save-at-2-dist"] = (
    1,
    0,
    f"{dense_cost()} --ckpt-format torch_dist --save /tmp/ckpt-b92 --save-interval 2".replace(
        "--train-iters 14", "--train-iters 2"
    ),
)
RUNS["b93-gpt1b-resumed-dist-cap43000-oom"] = (1, 0, f"{dense_cost()} --ckpt-format torch_dist --load /tmp/ckpt-b92")
NO_DISTOPT_COST = dense_cost().replace(f" {DISTOPT}", "")
RUNS["b94-gpt1b-no-distopt-save-at-2"] = (
    1,
    0,
    f"{NO_DISTOPT_COST} --ckpt-format torch --save /tmp/ckpt-b94 --save-interval 2".replace(
        "--train-iters 14", "--train-iters 2"
    ),
)
RUNS["b95-gpt1b-no-distopt-resumed-cap43000-oom"] = (
    1,
    0,
    f"{NO_DISTOPT_COST} --ckpt-format torch --load /tmp/ckpt-b94",
)
RUN_ENV["b93-gpt1b-resumed-dist-cap43000-oom"] = RUN_ENV["b95-gpt1b-no-distopt-resumed-cap43000-oom"] = {
    "ODR_CAP_MIB": "43000"
}
# Neither resumed run reached training: b93's distributed optimizer, built on torch's Adam (no Transformer Engine or
# apex here), asserted `len(steps) == 1` building its sharded state dict (distrib_optimizer.py state_dict), and b95's
# learning-rate scheduler refused a checkpoint of another length (--train-iters 2 against 14). b96 saves without the
# distributed optimizer at iteration 2 of the same 14 (--exit-interval 2); b97 resumes from it under the limit,
# expected out of memory in its first iteration (iteration 3).
RUNS["b96-gpt1b-no-distopt-save-at-2-of-14"] = (
    1,
    0,
    f"{NO_DISTOPT_COST} --ckpt-format torch --save /tmp/ckpt-b96 --save-interval 2 --exit-interval 2",
)
RUNS["b97-gpt1b-no-distopt-resumed-cap43000-oom"] = (
    1,
    0,
    f"{NO_DISTOPT_COST} --ckpt-format torch --load /tmp/ckpt-b96",
)
RUN_ENV["b97-gpt1b-no-distopt-resumed-cap43000-oom"] = {"ODR_CAP_MIB": "43000"}
# Two fixes of the catalogue no run had tried. optimizer-offload-decoupled-weight-decay: b101, b23's tiny GPT offloading
# its optimizer with the distributed optimizer (b24, which trained) and OptimizerConfig.decoupled_weight_decay off
# (ODR_DECOUPLED_WEIGHT_DECAY=0: Megatron-LM has no flag, tools/compare_family_pretrain_gpt.py stands in for a script
# that sets it), expected refused at the optimizer's build ("CPU offloading only supported with decoupled_weight_decay
# enabled"); the fix diagnose prints for its log is b102, planned after b101 is recorded. The fp32 models' other fix,
# "a Megatron-Core with NVIDIA/Megatron-LM#6982": b103, n104's launch (refused: an fp32 model offloading at 0.5) on
# megatron-core 0.19.0 with that change applied (tools/backport_megatron_pr_6982.py into /tmp/site-6982), expected to
# train.
RUNS["b101-tiny-offload-l2-weight-decay-refused"] = (1, 0, RUNS["b24-tiny-offload-distopt-advised"][2])
RUN_ENV["b101-tiny-offload-l2-weight-decay-refused"] = {"ODR_DECOUPLED_WEIGHT_DECAY": "0"}
RUNS["b103-gpt1b-fp32-f050-pr6982"] = RUNS["n104-gpt1b-fp32-f050"]
RUN_ENV["b103-gpt1b-fp32-f050-pr6982"] = {"PYTHONPATH": "/tmp/site-6982"}
# b101 was refused as expected (AssertionError: CPU offloading only supported with decoupled_weight_decay enabled);
# diagnose, confirmed by its OptimizerConfig line, prints "set decoupled_weight_decay=True where the script builds
# OptimizerConfig (Megatron-LM has no flag for it)". b102: that, as printed (expected to train, as b24 did).
RUNS["b102-tiny-offload-decoupled-weight-decay-advised"] = RUNS["b101-tiny-offload-l2-weight-decay-refused"]
RUN_ENV["b102-tiny-offload-decoupled-weight-decay-advised"] = {"ODR_DECOUPLED_WEIGHT_DECAY": "1"}
# b103 trained, but not as n112 (the same fp32 model without offloading, same seed and data) did: its loss left
# n112's at iteration 2 (10.486 against 10.502; 10.012 against 9.892 at 3), where n106 (bf16, offloading 0.5) matches
# n16 to four digits, and its peak stayed at iteration 1's (63,004 MiB: n112 grew by its Adam state at 2). Read in
# the code: the precision-aware optimizer hands an fp32 shard its gradient as `.decoupled_grad`
# (distrib_optimizer.py _copy_model_grads_to_main_grads); HybridDeviceOptimizer passes it on for the parameters it
# offloads and for the fp32 copies it makes of bf16 ones (_set_sub_optimizer_grads), but an fp32 parameter it keeps on
# the GPU goes to torch's Adam with no `.grad`, so Adam skips it: the GPU-resident fraction does not train. Two runs
# of n112's launch on the same patched megatron-core, 3 iterations each: b104, offloading 1.0 (every parameter on the
# CPU's Adam, expected to train as n112 did, iteration 2-3 losses within 0.01 of n112's); b105, offloading 0.5 with the
# precision-aware optimizer cleared after Megatron-LM's argument check (ODR_PRECISION_AWARE_OFF, as n77: gradients as
# `.grad`), expected to train as n112 did too. If both do, b103's divergence is the GPU fraction untrained.
B104_FP32 = fp32_dense(4)[2]
RUNS["b104-gpt1b-fp32-f100-pr6982"] = (1, 0, f"{B104_FP32} {OFFLOAD} 1.0 {GC}")
RUN_ENV["b104-gpt1b-fp32-f100-pr6982"] = {"PYTHONPATH": "/tmp/site-6982"}
RUNS["b105-gpt1b-fp32-f050-pr6982-precision-aware-off"] = (1, 0, f"{B104_FP32} {OFFLOAD} 0.5 {GC}")
RUN_ENV["b105-gpt1b-fp32-f050-pr6982-precision-aware-off"] = {"PYTHONPATH": "/tmp/site-6982", **PRECISION_AWARE_OFF}
# b104 and b105 trained as n112 did: b103's GPU-kept fp32 parameters did not step. The same for a bf16 model with
# parameters kept in fp32 (optimizer-offload-fp32-params: DeepSeek V4's, Megatron-LM#6212), its layer norms cast to
# fp32 before DDP wraps it (ODR_KEEP_FP32, tools/compare_family_pretrain_gpt.py; it prints how many of them moved).
# b23's tiny GPT with the distributed optimizer, offloading 0.05 (so most parameters stay on the GPU): b106 on
# megatron-core 0.19.0 as it is, expected refused at the optimizer's build with "can't optimize a non-leaf Tensor";
# b107 on the #6982 core, expected to train with some layer norms not moved; b108 the same at fraction 1.0, expected
# all moved; b109 without offloading on megatron-core 0.19.0, expected all moved. Three iterations each.
B106 = f"{TINY_GPT} {DISTOPT} --optimizer-cpu-offload --use-precision-aware-optimizer --optimizer-offload-fraction"
KEEP_LN = {"ODR_KEEP_FP32": "layernorm"}
RUNS["b106-tiny-bf16-fp32-norms-f005-refused"] = (1, 0, f"{B106} 0.05")
RUN_ENV["b106-tiny-bf16-fp32-norms-f005-refused"] = KEEP_LN
RUNS["b107-tiny-bf16-fp32-norms-f005-pr6982"] = (1, 0, f"{B106} 0.05")
RUN_ENV["b107-tiny-bf16-fp32-norms-f005-pr6982"] = {**KEEP_LN, "PYTHONPATH": "/tmp/site-6982"}
RUNS["b108-tiny-bf16-fp32-norms-f100-pr6982"] = (1, 0, f"{B106} 1.0")
RUN_ENV["b108-tiny-bf16-fp32-norms-f100-pr6982"] = {**KEEP_LN, "PYTHONPATH": "/tmp/site-6982"}
RUNS["b109-tiny-bf16-fp32-norms-no-offload"] = (1, 0, f"{TINY_GPT} {DISTOPT}")
RUN_ENV["b109-tiny-bf16-fp32-norms-no-offload"] = KEEP_LN
# b106 was refused as expected. b107-b109 stopped in their first forward, in torch's layer_norm ("expected scalar type
# BFloat16 but found Float": it takes no fp32 weight beside bf16 input; b107 and b108 had got past the optimizer's
# build on the #6982 core), so the hook now casts the weight in the LayerNorm's forward, as models that keep
# parameters in fp32 do; the three again as b110-b112, with the same expectations.
for _name, _was in (
    ("b110-tiny-bf16-fp32-norms-f005-pr6982", "b107-tiny-bf16-fp32-norms-f005-pr6982"),
    ("b111-tiny-bf16-fp32-norms-f100-pr6982", "b108-tiny-bf16-fp32-norms-f100-pr6982"),
    ("b112-tiny-bf16-fp32-norms-no-offload", "b109-tiny-bf16-fp32-norms-no-offload"),
):
    RUNS[_name], RUN_ENV[_name] = RUNS[_was], RUN_ENV[_was]
# An OOM of torch 2.0 or older now gets max_split_size_mb:512 where expandable segments were advised (scanning/oom.py;
# it served the synthetic fragmented requests of fixtures/oom-small-gpu-recorded). On a real Megatron run: b113 is b86
# (ran out of memory in iteration 2 under the 39,500 MiB limit, read as fragmentation; b89, the same with expandable
# segments, trained) with max_split_size_mb:512 instead. Expected: trains, as b89 did, if the setting serves a real
# run's fragmentation; out of memory if only expandable segments do (then the old-torch fix's note, "if the OOM stays,
# the capacity fixes", is what holds).
RUNS["b113-gpt1b-cap39500-offload-085-max-split"] = RUNS["b86-gpt1b-cap39500-offload-085-figures-fix"]
RUN_ENV["b113-gpt1b-cap39500-offload-085-max-split"] = {**CAP_39500, "PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:512"}
# b113 ran out of memory two iterations after b86 did. Whether a smaller split limit serves what 512 did not, and whether
# 512 serves another real fragmentation OOM that expandable segments fixed (n80: 8 GiB asked in its first backward,
# 14.41 GiB reserved but unallocated; n81 with expandable segments trained): b114, b86 with max_split_size_mb:128;
# b115, n80 with 512; b116, n80 with 128. Expected: unknown, recorded as they come; the old-torch fix's value follows
# only what these show, and says on which runs.
RUNS["b114-gpt1b-cap39500-offload-085-max-split-128"] = RUNS["b86-gpt1b-cap39500-offload-085-figures-fix"]
RUN_ENV["b114-gpt1b-cap39500-offload-085-max-split-128"] = {
    **CAP_39500,
    "PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:128",
}
RUNS["b115-gpt-s16k-mbs1-max-split-512"] = RUNS["n80-gpt-s16k-mbs1-advised"]
RUN_ENV["b115-gpt-s16k-mbs1-max-split-512"] = {"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:512"}
RUNS["b116-gpt-s16k-mbs1-max-split-128"] = RUNS["n80-gpt-s16k-mbs1-advised"]
RUN_ENV["b116-gpt-s16k-mbs1-max-split-128"] = {"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:128"}


class SmiPoller(threading.Thread):
    """Largest nvidia-smi used_memory per run, matched through the process's ODR_RUN variable."""

    def __init__(self):
        super().__init__(daemon=True)
        self.peak: dict[str, int] = {}
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            out = subprocess.run(
                ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                capture_output=True,
                text=True,
            ).stdout
            for line in out.splitlines():
                try:
                    pid, used = (int(x) for x in line.split(","))
                    env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
                except (ValueError, OSError):
                    continue
                for item in env:
                    if item.startswith(b"ODR_RUN="):
                        name = item[8:].decode()
                        self.peak[name] = max(self.peak.get(name, 0), used)
            time.sleep(0.3)


def machine_meta() -> str:
    """date, torch, megatron-core, GPU, GPU count, CPUs and host memory of the GPU machine, one per line."""
    return subprocess.run(  # noqa: S602 - a fixed command line, no input in it
        "echo date=$(date -u +%FT%TZ); echo torch=$(python3 -c 'import torch; print(torch.__version__, "
        "torch.version.cuda)'); echo megatron_core=$(python3 -c 'import megatron.core.package_info as p; "
        "print(p.__version__)'); echo gpu=$(nvidia-smi --query-gpu=name,memory.total,driver_version "
        "--format=csv,noheader | head -1); echo gpus=$(nvidia-smi -L | wc -l); echo cpus=$(nproc); free -g | head -2",
        shell=True,
        capture_output=True,
        text=True,
    ).stdout


def launch(name, gpus, args, port, outdir, devices=None, env_extra=None):
    cmd = (
        f"python3 -m torch.distributed.run --nproc-per-node {gpus} --master-port {port} "
        f"{RUN_SCRIPT.get(name, 'tools/compare_family_pretrain_gpt.py')} {COMMON} {args}"
    )
    env_extra = env_extra or {}
    (outdir / f"{name}.cmd").write_text(cmd + "\n")
    (outdir / f"{name}.env").write_text("".join(f"{k}={v}\n" for k, v in env_extra.items()))
    log = open(outdir / f"{name}.raw.log", "w")  # noqa: SIM115 - the child writes it for as long as it runs
    env = dict(os.environ, ODR_RUN=name, **env_extra)
    if devices is not None:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, devices))
    return subprocess.Popen(cmd.split(), stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)


def run_in_lanes(
    runs: dict[str, tuple[int, str, dict]], raw: Path, deadline: float, run_timeout: float = 1e9, leave_s: float = 100
) -> list[str]:
    """Each run (name -> GPUs, arguments, extra environment) alone on its own GPUs, as many side by side as the
    machine's GPUs allow, in the order given. A run still going at the deadline or after `run_timeout` seconds
    is killed; none starts within `leave_s` of the deadline. With SERIAL=1 in the environment one run at a time
    (timed runs: side by side they would share the host's cores, which offloading's CPU Adam runs on). Returns a
    line per run."""
    serial = os.environ.get("SERIAL") == "1"
    total = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout.count("GPU ")
    free, pending, results = list(range(total)), list(runs), []
    running: dict[str, tuple[subprocess.Popen, float, list[int]]] = {}
    port = 29600
    while pending or running:
        for name, (proc, t0, devices) in list(running.items()):
            late = proc.poll() is None and time.time() > min(deadline, t0 + run_timeout)
            if late:
                os.killpg(proc.pid, 9)
                proc.wait()
            if proc.poll() is not None:
                results.append(f"{name} rc={proc.returncode} wall_s={time.time() - t0:.0f}{' killed' if late else ''}")
                print(results[-1], flush=True)
                free = sorted(free + devices)
                del running[name]
        for name in list(pending):
            gpus, args, env_extra = runs[name]
            if gpus > total or deadline - time.time() < leave_s:
                pending.remove(name)
                results.append(f"{name} not run")
            elif gpus <= len(free) and not (serial and running):
                pending.remove(name)
                devices, free = free[:gpus], free[gpus:]
                port += 1
                running[name] = (launch(name, gpus, args, port, raw, devices, env_extra), time.time(), devices)
        time.sleep(1)
    return results


def main():
    outdir = Path(sys.argv[1])
    group = sys.argv[2] if len(sys.argv) > 2 else "single"
    # The MoE hold-outs planned in benchmarks/moe_plan.json (predictions made before recording).
    moe = list(json.loads((Path(__file__).resolve().parents[1] / "benchmarks" / "moe_plan.json").read_text()))
    names = [n for n, (g, _, _) in RUNS.items() if (g == 1) == (group == "single") and not n.startswith(("t", "b"))]
    names = [n for n in names if n not in moe]
    if group == "two":
        names = [n for n in RUNS if n.startswith("t")]
    if group == "moe":
        names = moe
    if group == "build":  # the model-build OOMs, each alone on its GPUs
        names = [n for n in RUNS if n.startswith("b")]
    if len(sys.argv) > 3:  # a comma-separated subset (re-runs)
        names = [n for n in names if n in sys.argv[3].split(",")]
    raw = outdir / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    meta = machine_meta()
    poller = SmiPoller()
    poller.start()
    deadline = time.time() + float(os.environ.get("DEADLINE_S", "1e9"))
    alone = group in ("two", "moe", "build")  # each run alone on its GPUs, stopped by DEADLINE_S
    pending = [] if alone else sorted(names, key=lambda n: -RUNS[n][1])
    running: dict[str, tuple[subprocess.Popen, float]] = {}
    port = 29500
    results = []
    while pending or running:
        for name, (proc, t0) in list(running.items()):
            if proc.poll() is not None:
                results.append(f"{name} rc={proc.returncode} wall_s={time.time() - t0:.0f}")
                print(results[-1], flush=True)
                del running[name]
        load = sum(RUNS[n][1] for n in running)
        for name in list(pending):
            gpus, gb, args = RUNS[name]
            fits = (gpus == 1 and len(running) < PARALLEL and load + gb <= GPU_BUDGET_GB) or not running
            if fits:
                pending.remove(name)
                port += 1
                running[name] = (launch(name, gpus, args, port, raw), time.time())
                load += gb
            if gpus > 1:
                break
        time.sleep(1)
    if alone:
        results = run_in_lanes({n: (RUNS[n][0], RUNS[n][2], RUN_ENV.get(n, {})) for n in names}, raw, deadline)
    poller.stop.set()
    poller.join()
    for name in names:
        (raw / f"{name}.smi").write_text(f"{poller.peak.get(name, 0)}\n")
    (raw / f"meta-{group}.txt").write_text(meta + "\n".join(results) + "\n")
    with tarfile.open(outdir / f"raw-{group}.tar.gz", "w:gz") as tar:
        tar.add(raw, arcname=f"raw-{group}")
    print(meta)
    for name in names:
        if not (raw / f"{name}.raw.log").exists():
            continue
        text = (raw / f"{name}.raw.log").read_text(errors="replace")
        peaks = [
            line.split("max allocated: ")[1].split(" ")[0] for line in text.splitlines() if "max allocated: " in line
        ]
        theo = [line for line in text.splitlines() if line.startswith("Theoretical memory")]
        print(
            f"{name}: max_alloc={peaks[-1] if peaks else None} smi={poller.peak.get(name)} "
            f"{theo[0][29:] if theo else ''}"
        )
        if not peaks:
            print("   " + "\n   ".join(text.splitlines()[-6:]))


if __name__ == "__main__":
    main()
