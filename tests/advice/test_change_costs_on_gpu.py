"""What each change the advice weighs cost on a real GPU, held to the recorded runs that measured it
(fixtures/memory-calibration, two H200, megatron-core 0.19.0; planned in benchmarks/moe_plan.json before each run)."""

from __future__ import annotations

import gzip
import re
import statistics
from pathlib import Path

import pytest

from offloaddoctor.advice.changes import (
    CHANGES,
    EXPANDABLE_SEGMENTS,
    HALVED_MICRO_BATCH,
    Change,
    Cost,
    _expert_cost,
    _micro_batch_cost,
    _selective_cost,
)
from offloaddoctor.advice.slowdown import (
    MICRO_BATCH_CUT,
    PARAMETER_BOUND_MOE,
    SELECTIVE_RECOMPUTE_LOCAL,
    expected_slowdown,
    measured_slowdown,
    micro_batch_cut_slowdown,
    selective_recompute_slowdown,
    tensor_parallel_slowdown,
)
from offloaddoctor.api import diagnose
from offloaddoctor.api import estimate as estimate_run
from offloaddoctor.memory.calibration import MODEL_UNDERESTIMATE

CALIBRATION = Path(__file__).resolve().parents[2] / "fixtures" / "memory-calibration"
STEP_MS = re.compile(r"elapsed time per iteration \(ms\): ([\d.]+)")
MAX_ALLOCATED = re.compile(r"max allocated: ([\d.]+)")
LAUNCH = {row.split("\t")[0]: row.split("\t")[4] for row in (CALIBRATION / "runs.tsv").read_text().splitlines()[1:]}


def _log(run: str) -> str:
    with gzip.open(CALIBRATION / f"{run}.log.gz", "rt") as log:
        return log.read()


def step_ms(run: str) -> float:
    """Median iteration time once warm: iterations 4 to the last of the run's twelve or fourteen."""
    times = [float(t) for t in STEP_MS.findall(_log(run))]
    assert len(times) in (12, 14)
    return statistics.median(times[3:])


def third_step_ms(run: str, folder: Path = CALIBRATION) -> float:
    """A three-iteration run's last (warm) iteration: the only step time such a run has."""
    with gzip.open(folder / f"{run}.log.gz", "rt") as log:
        times = [float(t) for t in STEP_MS.findall(log.read())]
    assert len(times) == 3
    return times[2]


def ratio(run: str, baseline: str) -> float:
    return step_ms(run) / step_ms(baseline)


BASE, BASE_MBS8 = "e52-moe40-ep1-base-h200", "e56-moe40-ep1-mbs8-base-h200"


def test_estimate_orders_the_changes_for_the_moe_that_ran_out_of_memory_as_their_runs_stepped():
    """e46 (80 experts, EP 1, two H200) was judged "does not fit" and ran out of memory. Each of the three measured
    changes `estimate` prints, run as printed, fitted and ran within the model's error. EP 2 stepped fastest. The
    third was offloading 0.15 (e49, torchrun's one OpenMP thread a rank: 2.35 s a step); once a MoE run's slack
    credits expandable segments it is 0.05 with them and the host's cores as threads (e81: 0.95 s), which stepped
    4 % ahead of PP 2 (0.99 s, e51), listed before it: a tie within the iterations' spread (0.84-1.07 s), as
    n74/n75 were for a dense run (docs/estimate.md). Transformer Engine comes last, not measured."""
    failed = CALIBRATION / "out-of-memory" / "e46-moe80-ep1-h200.log.gz"
    with gzip.open(failed, "rt") as log:
        assert "torch.OutOfMemoryError: CUDA out of memory" in log.read()
    report = estimate_run([str(failed)], gpu="H200")
    assert report.verdict.status == "does not fit"
    ran = [
        ("e45-moe80-ep2-advised-h200", ("model.expert_model_parallel_size=2",), "--expert-model-parallel-size 2"),
        (
            "e51-moe80-ep1-pp2-advised-h200",
            ("model.pipeline_model_parallel_size=2",),
            "--pipeline-model-parallel-size 2",
        ),
        ("e81-moe80-ep1-offload005-expandable-advised-h200", None, "--optimizer-offload-fraction 0.05 --manual-gc"),
    ]
    *measured, unmeasured = report.suggestions
    assert len(measured) == len(ran) and "transformer_engine" in " ".join(unmeasured.overrides)
    for suggestion, (run, overrides, flags) in zip(measured, ran):
        assert suggestion.fits and flags in LAUNCH[run]
        assert overrides is None or suggestion.overrides == overrides
        peak = max(float(m) for m in MAX_ALLOCATED.findall(_log(run))) * 2**20
        assert peak <= suggestion.peak_allocated_bytes * (1 + MODEL_UNDERESTIMATE)
    offloading = measured[2].overrides
    assert "optimizer.optimizer_offload_fraction=0.05" in offloading and EXPANDABLE_SEGMENTS in offloading
    assert LAUNCH["e81-moe80-ep1-offload005-expandable-advised-h200"].startswith(
        "OMP_NUM_THREADS=16 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
    )
    ep2, pp2, offload = (step_ms(run) for run, _, _ in ran)
    assert ep2 < offload < pp2 and pp2 / offload < 1.05
    assert step_ms("e49-moe80-ep1-offload015-advised-h200") > 2 * pp2


def test_the_parameter_bound_moe_offload_curve_is_what_its_runs_stepped():
    measured = [(0.15, ratio("e55-moe40-offload015-h200", BASE)), (0.5, ratio("e58-moe40-offload050-h200", BASE))]
    assert [(f, round(r, 2)) for f, r in measured] == list(PARAMETER_BOUND_MOE[1:])
    # eight times the tokens a step for the same parameters: offloading's share of the step barely moves
    assert ratio("e57-moe40-mbs8-offload015-h200", BASE_MBS8) == pytest.approx(PARAMETER_BOUND_MOE[1][1], abs=0.2)


