"""The MoE layer's activations, term by term, against megatron-core's saved tensors and the recorded MoE runs."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest

from offloaddoctor.api import diagnose
from offloaddoctor.config.loading import build_store
from offloaddoctor.config.overrides import parse_overrides
from offloaddoctor.memory import RunShape
from offloaddoctor.memory.calibration import FIT_SLACK, MODEL_UNDERESTIMATE, routed_imbalance
from offloaddoctor.memory.fit import verdict_within
from offloaddoctor.memory.activations import layer_activations, router_bytes, routed_expert_bytes
from offloaddoctor.memory import read_shape

from tests.conftest import estimate_run
from tests.memory.recorded import LAUNCHES, trained

# each recorded run estimated once for the tests here and in test_memory_model.py (conftest.estimate_run)
pytestmark = pytest.mark.xdist_group("memory-calibration")

ROOT = Path(__file__).resolve().parents[2]
CALIBRATION = ROOT / "fixtures" / "memory-calibration"
MAX_ALLOCATED = re.compile(r"max allocated: ([\d.]+)")


def _max_allocated(path: Path) -> float:
    with gzip.open(path, "rt") as log:
        return max(float(m) for m in MAX_ALLOCATED.findall(log.read()))


def _shape(run: str) -> RunShape:
    return estimate_run([str(CALIBRATION / f"{run}.log.gz")]).estimate.shape


E04 = "e04-moe8-top4-mbs8"  # L6 h1536 f1536 mbs8 s1024 top4, 8 experts, GELU experts, allgather dispatcher


def test_each_routed_token_keeps_its_permuted_hidden_state_as_the_experts_fc1_input():
    shape = _shape(E04)
    wider = shape.with_changes(hidden_size=shape.hidden_size + 1)
    routed_tokens = 8 * 1024 * 4  # micro-batch x sequence x top-k
    assert routed_expert_bytes(wider) - routed_expert_bytes(shape) == routed_tokens * 2  # 2 bytes per element of h


def test_gelu_experts_keep_the_activation_output_for_the_probability_multiply():
    shape = _shape(E04)
    assert not shape.gated_linear_unit
    wider = shape.with_changes(moe_ffn_hidden_size=shape.moe_ffn_hidden_size + 1)
    # fc1 output, GELU output (kept by `* per_token_scale`), fc2 input: 3 tensors of f, 2 bytes each
    assert routed_expert_bytes(wider) - routed_expert_bytes(shape) == 8 * 1024 * 4 * 3 * 2


def test_a_fused_swiglu_takes_the_probability_in_its_kernel_an_unfused_one_keeps_three_outputs_more():
    """Unfused: the activation's output, `x_linear + glu_linear_offset` (a new tensor), and their product, which the
    multiply by the router's probability keeps (megatron-core 0.19.0 mlp.py MLP.forward `glu`)."""
    swiglu = _shape(E04).with_changes(gated_linear_unit=True, bias_activation_fusion=True)
    unfused = swiglu.with_changes(bias_activation_fusion=False)
    f = swiglu.moe_ffn_hidden_size
    assert routed_expert_bytes(unfused) - routed_expert_bytes(swiglu) == 8 * 1024 * 4 * 3 * (2 * f)


# The layer tools/count_moe_saved_tensors.py counts: h 256, f 704, s 128, b 4, no biases.
COUNTED_LAYER = RunShape(
    num_layers=1,
    hidden_size=256,
    num_attention_heads=4,
    seq_length=128,
    micro_batch_size=4,
    vocab_size=1000,
    ffn_hidden_size=704,
    add_bias_linear=False,
)


def test_an_unfused_dense_swiglu_keeps_its_activation_output_and_the_offset_sum():
    dense = COUNTED_LAYER.with_changes(gated_linear_unit=True)
    fused, unfused = (
        layer_activations(dense).linear,
        layer_activations(dense.with_changes(bias_activation_fusion=False)).linear,
    )
    assert unfused - fused == 1441792  # counted on CPU: a dense layer's MLP block unfused less fused, h 256 f 704


def test_each_routed_token_keeps_an_int64_sort_index_and_a_16_bit_probability():
    shape = _shape(E04)
    h, f = shape.hidden_size, shape.moe_ffn_hidden_size
    per_token_without_index = 2 * h + 3 * 2 * f
    assert routed_expert_bytes(shape) == 8 * 1024 * 4 * (per_token_without_index + 8 + 2)


def test_the_router_keeps_fp32_softmax_over_every_expert_only_with_pre_softmax():
    shape = _shape(E04)
    pre = shape.with_changes(moe_router_pre_softmax=True)
    assert router_bytes(pre) - router_bytes(shape) == 8 * 1024 * 4 * (shape.num_experts - shape.moe_router_topk)


def test_the_alltoall_dispatcher_keeps_an_int64_argsort_the_allgather_one_a_probability_and_a_mask():
    shape = _shape(E04)
    alltoall = shape.with_changes(moe_token_dispatcher_type="alltoall")
    assert router_bytes(shape) == 8 * 1024 * (8 * 4 + 4 * 4 + 3 * 8)
    assert router_bytes(alltoall) == 8 * 1024 * (8 * 4 + 4 * 4 + 8 * 8)


# Counted on CPU (tools/count_moe_saved_tensors.py, megatron-core 0.16.1 and torch 2.13.0+cpu: 0.19.0 is
# built for Python 3.12 only; the saved tensors of these paths are the same in both, see routed_expert_bytes):
# the bytes of unique storages saved for backward by a TransformerLayer's pre-MLP norm and MoE layer, less those of
# the same layer with a dense MLP of the expert's size. h 256, f 704, s 128, b 4, 8 experts, allgather dispatcher.
COUNTED = [
    ("gelu top-2", dict(moe_router_topk=2), 3442688),
    ("gelu top-4", dict(moe_router_topk=4), 8314880),
    ("gelu top-1 pre-softmax", dict(moe_router_topk=1, moe_router_pre_softmax=True), 1020928),
    ("unfused swiglu top-2", dict(moe_router_topk=2, gated_linear_unit=True, bias_activation_fusion=False), 7047168),
    (
        "fused swiglu top-2, shared expert 512",
        dict(moe_router_topk=2, gated_linear_unit=True, moe_shared_expert_intermediate_size=512),
        4294656,
    ),
]


@pytest.mark.parametrize(("case", "changes", "counted"), COUNTED, ids=[c[0] for c in COUNTED])
def test_moe_minus_dense_is_what_megatron_core_saves_to_the_byte(case, changes, counted):
    shape = COUNTED_LAYER.with_changes(num_experts=8, moe_ffn_hidden_size=704, **changes)
    sb, f = 128 * 4, 704
    glu = 2 if shape.gated_linear_unit else 1
    shared = sb * 2 * (shape.moe_shared_expert_intermediate_size or 0) * (glu + 1)
    dense_mlp = sb * (2 * f * glu + 2 * f)  # fc1 output and fc2 input of the dense layer
    assert routed_expert_bytes(shape) + router_bytes(shape) + shared - dense_mlp == counted


MOE_RUNS = ["e01-moe8-top2", "e02-moe16-shared-gqa", "e03-moe4-top1-s2048", E04]
# Planned before recording, with the terms above committed (benchmarks/moe_plan.json), one H100 each: within 3 %
# (e06, unfused SwiGLU with top-3, -2.6 %; e12, selective recompute, +2.3 %; the other five within 0.25 %).
PLAN = json.loads((ROOT / "benchmarks" / "moe_plan.json").read_text())
HOLD_OUTS = sorted(PLAN)


