"""Fine-grained activation offloading's module list before launch and in a report: megatron-core refuses an empty
list, names it does not offload, attn_proj without core_attn, and (0.19) MoE-internal modules while the MoE layer is
recomputed; the fix names the nearest list it takes (fixtures/fine-grained-offload-modules, fixtures/bridge-0.3.1)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

import pytest

from offloaddoctor.api import check
from offloaddoctor.coerce import names
from offloaddoctor.config.derived import (
    MOE_OFFLOAD_MODULES,
    OFFLOAD_MODULES,
    fix_values,
    offload_modules_refusal,
    offload_modules_taken,
)
from offloaddoctor.config.loading import build_store
from offloaddoctor.config.overrides import parse_overrides
from offloaddoctor.config.values import ConfigValue, Source

ON = "model.fine_grained_activation_offloading=True"
ANY_NAME = st.sampled_from([*OFFLOAD_MODULES, "fused_group_mlp", "mlp", "moe", "layernorm", "core-attn"])


@given(st.lists(ANY_NAME, max_size=6), st.booleans())
def test_the_suggested_list_is_one_megatron_core_takes(modules, recompute_moe):
    taken = offload_modules_taken(tuple(modules), recompute_moe)
    assert offload_modules_refusal(taken, recompute_moe) == ""
    assert set(taken) <= {*modules, "core_attn"}  # nothing new but the attention core


@given(st.lists(st.sampled_from(OFFLOAD_MODULES), min_size=1, max_size=7, unique=True))
def test_a_list_it_takes_is_kept_as_it_is(modules):
    if "attn_proj" in modules and "core_attn" not in modules:
        modules.insert(0, "core_attn")
    assert offload_modules_refusal(tuple(modules), False) == ""
    assert offload_modules_taken(tuple(modules), False) == tuple(modules)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (["core_attn", "attn_proj"], ("core_attn", "attn_proj")),  # YAML
        ("[core_attn,attn_proj]", ("core_attn", "attn_proj")),  # Hydra
        ("['core_attn', 'attn_proj']", ("core_attn", "attn_proj")),  # Megatron-LM's arguments block
        ("core_attn", ("core_attn",)),
        ("[]", ()),
        (None, ()),
        ("None", ()),
        (["core_attn", "core_attn"], ("core_attn",)),
    ],
)
def test_a_list_of_names_reads_alike_in_every_spelling(value, expected):
    assert names(value) == expected


def _store(*items: str, origin: str = "set"):
    values = parse_overrides(list(items))
    if origin == "log":
        values = [ConfigValue(v.key, v.value, Source("job.log", 1, "arguments block"), "log") for v in values]
    return build_store(values)


@pytest.mark.parametrize(
    ("items", "refused", "suggested"),
    [
        ([ON], True, ["core_attn"]),  # the switch alone: megatron-core's default list is empty
        ([ON, "model.offload_modules=[]"], True, ["core_attn"]),
        ([ON, "model.offload_modules=[core_attn,mlp]"], True, ["core_attn"]),
        ([ON, "model.offload_modules=[attn_proj,mlp_norm]"], True, ["core_attn", "attn_proj", "mlp_norm"]),
        (
            [
                ON,
                "model.offload_modules=[expert_fc1,core_attn]",
                "model.recompute_granularity=selective",
                "model.recompute_modules=[moe]",
            ],
            True,
            ["core_attn"],
        ),
        ([ON, "model.offload_modules=[expert_fc1,core_attn]", "model.recompute_modules=[moe]"], False, None),
        ([ON, "model.offload_modules=[core_attn,attn_proj,expert_fc1]"], False, None),
    ],
)
def test_a_refused_list_is_derived_and_the_nearest_taken_one_suggested(items, refused, suggested):
    store = _store(*items)
    assert store.value("model.offload_modules_refused") is refused
    if suggested is not None:
        assert fix_values(store)["suggested.offload_modules"] == suggested


def test_a_log_that_does_not_print_the_list_says_nothing_about_it():
    assert _store(ON, origin="log").resolve("model.offload_modules_refused") is None
    assert _store("model.fine_grained_activation_offloading=False").resolve("model.offload_modules_refused") is None


def test_check_refuses_the_switch_without_modules_and_prints_the_list_to_set():
    report = check([], [ON])
    found = {v.id: v for v in report.violations}
    assert "fine-grained-offload-modules" in found
    assert found["fine-grained-offload-modules"].overrides == ["model.offload_modules=[core_attn]"]
    assert "fine-grained-offload-modules" not in {
        v.id for v in check([], [ON, "model.offload_modules=[core_attn]"]).violations
    }


def test_check_refuses_fine_grained_offloading_with_the_local_implementation():
    ids = {
        v.id for v in check([], [ON, "model.offload_modules=[core_attn]", "model.transformer_impl=local"]).violations
    }
    assert ids == {"fine-grained-offload-requires-te"}
    assert not check([], [ON, "model.offload_modules=[core_attn]"]).violations


def test_moe_internal_modules_are_left_out_of_the_suggestion_only_while_the_moe_layer_is_recomputed():
    assert set(MOE_OFFLOAD_MODULES) & set(offload_modules_taken(("expert_fc1", "moe_act"), False))
    assert offload_modules_taken(("expert_fc1", "moe_act"), True) == ("core_attn",)


@pytest.mark.parametrize(
    ("line", "modules"),
    [
        ("--offload-modules attn_proj mlp_norm --num-layers 4", ["attn_proj", "mlp_norm"]),
        ("--offload-modules core_attn 2>&1 | tee log", ["core_attn"]),
        ("--offload-modules=core_attn", "core_attn"),
        ("--offload-modules core_attn model.num_layers=4", ["core_attn"]),
        ("--offload-modules --num-layers 4", []),  # the flag with no module: megatron-core's empty list
    ],
)
def test_a_launch_lines_list_flag_takes_every_word_up_to_the_next_flag(tmp_path, line, modules):
    """argparse's nargs: `--offload-modules a b` is two modules (a launch script's `--recompute-modules` alike)."""
    from offloaddoctor.config import explicit_config

    script = tmp_path / "launch.sh"
    script.write_text(f"torchrun --nproc-per-node 8 pretrain_gpt.py --fine-grained-activation-offloading {line}\n")
    values = {v.key: v.value for v in explicit_config([str(script)], [])}
    assert values["model.offload_modules"] == modules
    assert names(values["model.offload_modules"]) == tuple([modules] if isinstance(modules, str) else modules)
    if not modules:
        assert offload_modules_refusal((), False).startswith("no module listed")