def test_a_moe_run_is_told_the_moe_offloading_costs_and_ranked_by_the_gentler_one():
    assert "~1.5x (Qwen3-30B-A3B" in expected_slowdown(0.15, moe=True)
    assert "~2.8x (a 5.6B-parameter MoE" in expected_slowdown(0.15, moe=True)
    assert measured_slowdown(0.15) == pytest.approx(1.54)  # the guide's curve ranks dense and MoE runs
    beyond = expected_slowdown(0.75, moe=True)
    assert "over ~9.6x" in beyond and "measured to 0.5" in beyond


def test_expert_parallel_on_one_node_is_ranked_no_slower_with_the_step_times_it_measured():
    ratios = [
        ratio("e53-moe40-ep2-h200", BASE),  # 1 -> 2, two GPUs, 1,024 tokens a GPU a step: 0.60
        ratio("e59-moe40-ep2-mbs8-h200", BASE_MBS8),  # the same at 8,192: 0.87
        ratio("e65-moe40-ep2-4gpu", "e64-moe40-ep1-4gpu"),  # 1 -> 2 on four GPUs: 0.85
        ratio("e66-moe40-ep4-4gpu", "e65-moe40-ep2-4gpu"),  # 2 -> 4 on four GPUs: 0.65
    ]
    shape = estimate_run([str(CALIBRATION / "e53-moe40-ep2-h200.log.gz")]).estimate.shape
    cost = _expert_cost(Change("", (), shape))
    assert f"{min(ratios):.2f}x-{max(ratios):.2f}x" in cost.text and max(ratios) < 1
    assert "2 -> 4" in cost.text
    assert cost.rank == 0.0
    far = _expert_cost(Change("", (), shape.with_changes(expert_model_parallel_size=16)))
    assert "leaves the node" in far.text and far.rank > 33


def test_pipeline_doubling_costs_on_the_moe_what_the_guide_says_it_costs():
    assert round(ratio("e54-moe40-pp2-h200", BASE), 2) == 1.07


def _cost_of(name: str):
    return next(cost for propose, cost in CHANGES if propose.__name__ == name)


def test_the_dense_changes_cost_what_their_runs_stepped():
    """One H100 (n16-n25) and one H200 (n30-n35), each run alone, megatron-core 0.19.0 with the local implementation:
    the costs the advice quotes and ranks by are these runs' step times."""
    # Selective recompute recomputes the materialised attention scores: more the longer the sequence per hidden.
    pairs = [
        (2048 / 4096, "n24-gpt2b-h4096-selective", "n23-gpt2b-h4096-base"),
        (2048 / 2048, "n17-gpt1b-selective", "n16-gpt1b-base"),
        (4096 / 2048, "n22-gpt1b-s4096-selective", "n21-gpt1b-s4096-base"),
    ]
    assert [(x, round(ratio(run, base), 2)) for x, run, base in pairs] == list(SELECTIVE_RECOMPUTE_LOCAL)
    assert round(ratio("n32-gpt3b-sel-h200", "n30-gpt3b-mbs2-h200"), 2) == 1.12  # the 3.35B GPT on an H200
    # Half the micro-batch, the same global batch: 1.04x-1.06x, on both GPUs, with or without offloading.
    smaller = [
        ratio("n19-gpt1b-mbs2", "n16-gpt1b-base"),
        ratio("n25-gpt2b-h4096-mbs1", "n23-gpt2b-h4096-base"),
        ratio("n31-gpt3b-mbs1-h200", "n30-gpt3b-mbs2-h200"),
        ratio("n34-gpt3b-f040-mbs1-gc-h200", "n33-gpt3b-f040-mbs2-gc-h200"),
    ]
    assert f"{min(smaller):.2f}x-{max(smaller):.2f}x" in HALVED_MICRO_BATCH.text
    assert round(ratio("n18-gpt1b-full", "n16-gpt1b-base"), 2) == 1.31 == 1 + _cost_of("_full_recompute").rank / 100
    assert round(ratio("n20-gpt1b-gc", "n16-gpt1b-base"), 2) == 1.00 == 1 + _cost_of("manual_gc_change").rank / 100
    # The ranks: a smaller micro-batch before selective recompute, which comes before full recompute.
    shape = estimate_run([str(CALIBRATION / "n16-gpt1b-base.log.gz")]).estimate.shape
    selective = _selective_cost(Change("", (), shape))
    assert selective.rank == pytest.approx((selective_recompute_slowdown(2048, 2048) - 1) * 100)
    assert HALVED_MICRO_BATCH.rank < selective.rank < _cost_of("_full_recompute").rank
    # Transformer Engine's fused attention keeps no scores to recompute: the guide's order, selective first.
    fused = _selective_cost(Change("", (), shape.with_changes(transformer_impl="transformer_engine")))
    assert "fused attention" in fused.text and fused.rank < HALVED_MICRO_BATCH.rank