@pytest.mark.parametrize("run", MOE_RUNS)
def test_one_gpu_moe_runs_within_one_and_a_half_percent(run):
    measured = _max_allocated(CALIBRATION / f"{run}.log.gz")
    predicted = estimate_run([str(CALIBRATION / f"{run}.log.gz")]).estimate.peak_allocated_bytes / 2**20
    assert abs(predicted - measured) / measured <= 0.015


# Planned runs outside the 3 % this test holds the others to, each with what it showed (docs/estimate.md): (low,
# high) of the run's share over the model, and what in its launch command puts it there. None now.
OUTSIDE_THREE_PERCENT: dict[str, tuple[float, float, str]] = {}
# Runs the model was mended on after they were planned (how far over the model each was as planned): the unfused
# attention core's backward at long sequences, counted first as one score gradient (n81), then as the score-sized
# gradients less what dropout frees (n84). Within 3 % now; n86 and n87 were planned with the mended model. n119
# offloads half in fp16 (clipping off): 1,630 MiB over the model as planned (-4.0 %), the fp32 copies
# HybridDeviceOptimizer keeps of the GPU-resident half's fp16 gradients (`grad.to(fp32_param.dtype)`: 0.5 x 875 M x
# 4 B = 1,669 MiB), counted since (calibration.FP32_GRAD_COPY_BYTES); n121-n124 were planned with it. n77 offloads
# with the distributed optimizer but without the precision-aware one (a config Megatron-LM refuses, Bridge takes;
# recorded for HybridDeviceOptimizer's KeyError, n76): 1,716 MiB over the model as planned (-4.0 %), the fp32 main
# parameters of the offloaded half, which stay on the GPU; counted since, n128-n130 planned with it. n129 (its peak
# at the step, no foreach Adam temporary with offloading) 500 MiB over as planned (-3.5 %): gradient clipping's
# temporary of the largest gradient without Apex or TE (local_multi_tensor_scale; the allocator's trace:
# fixtures/memory-calibration/peak-traces), counted since.
MENDED_AFTER_PLANNING = {
    "n129-h4096-l4-f050-grads-bf16-precision-aware-off": (0.03, 0.04),
    "n77-gpt1b-f050-precision-aware-off-distopt": (0.035, 0.045),
    "n119-gpt1b-fp16-f050-no-clip": (0.035, 0.045),
    "n81-gpt-s16k-mbs1-expandable-advised": (0.13, 0.14),
    "n82-gpt-s8k-h32-expandable": (0.05, 0.06),
    "n83-gpt-s12k-h4096-expandable": (0.03, 0.035),
    "n84-gpt-s8k-h32-no-attention-dropout-expandable": (0.27, 0.28),
    "n85-gpt-s10k-h20-expandable": (0.04, 0.05),
}


@pytest.mark.parametrize(
    "run", [r for r in HOLD_OUTS if (CALIBRATION / f"{r}.log.gz").exists() and r not in OUTSIDE_THREE_PERCENT]
)
def test_moe_hold_outs_within_three_percent_as_planned(run):
    measured = _max_allocated(CALIBRATION / f"{run}.log.gz")
    planned = PLAN[run]["predicted_mib"]
    estimate = estimate_run([str(CALIBRATION / f"{run}.log.gz")]).estimate
    now = estimate.peak_allocated_bytes / 2**20
    # As planned, and now (e06 -2.6 % as planned, -0.5 % since the unfused SwiGLU's offset sum is counted). With
    # expert parallelism rank 0, the one that logs its memory, may get more or fewer routed tokens than its share
    # (e22, EP 4: 5.4 % under the model, 29 % of its routed activations): within the imbalance allowed for. A
    # dropping capacity factor bounds them from above only (e39, c = 1 at EP 2: 4.5 % under, the tokens dropped).
    # Over twelve iterations the imbalance grows: e68 (e21's config, which ran three) reached the allowance at
    # iteration 7 and passed it by 38 MiB, within the model's error that the verdict adds on top (memory/fit.py).
    allowed = below = 0.03 * measured
    imbalance = 0.0
    if estimate.shape.expert_model_parallel_size > 1:
        imbalance = routed_imbalance(estimate.shape) * estimate.most_loaded.routed_bytes / 2**20
        below = max(allowed, imbalance)
    if estimate.shape.moe_expert_capacity_factor is not None and not estimate.shape.padded_to_capacity:
        below = estimate.most_loaded.routed_bytes / 2**20  # the tokens over capacity dropped: at most the share
    # Offloading without --manual-gc: the first optimizer build is freed whenever Python's collector runs, so the peak
    # is either end of [collected, not] (n136: at the collected end, as l1-f075 of the offload sweep).
    below = max(below, allowed + estimate.most_loaded.uncollected_bytes / 2**20)
    if run in MENDED_AFTER_PLANNING:
        low, high = MENDED_AFTER_PLANNING[run]
        assert low * measured < measured - planned < high * measured
    for predicted in (now,) if run in MENDED_AFTER_PLANNING else (planned, now):
        above = max(allowed, (predicted + imbalance) * (1 + MODEL_UNDERESTIMATE) - predicted) if imbalance else allowed
        assert -below <= measured - predicted <= above


@pytest.mark.parametrize("run", sorted(OUTSIDE_THREE_PERCENT))
def test_the_runs_outside_three_percent_are_as_far_out_as_said(run):
    low, high, cause = OUTSIDE_THREE_PERCENT[run]
    measured = _max_allocated(CALIBRATION / f"{run}.log.gz")
    now = estimate_run([str(CALIBRATION / f"{run}.log.gz")]).estimate.peak_allocated_bytes / 2**20
    assert low * measured < measured - now < high * measured
    assert cause in LAUNCH_ALL[run]


LAUNCH_ALL = {row.split("\t")[0]: row.split("\t")[4] for row in (CALIBRATION / "runs.tsv").read_text().splitlines()[1:]}
LAUNCH = {name: command for name, command in LAUNCH_ALL.items() if name.startswith("e")}


@pytest.mark.parametrize("run", sorted(LAUNCH))
def test_a_moe_runs_launch_command_gives_the_estimate_its_logged_arguments_give(run, tmp_path):
    """--moe-router-pre-softmax, --moe-token-dispatcher-type and the fusion flags are read from a launch script
    as from the arguments block Megatron-LM prints."""
    script = tmp_path / "launch.sh"
    script.write_text(LAUNCH[run] + "\n")
    from_launch = estimate_run([str(script)]).estimate
    from_log = estimate_run([str(CALIBRATION / f"{run}.log.gz")]).estimate
    assert from_launch.peak_allocated_bytes == from_log.peak_allocated_bytes


MOE_BASE = [
    "model.num_layers=4",
    "model.hidden_size=1024",
    "model.num_attention_heads=16",
    "model.seq_length=1024",
    "train.micro_batch_size=2",
    "model.vocab_size=32000",
    "model.num_moe_experts=8",
]


def _read(items: list[str]) -> RunShape:
    return read_shape(build_store(parse_overrides(items)))


def test_a_bridge_config_spells_the_router_and_dispatcher_settings_under_model():
    bridge = _read([*MOE_BASE, "model.moe_router_pre_softmax=true", "model.moe_token_dispatcher_type=alltoall"])
    assert bridge.moe_router_pre_softmax and bridge.moe_token_dispatcher_type == "alltoall"
    assert not _read(MOE_BASE).moe_router_pre_softmax


