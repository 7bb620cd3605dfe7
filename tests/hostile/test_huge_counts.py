"""A mistyped count (a VPP of 10**12, 10**18 layers, a 400-digit micro-batch) never hangs `check` or `estimate`:
their searches counted down from the run's own count (`check` spent minutes on a VPP of 10**12, found by the
property test of constraints on values of any type), the memory model built a list of every layer's tensors
for each candidate it estimated, and an int past a float's range was an internal error (exit 3). Each entry
point now answers, with the same advice as before for counts a run has."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from offloaddoctor.advice import changes
from offloaddoctor.cli import app
from offloaddoctor.coerce import number
from offloaddoctor.memory import offload_split
from offloaddoctor.memory.fit import fits
from offloaddoctor.memory.model import estimate

from tests.advice.test_advice_and_baseline import _small_shape
from tests.conftest import FIXTURES, RUNNER

LAUNCH = FIXTURES / "estimate" / "llama3-8b-launch.sh"
FOUR_HUNDRED_DIGITS = "1" + "0" * 400


@pytest.mark.parametrize("vpp", ["1000000000000", "1000000000000000000"])
def test_check_suggests_the_largest_dividing_vpp_whatever_the_mistyped_one(vpp):
    settings = [
        "model.num_layers=8",
        "model.pipeline_model_parallel_size=2",
        f"model.virtual_pipeline_model_parallel_size={vpp}",
    ]
    result = RUNNER.invoke(app, ["check", *(arg for setting in settings for arg in ("--set", setting))])
    assert result.exit_code == 1, result.output
    assert "model.virtual_pipeline_model_parallel_size=4" in result.output  # 4 layers a stage: VPP 4 divides them


@pytest.mark.parametrize(
    "setting",
    [
        "model.num_layers=1000000000000000000",
        "model.virtual_pipeline_model_parallel_size=1000000000000",
        "train.micro_batch_size=1000000000000",
        f"model.num_layers={FOUR_HUNDRED_DIGITS}",
        f"train.micro_batch_size={FOUR_HUNDRED_DIGITS}",
        f"model.hidden_size={FOUR_HUNDRED_DIGITS}",
        f"optimizer.optimizer_offload_fraction={FOUR_HUNDRED_DIGITS}",
    ],
)
@pytest.mark.parametrize("command", [["check"], ["estimate", "--gpu", "H100-80GB", "--target", "20GiB"]])
def test_a_mistyped_count_is_answered_not_an_internal_error(command, setting):
    result = RUNNER.invoke(app, [*command, str(LAUNCH), "--set", setting])
    assert result.exit_code in (0, 1, 2), result.output
    if result.exit_code == 2:
        [line] = result.stderr.strip().splitlines()
        assert line.startswith("offloaddoctor: error: ") and setting.split("=")[0] in line


def test_an_int_past_a_floats_range_reads_as_its_exponent_spelling_does():
    assert number(int(FOUR_HUNDRED_DIGITS)) == number("1e400") == float("inf")
    assert number(-int(FOUR_HUNDRED_DIGITS)) == float("-inf")


_BLOCKS = st.lists(st.integers(0, 50), min_size=1, max_size=5).map(tuple)


@settings(max_examples=200, deadline=None)
@given(
    runs=st.lists(st.tuples(_BLOCKS, st.integers(0, 40)), min_size=1, max_size=4),
    fraction=st.floats(0.01, 0.99),
)
def test_the_offloaded_share_of_repeated_layers_is_the_tensor_by_tensor_walks(runs, fraction):
    """Counting whole layers at once moves the same tensors as Megatron's walk, one tensor at a time, and pins the same bytes."""
    one_by_one = [((numel,), 1) for block, times in runs for _ in range(times) for numel in block]
    total = sum(numel for (numel,), _ in one_by_one)
    if not total:
        return
    shape = _small_shape().with_changes(
        optimizer_cpu_offload=True, optimizer_offload_fraction=fraction, num_experts=None
    )
    params = type("Params", (), {"total": total})()
    assert offload_split._walk(shape, params, runs) == offload_split._walk(shape, params, one_by_one)


@pytest.mark.parametrize("already", [0, 5, 22, 23])
def test_the_fewest_layers_to_offload_are_those_the_one_by_one_search_finds(already):
    """Halving finds what counting up found: the first count that fits, else all layers but one."""
    base = _small_shape().with_changes(cpu_offloading_num_layers=already, recompute_granularity=None)
    estimates = [estimate(base.with_changes(cpu_offloading_num_layers=k)) for k in range(base.num_layers)]
    peaks = [e.peak_allocated_bytes for e in estimates]
    budgets = sorted({*(peak * factor for peak in peaks for factor in (1.0, 1.1)), 1.0, peaks[0] * 3})
    searched = range(max(1, already + 1), base.num_layers)
    for budget in budgets:
        first = next((k for k in searched if fits(estimates[k], budget)), base.num_layers - 1)
        assert changes._smallest_offload(base, budget) == first
    assert len({changes._smallest_offload(base, budget) for budget in budgets}) > 1 or already >= 22