def test_expandable_segments_cost_what_their_runs_stepped_and_come_first():
    """Fourteen iterations with and without PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True on one H100: 7,840 MiB
    score tensors (n94/n95) and the 0.87B GPT (n96/n97) stepped 1.00x, e10's 8-expert MoE (e79/e80) 1.01x. Ranked
    before every other change; the setting is offered only where it alone makes a run fit
    (tests/memory/test_score_tensor_fragmentation.py, tests/memory/test_moe_activations.py)."""
    pairs = [
        ("n95-gpt-s14k-h20-l2-expandable", "n94-gpt-s14k-h20-l2-base"),
        ("n97-gpt1b-expandable", "n96-gpt1b-base-again"),
        ("e80-moe8-top4-mbs12-expandable-advised", "e79-moe8-top4-mbs12-base"),
    ]
    ratios = []
    for with_it, without in pairs:
        assert "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" in LAUNCH[with_it]
        assert "PYTORCH_CUDA_ALLOC_CONF" not in LAUNCH[without]
        ratios.append(ratio(with_it, without))
    assert [round(r, 2) for r in ratios] == [1.00, 1.00, 1.01]
    cost = _cost_of("_expandable_segments")
    assert cost.text.startswith("measured 1.00x-1.01x step time")
    assert cost.source == "measured: n94/n95, n96/n97, e79/e80"
    assert 0 < cost.rank < min(c.rank for _, c in CHANGES if not callable(c) and c is not cost and c.rank > 0)


def test_a_micro_batch_cut_beyond_half_costs_what_its_runs_stepped_and_ranks_so():
    """Quoted 1.04x-1.06x for any cut (measured at half), a cut to a quarter stepped 1.23x (e10's MoE 12 -> 3) and
    1.28x (the 0.87B GPT 4 -> 1), to a twelfth 2.63x (the MoE 12 -> 1), each against its base again on the same H100
    (e83, n100). The cost now follows the cut, so a deep cut ranks behind selective and full recompute."""
    moe, dense = "e83-moe8-top4-mbs12-base-again", "n100-gpt1b-base-third"
    assert [round(ratio(run, moe), 2) for run in ("e84-moe8-top4-mbs3", "e85-moe8-top4-mbs1")] == [1.23, 2.63]
    assert round(ratio("n101-gpt1b-mbs1", dense), 2) == 1.28
    assert round(ratio(moe, "e79-moe8-top4-mbs12-base"), 2) == 1.01  # the same base on another H100, hours apart
    assert [p for p in MICRO_BATCH_CUT if p[0] > 2] == [(4.0, (1.23 + 1.28) / 2), (12.0, 2.63)]

    shape = estimate_run([str(CALIBRATION / "n16-gpt1b-base.log.gz")]).estimate.shape

    def cost(before: int, after: int) -> Cost:
        return _micro_batch_cost(Change("", (), shape, micro_batches=before / after))

    assert cost(94, 47) == HALVED_MICRO_BATCH and cost(87, 29).text.startswith("~1.15x step time: 3 times")
    assert cost(12, 3).rank == pytest.approx(25.5) and cost(56, 7).text.startswith("~1.94x step time: 8 times")
    assert cost(94, 2).text.startswith("more than 2.63x step time: 47 times the micro-batches")
    assert cost(4, 1).rank > _selective_cost(Change("", (), shape)).rank
    assert cost(12, 1).rank > _cost_of("_full_recompute").rank


def test_a_cut_to_less_than_half_costs_what_its_runs_stepped_and_ranks_ahead_of_half():
    """Since the advice cuts to the largest micro-batch that fits, it often cuts to less than half (e37's and e10's
    12 -> 8, n113's 5 -> 4). Quoted "at most half's 1.04x-1.06x" before these ran (planned, one H100, fourteen
    iterations, each base again on the same machine): the 0.87B GPT 4 -> 3 at global batch 24 stepped 1.019x
    (n115/n116), the MoE 12 -> 8 1.024x (e92/e93)."""
    measured = [
        ratio("n116-gpt1b-gbs24-mbs3", "n115-gpt1b-gbs24-mbs4"),
        ratio("e93-moe8-top4-mbs8", "e92-moe8-top4-mbs12-base-third"),
    ]
    assert [round(r, 3) for r in measured] == [1.019, 1.024] and max(measured) < 1.04
    assert [p for p in MICRO_BATCH_CUT if 1 < p[0] < 2] == [(4 / 3, 1.019), (1.5, 1.024)]
    shape = estimate_run([str(CALIBRATION / "n16-gpt1b-base.log.gz")]).estimate.shape
    three_halves = _micro_batch_cost(Change("", (), shape, micro_batches=12 / 8))
    assert three_halves.text.startswith("~1.02x step time: 1.5 times the micro-batches (measured 1.02x at 4/3 and 3/2")
    assert three_halves.rank < HALVED_MICRO_BATCH.rank


def test_held_out_the_order_a_deep_cut_now_takes_held_on_the_gpu():
    """e34 (e10's MoE at micro-batch 11, one H100) at a 60 GiB target: selective recompute first (~1.19x), full
    recompute (1.31x), micro-batch 11 -> 2 (~1.51x, between the quarter and the twelfth measured), planned before
    the runs; until this change the cut was quoted 1.04x-1.06x and came first. Each run as printed against the base
    (e86), fourteen iterations: 1.16x, 1.31x, 1.66x (the cut 10 % over its quote): the order held."""
    report = estimate_run([str(CALIBRATION / "e34-moe8-top4-mbs11.log.gz")], target="60GiB")
    listed = [s.overrides for s in report.suggestions]
    order = [
        ("model.recompute_granularity=selective", "model.recompute_modules=[core_attn]"),
        ("model.recompute_granularity=full", "model.recompute_method=uniform", "model.recompute_num_layers=1"),
        ("train.micro_batch_size=2",),
    ]
    assert [listed.index(overrides) for overrides in order] == sorted(listed.index(o) for o in order)
    base = "e86-moe8-top4-mbs11-base"
    runs = ["e87-moe8-top4-mbs11-selective", "e88-moe8-top4-mbs11-full", "e89-moe8-top4-mbs2"]
    assert [round(ratio(run, base), 2) for run in runs] == [1.16, 1.31, 1.66]
    quoted = next(s.cost for s in report.suggestions if s.overrides == order[2])
    assert quoted.startswith("~1.51x step time: 5.5 times the micro-batches")