OUT_OF_MEMORY = CALIBRATION / "out-of-memory" / "e11-moe8-top4-mbs14.log.gz"


def test_a_moe_run_judged_not_to_fit_an_h100_ran_out_of_memory_on_one_and_its_advice_ran():
    """Planned before recording (benchmarks/moe_plan.json), run alone on a real H100 80GB: e11 judged "does not
    fit" (the model before the MoE terms said it fits: 71.2 GB) ran out of memory; the two cheapest changes
    `estimate` advises for it, run as printed (e13, e12), ran, and peaked within the model's allowed error. A smaller
    micro-batch leads since the dense runs measured its cost (n16-n25: 1.04x-1.06x against selective recompute's
    1.13x-1.26x with the local implementation); e13 stepped 0.90x of e12 in its third iteration."""
    with gzip.open(OUT_OF_MEMORY, "rt") as log:
        assert "torch.OutOfMemoryError: CUDA out of memory" in log.read()
    report = estimate_run([str(OUT_OF_MEMORY)], gpu="H100-80GB")
    assert report.verdict.status == "does not fit"
    first, second = report.suggestions[:2]
    assert first.overrides == ("train.micro_batch_size=7",)
    assert second.overrides == ("model.recompute_granularity=selective", "model.recompute_modules=[core_attn]")
    for suggestion, run, flags in (
        (first, "e13-moe8-top4-mbs7", "--micro-batch-size 7 --global-batch-size 28"),
        (second, "e12-moe8-top4-mbs14-selective", "--recompute-granularity selective --recompute-modules core_attn"),
    ):
        assert suggestion.fits and flags in LAUNCH_ALL[run]
        measured = _max_allocated(CALIBRATION / f"{run}.log.gz") * 2**20
        assert measured <= suggestion.peak_allocated_bytes * (1 + MODEL_UNDERESTIMATE)


EP_RAN = ("e05-moe8-ep2", "e14-moe8-ep2-top4-aux", "e15-moe8-ep2-top2-mbs8", "e18-moe8-ep2-top2-mbs92-h200")
EP_RAN += (
    "e20-moe8-ep2-top2-mbs94-expandable-h200",
    "e21-moe8-ep2-top2-mbs94-selective-h200",
    "e22-moe8-ep4-top2-mbs8",
)


@pytest.mark.parametrize("run", EP_RAN)
def test_an_ep_run_that_ran_peaked_within_the_routed_imbalance_fits_allows_for(run):
    """Rank 0's peak of every expert-parallel run that ran is within the peak with the routed tokens' imbalance
    (memory/calibration.py ROUTED_IMBALANCE / sqrt(experts a rank)) that the verdict allows for."""
    estimate = estimate_run([str(CALIBRATION / f"{run}.log.gz")]).estimate
    measured = _max_allocated(CALIBRATION / f"{run}.log.gz") * 2**20
    assert measured <= estimate.peak_with_routed_excess_bytes(routed_imbalance(estimate.shape))


OOM_DEMAND = re.compile(
    r"Tried to allocate ([\d.]+) GiB.*?Of the allocated memory ([\d.]+) GiB is allocated by PyTorch"
)


@pytest.mark.parametrize("run", ["e19-moe8-ep2-top2-mbs94-h200", "e23-moe8-ep4-top2-mbs92-h200"])
def test_an_ep_run_that_ran_out_of_memory_on_h200_is_tight_and_its_demand_within_the_allowance(run):
    """Planned before recording (benchmarks/moe_plan.json), run on real H200s without an auxiliary loss: e19 (EP 2)
    judged "tight" with x 1.05 on the whole peak, e23 (EP 4) judged "fits" with it; both ran out of memory in their
    third step. What the failing rank held plus what it asked for is within the routed-imbalance allowance, which
    calls both "tight"; e23's is past x 1.05 on the whole peak (e19 also had 9.98 GiB reserved but unallocated)."""
    path = CALIBRATION / "out-of-memory" / f"{run}.log.gz"
    with gzip.open(path, "rt") as log:
        demand = max(float(asked) + float(held) for asked, held in OOM_DEMAND.findall(log.read())) * 2**30
    report = estimate_run([str(path)], gpu="H200")
    estimate, judged = report.estimate, report.verdict
    if run.startswith("e23"):
        assert estimate.peak_allocated_bytes * 1.05 < demand
    assert demand <= estimate.peak_with_routed_excess_bytes(routed_imbalance(estimate.shape))
    assert judged.status == "tight" and "what decides: the router's balance" in judged.sentence()
    assert "and the allocator's slack" in judged.sentence()
    dense = estimate._replace(shape=estimate.shape.with_changes(expert_model_parallel_size=1, expandable_segments=True))
    assert verdict_within(dense, judged.limit_bytes).fits


def test_e05_peaked_past_the_dense_margin_and_a_limit_it_would_call_fitting_is_not_one_with_expert_parallelism():
    estimate = estimate_run([str(CALIBRATION / "e05-moe8-ep2.log.gz")]).estimate
    measured = _max_allocated(CALIBRATION / "e05-moe8-ep2.log.gz") * 2**20
    assert measured > estimate.peak_allocated_bytes * (1 + MODEL_UNDERESTIMATE)
    limit = estimate.peak_allocated_bytes * (1 + MODEL_UNDERESTIMATE) * FIT_SLACK + 2**20
    judged = verdict_within(estimate, limit)
    assert (
        judged.status != "fits" and "MiB for the router's imbalance across expert-parallel ranks" in judged.sentence()
    )
    balanced = estimate.shape.with_changes(expert_model_parallel_size=1, expandable_segments=True)
    assert verdict_within(estimate._replace(shape=balanced), limit).fits


def test_diagnose_on_the_moe_oom_advises_the_change_that_ran_in_the_users_flags():
    """The real H100 OOM of e11: `diagnose` finds a capacity OOM and its fix is estimate's cheapest change, printed
    as the Megatron-LM flag e13 was launched with (and ran; the global batch as configured)."""
    finding = next(f for f in diagnose([str(OUT_OF_MEMORY)]).findings if f.id == "oom-capacity")
    assert finding.overrides == ["--micro-batch-size 7"]
    assert " ".join(finding.overrides) in LAUNCH_ALL["e13-moe8-top4-mbs7"]


