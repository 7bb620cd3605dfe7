"""What each change the advice weighs cost on a real GPU, held to the recorded runs that measured it
(fixtures/memory-calibration, two H200, megatron-core 0.19.0; planned in benchmarks/moe_plan.json before each run)."""

from __future__ import annotations

import gzip
import re
import statistics
from pathlib import Path

import pytest

from offloaddoctor.advice.changes import Change, _expert_cost
from offloaddoctor.advice.slowdown import PARAMETER_BOUND_MOE, expected_slowdown, measured_slowdown
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
    """Median iteration time once warm: iterations 4-12 of the run's twelve."""
    times = [float(t) for t in STEP_MS.findall(_log(run))]
    assert len(times) == 12
    return statistics.median(times[3:])


def ratio(run: str, baseline: str) -> float:
    return step_ms(run) / step_ms(baseline)


BASE, BASE_MBS8 = "e52-moe40-ep1-base-h200", "e56-moe40-ep1-mbs8-base-h200"


def test_estimate_orders_the_changes_for_the_moe_that_ran_out_of_memory_as_their_runs_stepped():
    """e46 (80 experts, EP 1, two H200) was judged "does not fit" and ran out of memory. Each of the three changes
    `estimate` prints, run as printed, fitted and ran within the model's error; their step times come in the order
    the advice lists them (the order before the measured costs put offloading second, EP last)."""
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
        ("e49-moe80-ep1-offload015-advised-h200", None, "--optimizer-offload-fraction 0.15 --manual-gc"),
    ]
    assert len(report.suggestions) == len(ran)
    for suggestion, (run, overrides, flags) in zip(report.suggestions, ran):
        assert suggestion.fits and flags in LAUNCH[run]
        assert overrides is None or suggestion.overrides == overrides
        peak = max(float(m) for m in MAX_ALLOCATED.findall(_log(run))) * 2**20
        assert peak <= suggestion.peak_allocated_bytes * (1 + MODEL_UNDERESTIMATE)
    assert "optimizer.optimizer_offload_fraction=0.15" in report.suggestions[2].overrides
    times = [step_ms(run) for run, _, _ in ran]
    assert times == sorted(times)  # 0.48 s, 0.99 s, 2.35 s


def test_the_parameter_bound_moe_offload_curve_is_what_its_runs_stepped():
    measured = [(0.15, ratio("e55-moe40-offload015-h200", BASE)), (0.5, ratio("e58-moe40-offload050-h200", BASE))]
    assert [(f, round(r, 2)) for f, r in measured] == list(PARAMETER_BOUND_MOE[1:])
    # eight times the tokens a step for the same parameters: offloading's share of the step barely moves
    assert ratio("e57-moe40-mbs8-offload015-h200", BASE_MBS8) == pytest.approx(PARAMETER_BOUND_MOE[1][1], abs=0.2)


def test_a_moe_run_is_told_the_moe_offloading_costs_and_ranked_by_the_gentler_one():
    assert "~1.5x (Qwen3-30B-A3B" in expected_slowdown(0.15, moe=True)
    assert "~2.8x (a 5.6B-parameter MoE" in expected_slowdown(0.15, moe=True)
    assert measured_slowdown(0.15, moe=True) == pytest.approx(1.54)
    assert measured_slowdown(0.15) == pytest.approx(1.126)  # dense: the 0.47B GPT's curve, unchanged
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