def test_held_out_on_a_wider_model_a_quarter_cut_cost_less_than_quoted():
    """n23's 2B GPT (hidden 4096) at micro-batch 4 -> 1, planned before it ran, quoted ~1.25x from the hidden-2048
    runs: it stepped 1.10x (n102/n103). The curve over-quotes a wide model's cut (each micro-batch keeps more work
    for the GPU): the cost of a cut depends on the model, which the curve does not model. Over-quoting can list a
    cheap cut behind a dearer change; it does not put a dear cut first, as the 1.04x-1.06x quote did (e86-e89)."""
    measured = ratio("n103-gpt2b-h4096-mbs1-again", "n102-gpt2b-h4096-mbs4")
    assert round(measured, 2) == 1.10 < micro_batch_cut_slowdown(4) - 0.1
    assert round(ratio("n25-gpt2b-h4096-mbs1", "n23-gpt2b-h4096-base"), 2) == 1.06  # its half, hours before


def test_with_the_optimizer_offloaded_selective_recompute_steps_ahead_of_a_smaller_micro_batch():
    """The CPU's step sets an offloading run's pace: on the 3.35B GPT at fraction 0.4 selective recompute cost 1.01x
    on an H200 (n35/n33) and stepped ahead of micro-batch 1 there (n34) and on an H100 (n27 against n26, the first
    advice after the dense costs were measured, before this rule): ranked first for such a run."""
    assert round(ratio("n35-gpt3b-f040-sel-gc-h200", "n33-gpt3b-f040-mbs2-gc-h200"), 2) == 1.01
    assert step_ms("n35-gpt3b-f040-sel-gc-h200") < step_ms("n34-gpt3b-f040-mbs1-gc-h200")
    assert step_ms("n27-gpt3b-f040-sel-gc") < step_ms("n26-gpt3b-f040-mbs1-gc-advised")
    shape = estimate_run([str(CALIBRATION / "n27-gpt3b-f040-sel-gc.log.gz")]).estimate.shape
    assert _selective_cost(Change("", (), shape)).rank < HALVED_MICRO_BATCH.rank


def test_where_a_smaller_micro_batch_now_leads_it_stepped_faster_than_the_selective_recompute_it_replaced():
    """Each OOM whose advice moved from selective recompute to half the micro-batch, both run as printed: e19 (two
    H200, e67 against e68) and oom-capacity-recorded (one H100, n28 against n29) for twelve iterations; e11 and e23
    (three iterations, their last: e13 against e12, e29 against e28)."""
    assert step_ms("e67-moe8-ep2-top2-mbs47-advised-h200") < step_ms("e68-moe8-ep2-top2-mbs94-selective-h200")
    assert step_ms("n28-h4096-s4096-mbs1-advised") < step_ms("n29-h4096-s4096-selective")
    assert third_step_ms("e13-moe8-top4-mbs7") < third_step_ms("e12-moe8-top4-mbs14-selective")
    assert third_step_ms("e29-moe8-ep4-top2-mbs46-h200") < third_step_ms("e28-moe8-ep4-top2-mbs92-selective-h200")


def test_a_dense_run_offloading_few_tokens_a_parameter_is_ranked_by_the_guides_curve():
    """The 0.47B GPT's curve (1.04x at 0.05) was measured at 32,768 tokens a step; g1 (3.35B, 4,096 tokens) at
    fraction 0.05 stepped 1.12x of selective recompute, each with gc, for twelve iterations on one H100 (n41/n40;
    1.25x in the last of g1-f005-gc's and g1-f000-sel-gc's three). Ranked by the guide's curve, selective
    recompute (1.13x at this sequence/hidden) comes first, as on the GPU."""
    assert ratio("n41-gpt3b-g1-f005-gc", "n40-gpt3b-g1-sel-gc") > 1.1
    sweep = CALIBRATION.parent / "offload-sweep"
    assert third_step_ms("g1-f005-gc", sweep) / third_step_ms("g1-f000-sel-gc", sweep) > 1.2
    assert measured_slowdown(0.05) > selective_recompute_slowdown(2048, 4096) > 1.1
    # and by the curve scaled to g1's 4,096 tokens a step (1.34x), as its advice now ranks it
    assert measured_slowdown(0.05, 4096) > measured_slowdown(0.05) > selective_recompute_slowdown(2048, 4096)


def test_a_dense_pipeline_doubling_costs_its_bubble():
    """The 0.87B GPT over two H200, global batch 16 at micro-batch 4: PP 2 (four micro-batches, 1F1B's bubble 1/4)
    stepped 1.26x of DP 2 (n37/n36); the advice quotes and ranks that bubble, not the guide's 6 % (Llama3 70B, many
    micro-batches)."""
    measured = ratio("n37-gpt1b-pp2-h200", "n36-gpt1b-dp2-h200")
    assert measured == pytest.approx(1 + 1 / 4, abs=0.02)
    # at eight micro-batches (global batch 32) 1.15x against the bubble's 1.125x: the stages' sends on top
    assert ratio("n43-gpt1b-pp2-gbs32-h200", "n42-gpt1b-dp2-gbs32-h200") == pytest.approx(1 + 1 / 8, abs=0.035)
    base = estimate_run([str(CALIBRATION / "n36-gpt1b-dp2-h200.log.gz")]).estimate.shape
    doubled = base.with_changes(pipeline_parallel=2, data_parallel=1)
    cost = _cost_of("_double_pipeline")(Change("", (), doubled))
    assert cost.rank == pytest.approx(25.0) and "1/4" in cost.text
    many = _cost_of("_double_pipeline")(Change("", (), doubled.with_changes(global_batch_size=512)))
    assert many.rank == 6.0  # a bubble of 1/128: the guide's figure