@pytest.mark.parametrize(
    ("failed", "expandable", "smaller", "micro_batch"),
    [
        (
            "e19-moe8-ep2-top2-mbs94-h200",
            "e20-moe8-ep2-top2-mbs94-expandable-h200",
            "e67-moe8-ep2-top2-mbs47-advised-h200",
            47,
        ),
        (
            "e23-moe8-ep4-top2-mbs92-h200",
            "e27-moe8-ep4-top2-mbs92-expandable-h200",
            "e29-moe8-ep4-top2-mbs46-h200",
            46,
        ),
        # 87 -> 29, not 43: the largest micro-batch that divides the global batch (348) over DP 4
        (
            "e31-moe16-ep4-top2-mbs87-h200",
            "e33-moe16-ep4-top2-mbs87-expandable-h200",
            "e69-moe16-ep4-top2-mbs29-advised-h200",
            29,
        ),
    ],
)
def test_diagnose_on_an_ep_oom_advises_two_changes_and_each_ran_as_printed(failed, expandable, smaller, micro_batch):
    """e19's and e23's OOMs had 10-12 GiB reserved but unallocated: `diagnose` calls each fragmentation, advises
    expandable segments first and half the micro-batch (the global batch as configured) if the OOM stays; each run
    as printed on the same H200s ran. Selective recompute, advised before the dense runs measured its cost, ran too
    (e21, e28) and stepped slower (tests/advice/test_change_costs_on_gpu.py)."""
    path = CALIBRATION / "out-of-memory" / f"{failed}.log.gz"
    finding = next(f for f in diagnose([str(path)]).findings if f.id == "oom-fragmentation")
    export, *flags = finding.overrides
    assert export == "export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"
    assert flags == [f"--micro-batch-size {micro_batch}"]
    assert LAUNCH_ALL[expandable].startswith(export.removeprefix("export ") + " ")
    global_batch = re.search(r"--global-batch-size (\d+)", LAUNCH_ALL[expandable]).group(1)
    assert f"{flags[0]} --global-batch-size {global_batch}" in LAUNCH_ALL[smaller]
    for run in (expandable, smaller):
        with gzip.open(CALIBRATION / f"{run}.log.gz", "rt") as log:
            assert "(after 3 iterations) memory (MB)" in log.read()


@pytest.mark.parametrize(
    ("advised", "micro_batch"), [("e70-moe8-top4-cf2-pad-mbs6-advised", 6), ("e91-moe8-top4-cf2-pad-mbs8-advised", 8)]
)
def test_a_padded_capacity_oom_is_told_the_largest_micro_batch_that_fits_which_ran_as_printed(advised, micro_batch):
    """e37 (capacity factor 2, padded, one H100) ran out of memory. diagnose's fix was micro-batch 12 -> 6, at most
    half (e70 ran it); it is now the largest that divides the global batch and fits, 12 -> 8 (e91 ran it, planned
    before it ran). Each ran at its estimate."""
    path = CALIBRATION / "out-of-memory" / "e37-moe8-top4-cf2-pad-mbs12.log.gz"
    finding = next(f for f in diagnose([str(path)]).findings if f.id == "oom-capacity")
    assert finding.overrides == ["--micro-batch-size 8"]
    assert f"--micro-batch-size {micro_batch} --global-batch-size 24" in LAUNCH_ALL[advised]
    measured = _max_allocated(CALIBRATION / f"{advised}.log.gz")
    predicted = estimate_run([str(CALIBRATION / f"{advised}.log.gz")]).estimate
    assert abs(predicted.peak_allocated_bytes / 2**20 - measured) / measured < 0.001


def test_the_expandable_segments_fix_keeps_the_runs_own_allocator_options_and_ran_as_printed(tmp_path):
    """e61 is e19 launched with `PYTORCH_CUDA_ALLOC_CONF=garbage_collection_threshold:0.9 …`: it ran out of memory
    with 10 GiB reserved but unallocated. Given its launch command, `diagnose` confirms fragmentation from the
    command's own environment and prints one variable holding both options; e62, launched with it, ran."""
    failed, fixed = "e61-moe8-ep2-top2-mbs94-gcthreshold-h200", "e62-moe8-ep2-top2-mbs94-gcthreshold-expandable-h200"
    rows = (CALIBRATION / "out-of-memory" / "runs.tsv").read_text().splitlines()
    command = next(row.split("\t")[2] for row in rows if row.startswith(failed + "\t"))
    assert command.startswith("PYTORCH_CUDA_ALLOC_CONF=garbage_collection_threshold:0.9 python3 ")
    launch = tmp_path / "launch.sh"
    launch.write_text(command + "\n")
    path = CALIBRATION / "out-of-memory" / f"{failed}.log.gz"
    finding = next(f for f in diagnose([str(path)], config_paths=[str(launch)]).findings if f.id == "oom-fragmentation")
    assert finding.config.verdict == "confirmed"
    export = finding.overrides[0]
    assert export == "export PYTORCH_CUDA_ALLOC_CONF=garbage_collection_threshold:0.9,expandable_segments:True"
    assert LAUNCH_ALL[fixed].startswith(export.removeprefix("export ") + " ")
    with gzip.open(CALIBRATION / f"{fixed}.log.gz", "rt") as log:
        assert "(after 3 iterations) memory (MB)" in log.read()


def test_the_largest_ep4_runs_the_routed_imbalance_allowance_called_fitting_one_ran_one_ran_out_of_memory():
    """Planned with the allowance before recording, on four H200: e25 (8 experts, micro-batch 86) "fits" with
    260 MiB to spare, ran (rank 0 4.9 % over the balanced model); e31 (16 experts, 87) "fits" with 1,280 MiB,
    ran out of memory: 13.48 GiB reserved but unallocated, no block for the 10.62 GiB logits, though what it held
    and asked was within the allowance. Both are "tight" now: a MoE run's allocator slack is x 1.15."""
    ran = CALIBRATION / "e25-moe8-ep4-top2-mbs86-h200.log.gz"
    failed = CALIBRATION / "out-of-memory" / "e31-moe16-ep4-top2-mbs87-h200.log.gz"
    for path in (ran, failed):
        report = estimate_run([str(path)], gpu="H200")
        assert PLAN[path.name.removesuffix(".log.gz")]["verdict"] == "fits"
        assert report.verdict.status == "tight" and "x 1.15 assumed" in report.verdict.sentence()
    with gzip.open(failed, "rt") as log:
        demand = max(float(asked) + float(held) for asked, held in OOM_DEMAND.findall(log.read())) * 2**30
    estimate = estimate_run([str(failed)], gpu="H200").estimate
    assert demand <= estimate.peak_with_routed_excess_bytes(routed_imbalance(estimate.shape))


def test_planned_with_the_moe_allocator_slack_the_largest_fitting_run_and_diagnoses_advice_for_e31_ran():
    """Planned before recording, on four H200: e32 (e31 at micro-batch 80), the largest the x 1.15 slack calls
    "fits", ran; e33, `diagnose`'s first change for e31's OOM (expandable segments, in its launch command), which
    the verdict then calls "fits" (x 1.06), ran."""
    finding = diagnose([str(CALIBRATION / "out-of-memory" / "e31-moe16-ep4-top2-mbs87-h200.log.gz")]).findings[0]
    assert finding.overrides[0] == "export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"
    assert LAUNCH_ALL["e33-moe16-ep4-top2-mbs87-expandable-h200"].startswith(
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
    )
    for run in ("e32-moe16-ep4-top2-mbs80-h200", "e33-moe16-ep4-top2-mbs87-expandable-h200"):
        assert PLAN[run]["verdict"] == "fits"
        with gzip.open(CALIBRATION / f"{run}.log.gz", "rt") as log:
            assert "(after 3 iterations) memory (MB)" in log.read()


