"""expert-grid-divides-world before launch: megatron-core's initialize_model_parallel refuses a world size that
expert TP (TP when unset) x EP x PP does not divide; `check` says so where the config tells the world size."""

from __future__ import annotations

import pytest

from offloaddoctor.api import check
from offloaddoctor.config.derived import fix_values
from offloaddoctor.config.dialect import parse_fix_line
from offloaddoctor.config.loading import build_store
from offloaddoctor.config.overrides import parse_overrides
from offloaddoctor.config.values import ConfigValue, Source

SIGNATURE = "expert-grid-divides-world"


@pytest.mark.parametrize(
    ("items", "world"),
    [
        (["world_size=4", "data_parallel_size=2"], 4),  # given alike (an arguments block prints both): the world
        (["data_parallel_size=2", "tensor_model_parallel_size=2", "pipeline_model_parallel_size=2"], 8),
        (["data_parallel_size=3", "context_parallel_size=2"], 6),
        (["nproc_per_node=4", "nnodes=2"], 8),
        (["nproc_per_node=4"], 4),
        (["env.SLURM_NTASKS=16", "nproc_per_node=4"], 16),
        (["nproc_per_node=4", "nnodes='1:2'"], None),  # an elastic node range: the GPUs are not one number
        (["tensor_model_parallel_size=2"], None),
    ],
)
def test_the_runs_world_size_is_read_where_the_config_says_it(items, world):
    given = [ConfigValue(v.key, v.value, Source("job.log", 1), "log") for v in parse_overrides(items)]
    resolved = build_store(given).resolve("parallel.run_world_size")
    assert (resolved.value if resolved else None) == world


def test_a_data_parallel_size_given_with_set_wins_over_a_printed_world_size():
    printed = ConfigValue("world_size", 8, Source("job.log", 1), "log")
    resolved = build_store([printed], parse_overrides(["data_parallel_size=2"])).resolve("parallel.run_world_size")
    assert resolved.value == 2  # as the memory model reads it: the user's --set says what the run will be


@pytest.mark.parametrize(
    ("items", "grid"),
    [
        (["expert_model_parallel_size=8"], 8),
        (["expert_model_parallel_size=2", "tensor_model_parallel_size=2", "pipeline_model_parallel_size=2"], 8),
        (["expert_model_parallel_size=4", "tensor_model_parallel_size=4", "expert_tensor_parallel_size=1"], 4),
        (["num_experts=8"], 1),  # a MoE run with no parallel size set: every size is 1 (was "not checkable")
        (["num_layers=8"], None),  # neither experts nor a size: nothing to derive it from
        (["expert_model_parallel_size=0"], None),  # not a size: its own error
    ],
)
def test_the_expert_grid_is_expert_tp_or_tp_times_ep_times_pp(items, grid):
    resolved = build_store(parse_overrides(items)).resolve("parallel.expert_grid_size")
    assert (resolved.value if resolved else None) == grid


@pytest.mark.parametrize(
    ("items", "suggested"),
    [
        (["world_size=4", "expert_model_parallel_size=8", "num_experts=8"], 4),
        (["world_size=12", "expert_model_parallel_size=8", "num_experts=8"], 4),  # divides 12 and 8
        (["world_size=4", "expert_model_parallel_size=6", "num_experts=6"], 2),
        (["world_size=12", "expert_model_parallel_size=8", "pipeline_model_parallel_size=2", "num_experts=16"], 2),
        # expert TP 2 x PP 1 does not divide 3 GPUs: no EP helps
        (["world_size=3", "expert_model_parallel_size=2", "expert_tensor_parallel_size=2"], None),
    ],
)
def test_the_suggested_ep_is_the_largest_lower_one_dividing_the_gpus_and_the_experts(items, suggested):
    assert fix_values(build_store(parse_overrides(items))).get("suggested.expert_model_parallel_size") == suggested


def _launch(tmp_path, flags: str) -> str:
    script = tmp_path / "launch.sh"
    script.write_text(f"torchrun {flags} pretrain_gpt.py --num-layers 8 --num-experts 8\n")
    return str(script)


def test_check_catches_ep_8_on_four_gpus_and_its_fix_pasted_back_passes(tmp_path):
    script = _launch(tmp_path, "--nproc-per-node 4 --expert-model-parallel-size 8")
    report = check([script])
    [violation] = [v for v in report.violations if v.id == SIGNATURE]
    assert violation.overrides == ["--expert-model-parallel-size 4"]
    changes = [f"{key}={value}" for line in violation.overrides for key, value in parse_fix_line(line)]
    fixed = check([script], changes)
    assert SIGNATURE in fixed.passed and not fixed.violations


def test_without_a_world_size_the_constraint_is_not_checkable_never_passed(tmp_path):
    report = check([_launch(tmp_path, "--expert-model-parallel-size 8")])
    assert SIGNATURE not in report.passed and SIGNATURE not in {v.id for v in report.violations}
    [unchecked] = [u for u in report.unchecked if u.id == SIGNATURE]
    assert "parallel.run_world_size" in unchecked.missing


def test_a_dense_model_is_not_held_to_the_expert_grid(tmp_path):
    script = tmp_path / "launch.sh"
    script.write_text("torchrun --nproc-per-node 4 pretrain_gpt.py --expert-model-parallel-size 8\n")
    assert SIGNATURE in check([str(script)]).passed


def test_check_world_size_gives_the_expert_grid_its_gpus(tmp_path):
    """A launch command without a process count leaves the expert grid not checkable; `--world-size` says it."""
    script = tmp_path / "launch.sh"
    script.write_text("torchrun pretrain_gpt.py --num-layers 8 --num-experts 8 --expert-model-parallel-size 8\n")
    rule = "expert-grid-divides-world"
    assert rule in [u.id for u in check([str(script)]).unchecked]
    assert rule in [v.id for v in check([str(script)], world_size=4).violations]
    assert rule in check([str(script)], world_size=16).passed


@pytest.mark.parametrize(
    ("origin", "follows"),
    [
        ("log", True),  # an arguments block prints the expert TP Megatron took from TP (b68: 2 at TP 2)
        ("config", False),  # a config file's is the user's: a fix of TP leaves it
    ],
)
def test_expert_tp_follows_a_fixed_tp_only_where_megatron_derived_it(origin, follows):
    from offloaddoctor.config.derived import with_derived_changes
    from offloaddoctor.config.values import ConfigStore

    store = ConfigStore()
    for key in ("model.tensor_model_parallel_size", "model.expert_tensor_parallel_size"):
        store.add(ConfigValue(key, 2, Source("run"), origin))
    changes = [("model.tensor_model_parallel_size", 1), ("model.expert_model_parallel_size", 2)]
    derived = with_derived_changes(changes, store)
    assert (("model.expert_tensor_parallel_size", 1) in derived) is follows
    assert derived[:2] == changes
    assert with_derived_changes([("model.expert_model_parallel_size", 2)], store) == [
        ("model.expert_model_parallel_size", 2)
    ]