def _tp_pp_costs(run: str, tensor: int) -> tuple[float, float]:
    """The ranks the advice gives doubling PP and doubling TP from `run`."""
    base = estimate_run([str(CALIBRATION / f"{run}.log.gz")]).estimate.shape
    halved = base.data_parallel // 2
    pipeline = _cost_of("_double_pipeline")(
        Change("", (), base.with_changes(pipeline_parallel=2, data_parallel=halved))
    )
    tensor_cost = _cost_of("_double_tensor")(
        Change("", (), base.with_changes(tensor_parallel=tensor, data_parallel=halved))
    )
    return pipeline.rank, tensor_cost.rank


@pytest.mark.parametrize(
    ("base", "pipeline", "tensor", "degree"),
    [
        ("n36-gpt1b-dp2-h200", "n37-gpt1b-pp2-h200", "n38-gpt1b-tp2-h200", 2),
        ("n44-gpt3b-dp2-h200", "n45-gpt3b-pp2-h200", "n46-gpt3b-tp2-h200", 2),
    ],
)
def test_tp_1_to_2_costs_what_it_stepped_and_comes_before_pp_at_four_micro_batches(base, pipeline, tensor, degree):
    """Where DP 2 halves, four micro-batches: TP 2 stepped 1.16x (hidden 2048) and 1.03x (hidden 4096) against PP
    2's 1.26x and 1.17x, on two H200. The advice ranked TP by the guide's -28 % (read as 28 % more step time; the
    guide's TFLOP/s fall is 1.40x in step time) after PP's bubble of 1/4: now by these runs, TP first as they
    stepped."""
    measured_tp, measured_pp = ratio(tensor, base), ratio(pipeline, base)
    pp_rank, tp_rank = _tp_pp_costs(base, degree)
    assert tp_rank == pytest.approx((measured_tp - 1) * 100, abs=1.0)
    assert (tp_rank < pp_rank) == (measured_tp < measured_pp) is True


def test_tp_2_to_4_costs_what_it_stepped_and_the_bubble_stays_an_upper_figure():
    """Four H200, the 3.35B GPT at TP 2 x DP 2 (n47): TP 4 stepped 1.21x (n48), TP 2 x PP 2 1.18x (n49). TP 4 is
    ranked by its run; PP by its bubble of 1/4 (1.25x), which the 3.35B GPT's PP runs came in under (1.17x n44/n45,
    1.18x here: DP's gradient traffic, which DP 1 drops, is a larger share of its step): a 3 % tie the advice
    orders the other way, said in its text ("measured 1.17x-1.26x at 1/4")."""
    pp_rank, tp_rank = _tp_pp_costs("n47-gpt3b-tp2-dp2-h200", 4)
    assert tp_rank == pytest.approx((ratio("n48-gpt3b-tp4-h200", "n47-gpt3b-tp2-dp2-h200") - 1) * 100, abs=1.0)
    measured_pp = ratio("n49-gpt3b-tp2-pp2-h200", "n47-gpt3b-tp2-dp2-h200")
    assert 1.15 < measured_pp < 1 + pp_rank / 100 == 1.25
    assert abs(measured_pp - (1 + tp_rank / 100)) < 0.05


def test_tp_8_and_a_moe_keep_the_guides_figure_in_step_time():
    """The guide's TP 4 -> 8 on Llama3 70B: 508.7 against 709.93 TFLOP/s golden (-28.4 %), i.e. 1.40x step time,
    the unit every other rank is in. A MoE's TP (it needs sequence parallelism, not measured here) keeps it too."""
    base = estimate_run([str(CALIBRATION / "n47-gpt3b-tp2-dp2-h200.log.gz")]).estimate.shape
    to_eight = _cost_of("_double_tensor")(Change("", (), base.with_changes(tensor_parallel=8)))
    moe = _cost_of("_double_tensor")(Change("", (), base.with_changes(tensor_parallel=2, num_experts=8)))
    for cost in (to_eight, moe):
        assert cost.rank == pytest.approx(100 * (709.93 / 508.7 - 1), abs=1.0)
        assert "1.40x step time" in cost.text


def test_offloadings_cost_names_the_step_time_before_the_fraction_it_was_read_at():
    """The cost read "~1.4x (...) to ~2.5x (...) at fraction 0.45 step time" (estimate on n23 at a 40 GiB target,
    diagnose on offload-sweep l1-f030-gc): "step time" belongs to the ratios, the fraction ends the sentence."""
    shape = estimate_run([str(CALIBRATION / "n23-gpt2b-h4096-base.log.gz")]).estimate.shape
    for fraction, moe_experts in ((0.45, 0), (0.05, 40)):
        text = _cost_of("_optimizer_offloading")(
            Change("", (), shape.with_changes(num_experts=moe_experts), fraction)
        ).text
        assert text.startswith("step time ~") and text.endswith(f"at fraction {fraction:g}")