def test_where_the_moe_slack_alone_keeps_a_run_from_fitting_estimate_leads_with_expandable_segments_and_it_ran():
    """The x 1.15 a MoE run's allocator may reserve over its peak falls to a dense run's x 1.06 with expandable
    segments (calibration.fit_slack). e10 (micro-batch 12, one H100) is "tight" for that slack alone; its first
    change is now the setting, which the verdict then calls "fits": run as printed (e80), it reserved 70,122 MiB of
    the 78,216 PyTorch may on the card, and stepped 1.01x against e10 again (e79). On four H200, e31's estimate
    leads with it too: e33 (e31 with it, which `diagnose` had advised after e31's OOM) ran."""
    base, advised = "e79-moe8-top4-mbs12-base", "e80-moe8-top4-mbs12-expandable-advised"
    assert (PLAN[base]["verdict"], PLAN[advised]["verdict"]) == ("tight", "fits")
    report = estimate_run([str(CALIBRATION / f"{base}.log.gz")], gpu="H100-80GB")
    first = report.suggestions[0]
    assert first.overrides == ("env.PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",) and first.fits
    assert "the routed tensors' freed memory" in first.change
    assert any("the verdict turns on them" in note for note in report.notes)  # a log does not show the variable
    assert LAUNCHES[advised] == f"PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True {LAUNCHES[base]}"
    with gzip.open(CALIBRATION / f"{advised}.log.gz", "rt") as log:
        reserved = max(float(m) for m in MAX_RESERVED.findall(log.read())) * 2**20
    assert reserved < report.verdict.limit_bytes and trained(advised, 14)
    e31 = estimate_run([str(CALIBRATION / "out-of-memory" / "e31-moe16-ep4-top2-mbs87-h200.log.gz")], gpu="H200")
    assert e31.suggestions[0].overrides == first.overrides
    assert LAUNCH_ALL["e33-moe16-ep4-top2-mbs87-expandable-h200"].startswith(
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
    )


def test_e19s_first_change_on_an_h100_halves_its_micro_batch_with_expandable_segments_and_it_ran_under_the_limit():
    """e19 (EP 2, micro-batch 94) on an H100: without the setting's credit a MoE run's x 1.15 slack left micro-batch
    2 as the first change (94's divisors: 47, 2, 1); with it, 47 and expandable segments. Run as printed for twelve
    iterations under an H100's limit (two H200, ODR_CAP_MIB): e82 ran, its router drifting to 70,373 MiB (as e67, 47
    without the setting on an H200: 70,430), reserving 70,864 of the 77,178 MiB PyTorch may on the card."""
    report = estimate_run([str(CALIBRATION / "out-of-memory" / "e19-moe8-ep2-top2-mbs94-h200.log.gz")], gpu="H100-80GB")
    first = report.suggestions[0]
    assert first.fits and first.overrides == (
        "train.micro_batch_size=47",
        "env.PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
    )
    run = "e82-moe8-ep2-top2-mbs47-expandable-advised-cap"
    assert PLAN[run]["verdict"] == "fits"
    launch = LAUNCHES[run]
    assert launch.startswith("ODR_CAP_MIB=77178 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True ")
    assert "--micro-batch-size 47 --global-batch-size 188 " in launch
    with gzip.open(CALIBRATION / f"{run}.log.gz", "rt") as log:
        text = log.read()
    reserved = max(float(m) for m in MAX_RESERVED.findall(text))
    assert reserved < 77178 and trained(run, 12)
    assert _max_allocated(CALIBRATION / f"{run}.log.gz") * 2**20 > 1.07 * first.peak_allocated_bytes  # the drift


@pytest.mark.parametrize("order", [(0, 1), (1, 0)])
def test_an_oom_on_several_ranks_reports_the_figures_of_the_rank_furthest_over(order, tmp_path):
    """e23 ran out of memory on ranks 0 (10.06 GiB free for 11.23) and 1 (4.47 GiB free): the finding's figures,
    and the fix computed from them, are rank 1's, whichever rank's line comes first."""
    with gzip.open(CALIBRATION / "out-of-memory" / "e23-moe8-ep4-top2-mbs92-h200.log.gz", "rt") as log:
        lines = [line for line in log if "torch.OutOfMemoryError" in line]
    assert [line[:7] for line in lines] == ["[rank0]", "[rank1]"]
    (tmp_path / "job.log").write_text("".join(lines[i] for i in order))
    finding = next(f for f in diagnose([str(tmp_path / "job.log")]).findings if f.id == "oom-fragmentation")
    assert finding.ranks == [0, 1] and finding.facts["gpu"] == 1
    assert finding.facts["free_bytes"] == pytest.approx(4.47 * 2**30, rel=1e-3)


def test_one_gpu_moe_at_the_largest_micro_batch_the_moe_slack_calls_fitting_ran_on_an_h100():
    """e34, planned before recording: e10's model at micro-batch 11, "fits" an H100 with x 1.15 allocator slack,
    ran on a real H100 80GB within 0.1 % of the model; e10 (12, which ran) is "tight" under that slack."""
    e34, e10 = CALIBRATION / "e34-moe8-top4-mbs11.log.gz", CALIBRATION / "e10-moe8-top4-mbs12.log.gz"
    assert PLAN[e34.name.removesuffix(".log.gz")]["verdict"] == "fits"
    report = estimate_run([str(e34)], gpu="H100-80GB")
    assert report.verdict.fits and report.verdict.slack == 1.15
    assert abs(_max_allocated(e34) * 2**20 / report.estimate.peak_allocated_bytes - 1) < 0.001
    assert estimate_run([str(e10)], gpu="H100-80GB").verdict.status == "tight"


def test_at_a_60_gib_target_the_moe_is_told_the_largest_micro_batch_that_fits_and_it_ran_under_that_limit():
    """e10 at a 60 GiB target: the first change was micro-batch 12 -> 6; now the largest that fits, 12 -> 8, with
    expandable segments (a MoE run's slack needs them at 8). Planned before it ran, run as printed on one H100 under
    the 58,097 MiB PyTorch may reserve of 60 GiB (ODR_CAP_MIB, e90): it trained, within 0.1 % of its estimate."""
    report = estimate_run([str(CALIBRATION / "e10-moe8-top4-mbs12.log.gz")], target="60GiB")
    first = report.suggestions[0]
    assert first.fits and first.overrides == (
        "train.micro_batch_size=8",
        "env.PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
    )
    assert round(report.verdict.limit_bytes / 2**20) == 58097
    run = "e90-moe8-top4-mbs8-expandable-cap60-advised"
    assert LAUNCHES[run].startswith("ODR_CAP_MIB=58097 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True python3 ")
    assert "--micro-batch-size 8 --global-batch-size 24" in LAUNCHES[run] and trained(run)
    predicted = estimate_run([str(CALIBRATION / f"{run}.log.gz")]).estimate.peak_allocated_bytes / 2**20
    assert abs(predicted / _max_allocated(CALIBRATION / f"{run}.log.gz") - 1) < 0.001


def test_estimates_micro_batch_advice_for_the_ep4_oom_ran_as_printed():
    """e29: estimate's second change for e23 (micro-batch 92 -> 46 at the same global batch), run as printed on
    the same four H200, ran."""
    report = estimate_run([str(CALIBRATION / "out-of-memory" / "e23-moe8-ep4-top2-mbs92-h200.log.gz")], gpu="H200")
    smaller = next(s for s in report.suggestions if s.overrides == ("train.micro_batch_size=46",))
    assert (
        smaller.fits and "--micro-batch-size 46 --global-batch-size 368" in LAUNCH_ALL["e29-moe8-ep4-top2-mbs46-h200"]
    )