def test_a_run_already_offloading_is_told_what_the_higher_fraction_adds_to_its_own_step():
    """l1-f030-gc (a Llama 5B offloading 0.3 on one H100, 4,096 tokens a step) ran out of memory; the fraction that
    fits is 0.45. The run pays 0.3's cost already: what the change adds is the ratio of the two on the curve scaled
    to its tokens, and it ranks by that. The sweep's own runs (last of three iterations): 0.4 -> 0.5 took 1.13x
    (l1-f040, l1-f050) and 0.4 -> 0.75 2.05x (l1-f075), where the scaled curve gives 1.18x and 1.89x (the guide's
    1.13x and 1.45x)."""
    sweep = CALIBRATION.parent / "offload-sweep"
    (finding,) = [f for f in diagnose([str(sweep / "l1-f030-gc.log.gz")]).findings if f.facts]
    cheapest = finding.facts["cheapest_change_that_fits"]
    added = measured_slowdown(0.45, 4096) / measured_slowdown(0.3, 4096)
    assert cheapest.startswith("optimizer offloading at fraction 0.45")
    assert f"~{added:.2f}x the run's step time at 0.3 now (the scaled curve)" in cheapest
    for higher in ("l1-f050", "l1-f075"):
        measured = third_step_ms(higher, sweep) / third_step_ms("l1-f040", sweep)
        fraction = float(higher[-3:]) / 100
        assert measured == pytest.approx(measured_slowdown(fraction, 4096) / measured_slowdown(0.4, 4096), rel=0.1)


def test_a_dense_runs_offloading_cost_scales_with_its_tokens_a_step():
    """The 0.47B GPT's curve (32,768 tokens a step) quoted ~1.3x to ~2.4x at 0.4 whatever the run; the 3.35B GPT at
    4,096 tokens stepped 3.8x (g1-f040 against g1-none, last of three iterations, one H100) and at 8,192 2.54x (n33
    against n30, twelve iterations, one H200). Scaled by 32,768 / the run's tokens a step, the curve comes within
    16 % of each of g1's fractions to 0.5 and of n33, where the guide's curve was 27-48 % low; and of a run with
    four times the curve's tokens, where the guide's was 2.5x too high."""
    sweep = CALIBRATION.parent / "offload-sweep"
    base = third_step_ms("g1-none", sweep)
    for run, fraction in (("g1-f020", 0.2), ("g1-f030", 0.3), ("g1-f040", 0.4), ("g1-f050", 0.5)):
        measured = third_step_ms(run, sweep) / base
        assert measured_slowdown(fraction, 4096) == pytest.approx(measured, rel=0.16)
        assert measured_slowdown(fraction) < 0.75 * measured  # the guide's curve, which every dense run was quoted
    measured = ratio("n33-gpt3b-f040-mbs2-gc-h200", "n30-gpt3b-mbs2-h200")
    assert measured_slowdown(0.4, 8192) == pytest.approx(measured, rel=0.1)
    # more tokens a step than the curve's own: t21 (PP 2, 131,072 tokens; against its base, last of three iterations)
    calibration = {run: third_step_ms(f"t21-llama3b-pp2-vpp3-mbs4-{run}") for run in (0, 3, 4)}
    for run, fraction in ((3, 0.65), (4, 0.8)):
        measured = calibration[run] / calibration[0]
        assert measured_slowdown(fraction, 131072) == pytest.approx(measured, rel=0.1)
        assert measured_slowdown(fraction) > 2.5 * measured  # the guide's curve
    # under at DP 2 (t22, 8,192 tokens a rank), as the text says: by up to a fifth
    t22 = {run: third_step_ms(f"t22-llama5b-dp2-mbs2-{run}") for run in (0, 2, 4)}
    for run, fraction in ((2, 0.05), (4, 0.15)):
        measured = t22[run] / t22[0]
        assert 0.8 * measured < measured_slowdown(fraction, 8192) < measured


def test_t22s_first_change_moved_to_tp_2_which_ran_under_an_h100s_limit_as_fast_as_the_micro_batch_it_replaced():
    """t22 (a 5B Llama at DP 2, hidden 4096: out of memory under an H100's limit, fixtures/multi-gpu-advice) was told
    micro-batch 2 -> 1 first; with TP ranked by its measured cost (~1.03x at hidden 4096) it is told TP 1 -> 2. Both
    ran as printed for twelve iterations under the H100 cap, on two H200: TP 2 stepped 1.036x of the uncapped base
    (n50/n52), micro-batch 1 1.041x (n51/n52): a tie the advice orders as the GPU did."""
    (finding,) = [
        f
        for f in diagnose([str(CALIBRATION.parent / "multi-gpu-advice" / "t22-llama5b-dp2-mbs2-0-cap.log.gz")]).findings
        if f.facts
    ]
    assert finding.facts["cheapest_change_that_fits"].startswith("tensor parallel 1 -> 2 (data parallel 2 -> 1)")
    tp, mbs = "n50-llama5b-t22-tp2-advised-cap", "n51-llama5b-t22-mbs1-cap"
    assert LAUNCH[tp].startswith("ODR_CAP_MIB=77178 ") and "--tensor-model-parallel-size 2" in LAUNCH[tp]
    assert "OutOfMemoryError" not in _log(tp)
    base = "n52-llama5b-t22-base-h200"
    assert ratio(tp, base) == pytest.approx(tensor_parallel_slowdown(2, 4096), abs=0.01)
    assert step_ms(tp) <= step_ms(mbs) and ratio(mbs, base) == pytest.approx(1.04, abs=0.01)