def test_advice_for_an_ep_run_keeps_megatrons_expert_grid_dividing_the_world():
    """e23 (EP 4 on four GPUs): pipeline parallel 2 would make expert TP x EP x PP = 8, which Megatron refuses on
    four ("world_size (4) is not divisible by expert_tensor_model_pipeline_parallel size (8)"), so it is not
    advised; nor is tensor parallel 2 with the local implementation (e30, run as first advised, was refused)."""
    report = estimate_run([str(CALIBRATION / "out-of-memory" / "e23-moe8-ep4-top2-mbs92-h200.log.gz")], gpu="H200")
    assert report.estimate.shape.expert_grid_divides_world
    assert not report.estimate.shape.with_changes(pipeline_parallel=2, data_parallel=2).expert_grid_divides_world
    parallel = ("model.pipeline_model_parallel_size", "model.tensor_model_parallel_size")
    assert not any(o.startswith(parallel) for s in report.suggestions for o in s.overrides)
    with gzip.open(CALIBRATION / "refused" / "e30-moe8-ep4-top2-mbs92-tp2-h200.log.gz", "rt") as log:
        assert "MoE and tensor parallelismare enabled without also enabling sequence parallelism" in log.read()


def test_tensor_parallel_advice_for_a_moe_run_on_transformer_engine_turns_on_sequence_parallelism():
    """megatron-core 0.19.0 refuses MoE with TP > 1 without sequence parallelism (moe_layer.py), and expert TP
    follows TP unless set: the advice sets both, as its estimate assumes."""
    config = [*MOE_BASE, "train.micro_batch_size=16", "model.expert_model_parallel_size=4"]
    report = estimate_run(
        [], overrides=[*config, "model.transformer_impl=transformer_engine"], gpu_memory="12GiB", world_size=4
    )
    tensor = next(s for s in report.suggestions if "model.tensor_model_parallel_size=2" in s.overrides)
    assert {"model.sequence_parallel=true", "model.expert_tensor_parallel_size=1"} <= set(tensor.overrides)
    assert tensor.estimate.shape.sequence_parallel and tensor.estimate.shape.expert_grid_divides_world


MEASURED_ONLY_LOCAL = "MoE activations as megatron-core 0.19.0 saves them with local experts"


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["model.transformer_impl=local"], False),
        ([], True),  # Megatron's default: Transformer Engine
        (["model.transformer_impl=local", "model.moe_grouped_gemm=true"], True),
        (["model.transformer_impl=local", "moe_permute_fusion=true"], True),  # a Megatron-LM spelling
    ],
)
def test_a_moe_estimate_says_when_its_experts_are_not_the_local_ones_it_was_measured_on(extra, said):
    shape = _read([*MOE_BASE, *extra])
    assert any(MEASURED_ONLY_LOCAL in a for a in shape.assumptions) is said
    dense = _read([m for m in MOE_BASE if "moe" not in m])
    assert not any(MEASURED_ONLY_LOCAL in a for a in dense.assumptions)


MAX_RESERVED = re.compile(r"max reserved: ([\d.]+)")
PADDED_RAN = ("e36-moe8-top4-cf1.5-pad-mbs11", "e38-moe8-top4-cf2-pad-mbs10")


@pytest.mark.parametrize("run", PADDED_RAN)
def test_a_padded_capacity_factor_run_the_model_calls_fitting_ran_at_its_estimate_with_a_dense_runs_slack(run):
    """Planned before recording, run alone on a real H100 80GB: e34's model with --moe-expert-capacity-factor
    c --moe-pad-expert-input-to-capacity at the largest micro-batch "fits" (c = 1.5: 11, c = 2: 10). Each expert
    takes exactly c x its balanced share: both peaked within 0.1 % of the model, where the model that did not read
    the factor was 8 % (c = 1.5) and 15 % (c = 2) low. The tokens' sizes no longer change from step to step:
    they reserved at most x 1.035 their peak (dropless MoE runs up to x 1.148), the slack "fits" assumed."""
    path = CALIBRATION / f"{run}.log.gz"
    assert PLAN[run]["verdict"] == "fits"
    report = estimate_run([str(path)], gpu="H100-80GB")
    assert report.verdict.fits and report.verdict.slack == FIT_SLACK
    measured = _max_allocated(path) * 2**20
    assert abs(measured / report.estimate.peak_allocated_bytes - 1) < 0.001
    dropless = estimate_run([str(path)], gpu="H100-80GB", overrides=["model.moe_expert_capacity_factor=None"])
    assert measured / dropless.estimate.peak_allocated_bytes > 1.07
    with gzip.open(path, "rt") as log:
        reserved = max(float(m) for m in MAX_RESERVED.findall(log.read())) * 2**20
    assert reserved / measured <= 1.035 < FIT_SLACK


def test_a_padded_capacity_factor_run_judged_not_to_fit_ran_out_of_memory_where_the_dropless_one_ran():
    """e37: e10's micro-batch (12, which ran dropless) with capacity factor 2 padded: "does not fit", planned
    before recording; it ran out of memory on the H100, holding and asking more than the dropless peak."""
    failed = CALIBRATION / "out-of-memory" / "e37-moe8-top4-cf2-pad-mbs12.log.gz"
    assert PLAN["e37-moe8-top4-cf2-pad-mbs12"]["verdict"] == "does not fit"
    assert estimate_run([str(failed)], gpu="H100-80GB").verdict.status == "does not fit"
    dropless = estimate_run([str(failed)], gpu="H100-80GB", overrides=["model.moe_expert_capacity_factor=None"])
    assert dropless.verdict.status == "tight"  # what the model said before it read the factor
    with gzip.open(failed, "rt") as log:
        [(asked, held)] = re.findall(r"allocate ([\d.]+) MiB.*?memory ([\d.]+) GiB is allocated by PyTorch", log.read())
    assert float(asked) + float(held) * 1024 > _max_allocated(CALIBRATION / "e10-moe8-top4-mbs12.log.gz")


def _moe(**changes) -> RunShape:
    """COUNTED_LAYER as top-4 of 8 experts."""
    return COUNTED_LAYER.with_changes(num_experts=8, moe_router_topk=4, **changes)


@pytest.mark.parametrize(
    "factor,pad,share",
    [(None, False, 1.0), (1.5, True, 1.5), (3.0, True, 2.0), (0.5, True, 0.5), (1.5, False, 1.0), (0.5, False, 0.5)],
)
def test_the_routed_tokens_share_follows_megatrons_capacity_and_padding(factor, pad, share):
    """Padded: exactly c x the balanced share, or every token when c x top-k / experts is over 1 (8 experts,
    top-4: at most 2 x); dropping: at most c x it, and never more than the balanced tokens on one GPU."""
    shape = _moe(moe_expert_capacity_factor=factor, moe_pad_expert_input_to_capacity=pad)
    assert shape.routed_token_share == share
    dropless = routed_expert_bytes(_moe())
    assert routed_expert_bytes(shape) == pytest.approx(share * dropless)


@pytest.mark.parametrize(
    "factor,pad,allowed", [(None, False, 0.75), (1.25, False, 0.25), (2.0, False, 0.75), (1.5, True, 0.0)]
)
def test_a_capacity_factor_bounds_the_router_imbalance_fits_allows_for(factor, pad, allowed):
    """EP 8, one expert a rank: 0.75 more than the balanced share without a capacity factor; a rank's experts
    take at most c x it (c - 1 more), and padded every rank takes the same."""
    shape = _moe(expert_model_parallel_size=8, moe_expert_capacity_factor=factor, moe_pad_expert_input_to_capacity=pad)
    assert routed_imbalance(shape) == pytest.approx(allowed)


def test_a_negative_capacity_factor_is_dropless_as_megatron_reads_it():
    sizes = "model.num_layers=2 model.hidden_size=1024 model.num_attention_heads=8 model.seq_length=1024"
    moe = "train.micro_batch_size=1 model.vocab_size=32000 model.num_moe_experts=8"
    for factor, read in (("-1", None), ("1.25", 1.25)):
        items = [*sizes.split(), *moe.split(), f"model.moe_expert_capacity_factor={factor}"]
        assert read_shape(build_store(parse_overrides(items))).moe_expert_capacity_factor == read


@pytest.mark.parametrize(
    "name,allowed", [("e39-moe8-ep2-top2-cf1-mbs86-h200", 0.0), ("e43-moe8-ep2-top2-cf1.25-mbs82-h200", 0.25)]
)
def test_a_dropping_capacity_factor_bounds_the_imbalance_fits_allows_and_the_largest_fitting_ep_run_ran(name, allowed):
    """Planned before recording, on two real H200: e18's model (EP 2, top-2 of 8, no auxiliary loss) with
    --moe-expert-capacity-factor c at the largest micro-batch "fits" once a rank's experts may take at most c x
    their balanced share: e39 (c = 1, micro-batch 86, no imbalance allowed), e43 (c = 1.25, 82: 25 % instead of
    the 37.5 % of two experts a rank). Dropless, each is "tight"; both ran, rank 0 4.5 % and 3.1 % under the
    balanced model (what was over capacity was dropped)."""
    run = CALIBRATION / f"{name}.log.gz"
    assert PLAN[name]["verdict"] == "fits"
    report = estimate_run([str(run)], gpu="H200")
    assert report.verdict.fits and routed_imbalance(report.estimate.shape) == allowed
    dropless = estimate_run([str(run)], gpu="H200", overrides=["model.moe_expert_capacity_factor=None"])
    assert dropless.verdict.status == "tight" and "the router's balance" in dropless.verdict.sentence()
    assert _max_allocated(run) * 2**20 <= report.estimate.peak_allocated_bytes


def test_padded_to_capacity_an_ep_run_fits_where_the_dropless_one_ran_out_of_memory_and_it_ran():
    """e41, planned before recording, on two real H200: e19's run (EP 2, micro-batch 94, which ran out of memory
    dropless) padded to capacity factor 1.0: every rank takes exactly its balanced share, so "fits" (no imbalance,
    a dense run's slack). It ran at 0.07 % over the model; it reserved 1.088 x its peak, at the top of the dense
    runs' range (1.085), within what PyTorch could reserve on the card."""
    run = CALIBRATION / "e41-moe8-ep2-top2-cf1-pad-mbs94-h200.log.gz"
    assert PLAN[run.name.removesuffix(".log.gz")]["verdict"] == "fits"
    with gzip.open(CALIBRATION / "out-of-memory" / "e19-moe8-ep2-top2-mbs94-h200.log.gz", "rt") as log:
        assert "torch.OutOfMemoryError: CUDA out of memory" in log.read()
    report = estimate_run([str(run)], gpu="H200")
    assert report.verdict.fits and report.verdict.slack == FIT_SLACK and report.verdict.routed_excess_bytes == 0
    measured = _max_allocated(run) * 2**20
    assert abs(measured / report.estimate.peak_allocated_bytes - 1) < 0.001
    with gzip.open(run, "rt") as log:
        reserved = max(float(m) for m in MAX_RESERVED.findall(log.read())) * 2**20
    assert 1.08 < reserved / measured < 1.09 and reserved < report.verdict.limit_bytes


def test_under_an_h100s_limit_the_largest_ep_micro_batch_called_fitting_ran_and_the_smallest_called_not_ran_out():
    """Expert parallelism 2, e19's model, planned for two H100 (benchmarks/moe_plan.json): micro-batch 43, "fits" with
    631 MiB to spare, and 56, "does not fit". Two H200 came: uncapped both trained (e71, e72: rank 0 0.3 % and 1.1 %
    over the model), 56 with a peak above what an H100 lets PyTorch reserve; under that limit (ODR_CAP_MIB, e73 and
    e74) 43 ran and 56 ran out of memory on both ranks."""
    fits, fails = "e73-moe8-ep2-top2-mbs43-fits-cap", "e74-moe8-ep2-top2-mbs56-does-not-fit-cap"
    assert (PLAN[fits]["verdict"], PLAN[fails]["verdict"]) == ("fits", "does not fit")
    for uncapped in ("e71-moe8-ep2-top2-mbs43-fits", "e72-moe8-ep2-top2-mbs56-does-not-fit"):
        assert "ODR_CAP_MIB" not in LAUNCH_ALL[uncapped] and trained(uncapped)
    cap_mib = 77178
    assert _max_allocated(CALIBRATION / "e72-moe8-ep2-top2-mbs56-does-not-fit.log.gz") > cap_mib
    assert LAUNCH_ALL[fits].startswith(f"ODR_CAP_MIB={cap_mib} ")
    assert trained(fits)
    with gzip.open(CALIBRATION / "out-of-memory" / f"{fails}.log.gz", "rt") as log:
        assert len(re.findall(r"OutOfMemoryError: CUDA out of memory.*GiB allowed", log.read())) == 2  # both ranks


def test_on_real_h100s_the_fitting_ep_micro_batch_ran_and_the_other_ran_out_inside_nccl_which_diagnose_names():
    """e75 and e76 (e71 and e72 on two real H100): 43 ran; 56 died in its first step's logging, where NCCL could not
    allocate 4 bytes ("Failed to CUDA calloc async 4 bytes", NCCL 2.28 inside the DistBackendError) once PyTorch's
    cache held the GPU (nvidia-smi 81,068 of 81,559 MiB). `diagnose` calls it an out-of-memory ahead of the NCCL
    failure, with the model's peak and the `estimate` command for the GPU's verdict, which is "does not fit" with
    micro-batch 56 -> 28 first (below the 43 that ran)."""
    assert LAUNCHES["e75-moe8-ep2-top2-mbs43-fits"] == LAUNCHES["e71-moe8-ep2-top2-mbs43-fits"]
    assert trained("e75-moe8-ep2-top2-mbs43-fits")
    failed = CALIBRATION / "out-of-memory" / "e76-moe8-ep2-top2-mbs56-does-not-fit.log.gz"
    first, *others = diagnose([str(failed)]).findings
    assert first.id == "oom-capacity" and [f.id for f in others] == ["nccl-collective-failure"]
    assert {e.text for e in first.evidence} == {
        "Failed to CUDA calloc async 24 bytes",
        "Failed to CUDA calloc async 4 bytes",
    }
    assert first.facts["fit_verdict"].startswith(
        f"this message does not give the GPU's size: `offloaddoctor estimate {failed} --gpu NAME`"
    )
    assert first.facts["estimated_peak_allocated_bytes"] > 75 * 2**30
    report = estimate_run([str(failed)], gpu="H100-80GB")
    assert report.verdict.status == "does not fit"
    assert report.suggestions[0].overrides == ("train.micro_batch_size=28",)