def test_at_the_curves_own_tokens_offloading_005_costs_what_the_scaled_curve_says_and_ties_a_smaller_micro_batch():
    """n16 (0.87B GPT, 32,768 tokens a step, one H100) at a 60 GiB target: the scaled curve ranks fraction 0.05 with
    gc (~1.04x) before micro-batch 4 -> 2. As printed it stepped 1.045x (n53/n16), micro-batch 2 1.041x (n19/n16):
    the figure held, and the two are a tie (0.4 %) the advice orders the other way."""
    advised = "n53-gpt1b-f005-gc-advised"
    assert "--optimizer-offload-fraction 0.05" in LAUNCH[advised] and "--manual-gc" in LAUNCH[advised]
    shape = estimate_run([str(CALIBRATION / "n16-gpt1b-base.log.gz")]).estimate.shape
    assert shape.tokens_per_rank == 32768
    assert ratio(advised, "n16-gpt1b-base") == pytest.approx(measured_slowdown(0.05, 32768), abs=0.01)
    assert abs(step_ms(advised) / step_ms("n19-gpt1b-mbs2") - 1) < 0.01


def test_t21s_oom_is_told_the_higher_fraction_first_which_ran_and_added_what_the_scaled_curve_says():
    """t21 (a 3B Llama at PP 2 x VPP 3, 131,072 tokens a step, offloading 0.65: out of memory under an H100's limit)
    was told micro-batch 4 -> 2 first; by the scaled curve fraction 0.8 adds ~1.04x to its own step. 0.8 ran under
    the cap (t21-4-cap, fixtures/multi-gpu-advice); uncapped on two H200 0.8 stepped 1.036x of 0.65 (t21-4/t21-3)."""
    advice = CALIBRATION.parent / "multi-gpu-advice"
    (finding,) = [f for f in diagnose([str(advice / "t21-llama3b-pp2-vpp3-mbs4-3-cap.log.gz")]).findings if f.facts]
    cheapest = finding.facts["cheapest_change_that_fits"]
    added = measured_slowdown(0.8, 131072) / measured_slowdown(0.65, 131072)
    assert cheapest.startswith("optimizer offloading at fraction 0.8") and f"~{added:.2f}x the run's step" in cheapest
    measured = third_step_ms("t21-llama3b-pp2-vpp3-mbs4-4") / third_step_ms("t21-llama3b-pp2-vpp3-mbs4-3")
    assert measured == pytest.approx(added, abs=0.01)
    assert third_step_ms("t21-llama3b-pp2-vpp3-mbs4-4-cap", advice) > 0  # ran under the cap


T22_BASE = "n52-llama5b-t22-base-h200"
# (fraction, tokens a rank, the optimizer state's shards (DP), no offloading, torchrun's one OpenMP thread a rank,
# 16 threads a rank: the host's cores over its GPUs, as the advice's export gives them: 32 over 2, 64 over 4)
THREADS = (
    (0.15, 8192, 2, T22_BASE, "n54-llama5b-t22-f015-gc-h200", "n55-llama5b-t22-f015-gc-omp16-h200"),
    (0.5, 8192, 2, T22_BASE, "n56-llama5b-t22-f050-gc-h200", "n57-llama5b-t22-f050-gc-omp16-h200"),
    (0.5, 4096, 4, "n58-gpt3b-dp4-base-h200", "n59-gpt3b-dp4-f050-gc-h200", "n60-gpt3b-dp4-f050-gc-omp16-h200"),
)


@pytest.mark.parametrize(("fraction", "tokens", "shards", "base", "one_thread", "sixteen"), THREADS)
def test_at_dp_2_and_4_offloading_costs_what_the_cpu_threads_a_rank_allow(
    fraction, tokens, shards, base, one_thread, sixteen
):
    """Offloading under torchrun's OMP_NUM_THREADS=1 (its banner in the log) against the same run with 16 threads a
    rank, twelve iterations each: t22 at DP 2 1.89x -> 1.34x at 0.15, 3.73x -> 2.13x at 0.5; t18's 3.35B GPT at DP 4
    4.39x -> 2.81x at 0.5. The quoted cost, with the share of it that stays when the state is sharded fitted on the
    three runs with the threads set, is within 3 % of them; torchrun's one thread took 41-74 % more."""
    slow, fast = ratio(one_thread, base), ratio(sixteen, base)
    assert slow > 1.35 * fast
    quoted = measured_slowdown(fraction, tokens, shards)
    assert quoted == pytest.approx(fast, rel=0.03)
    assert 1.40 * quoted < slow < 1.75 * quoted
    assert measured_slowdown(fraction, tokens) > 1.12 * fast  # unsharded, the curve was over by 12-55 %
    assert "Setting OMP_NUM_THREADS environment variable for each process to be 1" in _log(one_thread)
    assert "Setting OMP_NUM_THREADS" not in _log(sixteen) and "OMP_NUM_THREADS=16" in LAUNCH[sixteen]


# Held out of the shards' share (planned with it as committed, four H100 of a 64-core host, 16 threads a rank):
# (run, its base on the same machine, fraction, tokens a rank, DP)
SHARDED_HELD_OUT = (
    ("n62-gpt3b-dp2-f030-gc-omp16", "n61-gpt3b-dp2-base", 0.3, 8192, 2),
    ("n72-gpt3b-dp2-f030-gc-omp16-again", "n70-gpt3b-dp2-base-again", 0.3, 8192, 2),
    ("n64-llama5b-t22-dp4-f030-gc-omp16", "n63-llama5b-t22-dp4-base", 0.3, 4096, 4),
    ("n69-llama5b-t22-dp4-f030-gc-omp16-again", "n67-llama5b-t22-dp4-base-again", 0.3, 4096, 4),
    ("n66-gpt3b-dp4-f025-gc-omp16", "n65-gpt3b-dp4-base-again", 0.25, 4096, 4),
)