def test_a_covered_request_in_a_step_the_model_finds_short_even_at_best_is_capacity_and_its_fix_ran():
    """e74's rank 0 asked for 6.84 GiB with 7.43 GiB free within the limit or reserved-but-unallocated: the message
    alone says fragmentation. The memory model's whole step, even in its best case, is 734 MiB over what an H100
    lets PyTorch reserve (e72's rank 0 peaked 789 MiB over it uncapped), and with expandable segments the run ran
    out of memory again (e77, under the same limit on two H200). So `diagnose` calls both ranks capacity, and the
    fix it prints, micro-batch 56 -> 28, ran (e78, same limit: 40,887 MiB allocated at most)."""
    failed = diagnose([str(CALIBRATION / "out-of-memory" / "e74-moe8-ep2-top2-mbs56-does-not-fit-cap.log.gz")])
    (finding,) = failed.findings
    assert finding.id == "oom-capacity" and finding.ranks == [0, 1]
    assert "≥ request 6.84 GiB, but the memory model's whole step is" in finding.facts["fragmentation_arithmetic"]
    assert finding.overrides == ["--micro-batch-size 28"]
    again = "e77-moe8-ep2-top2-mbs56-expandable-cap"
    assert LAUNCHES[again] == LAUNCHES["e74-moe8-ep2-top2-mbs56-does-not-fit-cap"].replace(
        "ODR_CAP_MIB=77178 ", "ODR_CAP_MIB=77178 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
    )
    with gzip.open(CALIBRATION / "out-of-memory" / f"{again}.log.gz", "rt") as log:
        assert "OutOfMemoryError: CUDA out of memory" in log.read()
    advised = "e78-moe8-ep2-top2-mbs28-advised-cap"
    assert "--micro-batch-size 28 " in LAUNCH_ALL[advised] and "--global-batch-size 112 " in LAUNCH_ALL[advised]
    assert LAUNCH_ALL[advised].startswith("ODR_CAP_MIB=77178 ") and trained(advised)


def test_expert_tensor_parallelism_gathers_its_groups_tokens_and_splits_f():
    """A rank's experts process ETP x topk x its tokens (token_dispatcher.py gathers over the expert-TP group), each at
    1/ETP of f: at ETP k the h-sized and index terms grow k times, the f-sized ones stay."""
    shape = _shape("e94-moe8-top4-etp4-mbs16")
    one = shape.with_changes(expert_tensor_parallel_size=1, expert_model_parallel_size=4)
    a, tokens, topk = 2, 16 * 1024, 4
    assert routed_expert_bytes(shape) - routed_expert_bytes(one) == tokens * topk * 3 * (a * shape.hidden_size + 8 + a)
    wider, one_wider = (s.with_changes(moe_ffn_hidden_size=s.moe_ffn_hidden_size + 4) for s in (shape, one))
    f_sized = tokens * topk * 3 * 2 * 4  # 3 tensors of f, 2 bytes, 4 more columns
    assert routed_expert_bytes(wider) - routed_expert_bytes(shape) == f_sized
    assert routed_expert_bytes(one_wider) - routed_expert_bytes(one) == f_sized


def test_expert_tensor_parallel_runs_on_four_gpus_have_the_figures_and_verdicts_planned():
    """e94-e100 (four H200, megatron-core 0.19.0, planned in benchmarks/moe_plan.json before they ran). The model before
    read ETP only in the parameters and gave ETP 4, ETP 2 x EP 2 and EP 4 one figure (26,636 MiB at micro-batch 16).
    Measured: 32,810 (ETP 4: planned 32,804), 30,193 (ETP 2 x EP 2: planned 28,692; rank 0's peak grew step after step
    as the router, with no auxiliary loss, sent its experts more) and 26,429 (EP 4: planned 26,636). Under an H100's
    limit, ETP 4 at micro-batch 33, the largest "fits", trained (64,536 against 64,524); at 44, "does not fit" (before:
    "tight" at 68,087), every rank ran out of memory. So did ETP 2 x EP 2: 35 trained (62,055; the router's imbalance,
    which the verdict allows for), 46 ran out of memory (two ranks said so before the job stopped)."""
    planned_and_measured = {
        "e94-moe8-top4-etp4-mbs16": 0.005,
        "e95-moe8-top4-etp2-ep2-mbs16": 0.06,  # the router's imbalance: the verdict's allowance covers it
        "e96-moe8-top4-ep4-mbs16": 0.01,
        "e97-moe8-top4-etp4-mbs33-fits-cap": 0.005,
        # the alltoall dispatcher, which gathers the expert-TP group's tokens after its all-to-all: 33,209 against
        # 32,800 (+1.2 %: something transient of about 50 MiB a layer the model does not count) and 30,197 against
        # 28,694 (the router's imbalance, as e95)
        "e99-moe8-top4-etp4-alltoall-mbs16": 0.015,
        "e100-moe8-top4-etp2-ep2-alltoall-mbs16": 0.06,
        "e101-moe8-top4-etp2-ep2-mbs35-fits-cap": 0.06,  # 62,055 against 59,261: the imbalance the verdict allows
    }
    for run, within in planned_and_measured.items():
        assert trained(run)
        assert abs(_max_allocated(CALIBRATION / f"{run}.log.gz") / PLAN[run]["predicted_mib"] - 1) < within
        assert estimate_run(
            [str(CALIBRATION / f"{run}.log.gz")]
        ).estimate.peak_allocated_bytes / 2**20 == pytest.approx(PLAN[run]["predicted_mib"], abs=1)
    stopped = (CALIBRATION / "out-of-memory" / "runs.tsv").read_text().splitlines()
    for fits, fails, ranks in (
        ("e97-moe8-top4-etp4-mbs33-fits-cap", "e98-moe8-top4-etp4-mbs44-does-not-fit-cap", 4),
        ("e101-moe8-top4-etp2-ep2-mbs35-fits-cap", "e102-moe8-top4-etp2-ep2-mbs46-does-not-fit-cap", 2),
    ):
        assert (PLAN[fits]["verdict"], PLAN[fails]["verdict"]) == ("fits", "does not fit")
        assert LAUNCH_ALL[fits].startswith("ODR_CAP_MIB=77178 ")
        command = next(row.split("\t")[2] for row in stopped if row.startswith(f"{fails}\t"))
        assert command.startswith("ODR_CAP_MIB=77178 ")
        with gzip.open(CALIBRATION / "out-of-memory" / f"{fails}.log.gz", "rt") as log:
            assert len(re.findall(r"OutOfMemoryError: CUDA out of memory.*GiB allowed", log.read())) == ranks


def test_the_fix_printed_for_an_expert_tensor_parallel_oom_trained_at_the_peak_it_said():
    """e98 (ETP 4, micro-batch 44, out of memory under an H100's limit): diagnose prints `--micro-batch-size 22`, "peak
    43,999 MiB"; e103 is e98's launch with that line, under the same limit: it trained at 44,009 MiB."""
    failed = "e98-moe8-top4-etp4-mbs44-does-not-fit-cap"
    [finding] = diagnose([str(CALIBRATION / "out-of-memory" / f"{failed}.log.gz")]).findings
    assert finding.id == "oom-capacity" and finding.overrides == ["--micro-batch-size 22"]
    assert "peak 43,999 MiB" in finding.facts["cheapest_change_that_fits"]
    fixed = "e103-moe8-top4-etp4-mbs22-cap-advised"
    stopped = (CALIBRATION / "out-of-memory" / "runs.tsv").read_text().splitlines()
    command = next(row.split("\t")[2] for row in stopped if row.startswith(f"{failed}\t"))

    def unported(launch: str) -> str:
        return re.sub(r"--master-port \d+ ", "", launch)

    assert unported(LAUNCH_ALL[fixed]) == unported(command).replace("--micro-batch-size 44", "--micro-batch-size 22")
    assert trained(fixed)
    assert abs(_max_allocated(CALIBRATION / f"{fixed}.log.gz") / 43999 - 1) < 0.005