@pytest.mark.parametrize(("run", "base", "fraction", "tokens", "shards"), SHARDED_HELD_OUT)
def test_the_sharded_offloading_cost_holds_on_runs_it_was_not_fitted_on(run, base, fraction, tokens, shards):
    """1.60x, 1.53x, 1.82x, 1.77x, 1.89x stepped; quoted 1.69x, 1.69x, 2.05x, 2.05x, 1.87x: from 1 % under to 16 %
    over, where the curve without the shards was over by 25-71 %."""
    stepped = ratio(run, base)
    assert 0.98 * stepped < measured_slowdown(fraction, tokens, shards) < 1.17 * stepped
    assert measured_slowdown(fraction, tokens) > 1.25 * stepped
    assert "OMP_NUM_THREADS=16" in LAUNCH[run] and f"--nproc-per-node {shards}" in LAUNCH[run]


@pytest.mark.parametrize(
    ("one_thread", "sixteen", "base"),
    [
        ("n68-llama5b-t22-dp4-f030-gc", "n69-llama5b-t22-dp4-f030-gc-omp16-again", "n67-llama5b-t22-dp4-base-again"),
        ("n71-gpt3b-dp2-f030-gc", "n72-gpt3b-dp2-f030-gc-omp16-again", "n70-gpt3b-dp2-base-again"),
    ],
)
def test_the_threads_change_holds_on_an_h100_host(one_thread, sixteen, base):
    """On four H100 (64 cores; the advice's export gives 16), offloading 0.3: 2.26x -> 1.77x (t22 at DP 4) and
    2.01x -> 1.53x (the 3.35B GPT at DP 2): 22 % and 24 % off the step. The one-thread log gets the warning whose
    fix is the export; the other no finding."""
    from offloaddoctor.api import diagnose

    assert step_ms(sixteen) < 0.8 * step_ms(one_thread)
    assert ratio(one_thread, base) < 1.2 * measured_slowdown(
        0.3, 8192 if "dp2" in base else 4096, 2 if "dp2" in base else 4
    )
    [finding] = diagnose([str(CALIBRATION / f"{one_thread}.log.gz")]).findings
    assert finding.signature.id == "optimizer-offload-one-omp-thread"
    assert not diagnose([str(CALIBRATION / f"{sixteen}.log.gz")]).findings


def test_offloading_moved_ahead_of_full_recompute_stepped_within_a_tie_of_it_not_ahead():
    """The sharded quote put offloading 0.1 (~1.23x) ahead of full recompute (1.31x) in n70's estimate at 60 GiB. Both
    ran as printed on two H200, against the base again: 1.30x and 1.26x. Offloading was 6 % over its quote's low side
    and full recompute 4 % under its own: the order did not hold, by 3 % (recorded as measured, not tuned away)."""
    report = estimate_run([str(CALIBRATION / "n70-gpt3b-dp2-base-again.log.gz")], target="60GiB")
    changes = [c.change for c in report.suggestions]
    offloading = next(i for i, c in enumerate(changes) if c.startswith("optimizer offloading at fraction 0.1"))
    assert offloading < changes.index("full recompute (uniform, one layer per chunk)")
    base = "n73-gpt3b-dp2-base-third-h200"
    offloaded, recomputed = (
        ratio("n74-gpt3b-dp2-f010-gc-omp16-advised-h200", base),
        ratio("n75-gpt3b-dp2-full-recompute-advised-h200", base),
    )
    assert recomputed < offloaded < 1.05 * recomputed
    assert measured_slowdown(0.1, 8192, 2) == pytest.approx(offloaded, rel=0.07)


def test_the_one_thread_banner_with_offloading_is_a_warning_whose_fix_ran_as_printed():
    """n54's log gets the warning, with the export that n55 ran (32 cores over two GPUs: 16); n55 has no banner,
    and n52, the same banner without offloading, no finding."""
    from offloaddoctor.api import diagnose

    [finding] = diagnose([str(CALIBRATION / "n54-llama5b-t22-f015-gc-h200.log.gz")]).findings
    assert (finding.signature.id, finding.config.verdict) == ("optimizer-offload-one-omp-thread", "confirmed")
    assert finding.overrides == ["export OMP_NUM_THREADS=$(( $(nproc) / $(nvidia-smi -L | wc -l) ))"]
    for quiet in ("n55-llama5b-t22-f015-gc-omp16-h200", T22_BASE):
        assert not diagnose([str(CALIBRATION / f"{quiet}.log.gz")]).findings
    # where the offloading is also slow enough to be a finding of its own, the free change leads (n59 -> n60: -36 %)
    report = diagnose([str(CALIBRATION / "n59-gpt3b-dp4-f050-gc-h200.log.gz")])
    assert [f.signature.id for f in report.findings] == [
        "optimizer-offload-one-omp-thread",
        "optimizer-offload-slowdown",
    ]


def test_offloading_advised_to_a_multi_gpu_run_sets_the_threads_unless_the_run_did():
    two_gpus = estimate_run([str(CALIBRATION / f"{T22_BASE}.log.gz")], target="60GiB")
    [offloading] = [c for c in two_gpus.suggestions if c.overrides[0] == "optimizer.optimizer_cpu_offload=True"]
    assert offloading.overrides[-1] == "env.OMP_NUM_THREADS=$(( $(nproc) / $(nvidia-smi -L | wc -l) ))"
    told = estimate_run([str(CALIBRATION / f"{T22_BASE}.log.gz")], target="60GiB", overrides=["env.OMP_NUM_THREADS=16"])
    assert told.suggestions and all("env.OMP_NUM_THREADS" not in " ".join(c.overrides) for c in told.suggestions)
    one_gpu = estimate_run([str(CALIBRATION / "n16-gpt1b-base.log.gz")], target="20GiB")
    assert one_gpu.suggestions and all("env.OMP_NUM_THREADS" not in " ".join(c.overrides) for c in one_gpu.suggestions)
