"""`check`: the catalogue's config predicates on a config alone, all violations at once."""

from __future__ import annotations

import json

import pytest

from offloaddoctor.report.preflight import check_store, preflight_signatures
from offloaddoctor.api import check
from offloaddoctor.cli import app
from offloaddoctor.config.from_log import LogConfigCollector
from offloaddoctor.config.keys import canonical_key
from offloaddoctor.config.loading import build_store
from offloaddoctor.config.values import ConfigValue, Source
from offloaddoctor.errors import UserError
from offloaddoctor.render.check_view import render_check_plain

from tests.conftest import FIXTURES, RUNNER, builtin_catalog

CATALOG = builtin_catalog()
MANY = str(FIXTURES / "check" / "many-violations.yaml")
BRIDGE = str(FIXTURES / "configs" / "bridge-run-config-optimizer-offload.yaml")


def store_of(config: dict, log: str = ""):
    collector = LogConfigCollector("<example>")
    for number, line in enumerate(log.splitlines(), start=1):
        collector.feed(line, number)
    given = [ConfigValue(canonical_key(k), v, Source("<test>", None), "config") for k, v in config.items()]
    return build_store(collector.values, given)


def confirmed_examples():
    for signature in preflight_signatures(CATALOG):
        for example in signature.examples:
            if example.expect == "match" and example.verdict == "confirmed" and example.config:
                yield pytest.param(signature.id, example, id=f"{signature.id}:{example.name}")


@pytest.mark.parametrize(("signature_id", "example"), list(confirmed_examples()))
def test_every_confirmed_example_config_fails_the_check(signature_id, example):
    # One source of truth: the config that confirms a log match is the config `check` rejects. The
    # example's log counts too: it can carry config (MCore's "Falling back to Torch optimizers").
    report = check_store(CATALOG, store_of(example.config, example.log))
    assert signature_id in [v.id for v in report.violations]


def test_every_preflight_signature_has_a_confirmed_example():
    covered = {p.values[0] for p in confirmed_examples()}
    assert covered == {s.id for s in preflight_signatures(CATALOG)}


def test_all_violations_are_reported_at_once_with_sources():
    report = check([MANY])
    ids = [v.id for v in report.violations]
    assert sorted(ids) == sorted(
        ["pp-cpu-offload", "recompute-cpu-offload", "state-offload-conflict", "optimizer-offload-fraction-range"]
    )
    pp = next(v for v in report.violations if v.id == "pp-cpu-offload")
    assert {(e.path, e.line) for e in pp.evidence} == {(MANY, 5), (MANY, 6)}
    assert pp.overrides[0] == "model.cpu_offloading=False"
    assert report.has_errors


def test_reference_bridge_config_passes_every_constraint():
    report = check([BRIDGE])
    assert report.violations == []
    assert report.unchecked == []
    # the memory constraints are checked only when a GPU (check --gpu) or a node's memory (--host-memory) is given
    memory = {"memory-exceeds-capacity", "host-memory-exceeds-capacity"}
    assert len(report.passed) == len([s for s in preflight_signatures(CATALOG) if s.id not in memory])


@pytest.mark.parametrize(
    "config",
    [
        {"num_layers": 8, "pipeline_model_parallel_size": 4, "cpu_offloading_num_layers": 0},  # Megatron-LM flat
        {
            "model.num_layers": 8,
            "model.pipeline_model_parallel_size": 4,
            "model.cpu_offloading": False,
            "model.activation_offload_layers": 0,
        },  # Bridge, the #2992 trap
    ],
)
def test_zero_offloaded_layers_means_off(config):
    assert "pp-cpu-offload" not in [v.id for v in check_store(CATALOG, store_of(config)).violations]


def test_megatron_lm_layer_count_above_zero_turns_offloading_on():
    report = check_store(
        CATALOG, store_of({"num_layers": 8, "pipeline_model_parallel_size": 4, "cpu_offloading_num_layers": 2})
    )
    assert [v.id for v in report.violations] == ["pp-cpu-offload"]


def test_defaults_fill_unset_keys_and_can_be_turned_off(tmp_path):
    config = tmp_path / "pp.yaml"
    config.write_text("model:\n  pipeline_model_parallel_size: 2\n")
    assert check([str(config)]).unchecked == []
    bare = check([str(config)], use_defaults=False)
    needs = {u.id: u.missing for u in bare.unchecked}
    assert "model.cpu_offloading" in needs["pp-cpu-offload"]


def test_null_vpp_is_off_not_unknown():
    report = check_store(
        CATALOG,
        store_of(
            {
                "model.num_layers": 6,
                "model.pipeline_model_parallel_size": 2,
                "model.virtual_pipeline_model_parallel_size": None,
            }
        ),
    )
    assert "vpp-layer-divisibility" in report.passed


def test_only_selected_constraints_and_unknown_ids():
    report = check([MANY], only=["state-offload-conflict"])
    assert [v.id for v in report.violations] == ["state-offload-conflict"]
    assert report.passed == [] and report.unchecked == []
    with pytest.raises(UserError, match="oom-capacity"):
        check([MANY], only=["oom-capacity"])  # log-only signatures cannot be checked from a config


def test_nothing_to_check_is_a_usage_error():
    with pytest.raises(UserError, match="nothing to check"):
        check([])


def test_plain_output_snapshot(snapshot, monkeypatch):
    monkeypatch.chdir(FIXTURES.parent)
    assert render_check_plain(check(["fixtures/check/many-violations.yaml"])) == snapshot


def test_cli_exit_codes_and_json():
    assert RUNNER.invoke(app, ["check", BRIDGE]).exit_code == 0
    result = RUNNER.invoke(app, ["check", MANY, "--format", "json"])
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert data["schema_version"] == 1
    assert {v["id"] for v in data["violations"]} >= {"pp-cpu-offload", "state-offload-conflict"}
    assert all(v["config"]["verdict"] == "confirmed" for v in data["violations"])
    fixed = RUNNER.invoke(
        app,
        [
            "check",
            MANY,
            "--set",
            "model.pipeline_model_parallel_size=1",
            "--set",
            "model.recompute_granularity=null",
            "--set",
            "optimizer.offload_optimizer_states=false",
            "--set",
            "optimizer.optimizer_offload_fraction=0.5",
        ],
    )
    assert fixed.exit_code == 0, fixed.stdout


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["check"], "nothing to check"),
        (["check", "missing.yaml"], "missing.yaml: config file not found"),
        (["check", MANY, "--set", "no-equals"], "no-equals"),
        (["check", MANY, "--select", "nope"], "nope"),
    ],
)
def test_cli_bad_input_is_one_line_exit_2(args, fragment):
    result = RUNNER.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert len(result.stderr.strip().splitlines()) == 1 and fragment in result.stderr
    assert "Traceback" not in result.output


def test_moe_with_tensor_parallelism_needs_sequence_parallelism_and_a_dense_model_does_not(tmp_path):
    """The constraint e30 (a real H200 run, advised before the rule) died on at its first step; with the
    defaults filled in (no experts, TP 1, SP off in megatron-core 0.19.0) a config that says nothing is fine."""

    def violations(text: str) -> list[str]:
        (tmp_path / "c.yaml").write_text(text)
        return [v.id for v in check([str(tmp_path / "c.yaml")]).violations]

    rule = "moe-tp-requires-sequence-parallel"
    assert rule in violations("model:\n  num_moe_experts: 8\n  tensor_model_parallel_size: 2\n")
    assert rule not in violations(
        "model:\n  num_moe_experts: 8\n  tensor_model_parallel_size: 2\n  sequence_parallel: true\n"
    )
    assert rule not in violations("model:\n  tensor_model_parallel_size: 2\n")
    assert rule not in violations("model:\n  num_moe_experts: 8\n")


def test_a_value_outside_a_literal_keys_choices_is_unreadable_not_a_pass(tmp_path):
    """`transformer_impl: locall` is neither `local` nor anything else megatron-core takes: the constraint that
    reads it is not checked (with a note naming the value), never passed; the CLI's --set refuses it outright."""
    config = tmp_path / "c.yaml"
    config.write_text("model:\n  transformer_impl: locall\n  sequence_parallel: true\n")
    report = check([str(config)])
    rule = "local-impl-sequence-parallel"
    assert rule not in report.passed and rule not in [v.id for v in report.violations]
    assert [u.invalid for u in report.unchecked if u.id == rule] == [("model.transformer_impl",)]
    assert any("model.transformer_impl = 'locall'" in note for note in report.notes)
    config.write_text("model:\n  transformer_impl: local\n  sequence_parallel: true\n")
    assert rule in [v.id for v in check([str(config)]).violations]


def test_moe_capacity_padding_needs_a_capacity_factor(tmp_path):
    """megatron-core 0.16.1/0.19.0 TransformerConfig refuses padding with no factor, or a negative one (set to None
    first, dropless); the defaults (no padding, no factor) and a set factor pass."""

    def violations(text: str) -> list[str]:
        (tmp_path / "c.yaml").write_text("model:\n  num_moe_experts: 8\n" + text)
        return [v.id for v in check([str(tmp_path / "c.yaml")]).violations]

    rule = "moe-pad-requires-capacity-factor"
    assert rule in violations("  moe_pad_expert_input_to_capacity: true\n")
    assert rule in violations("  moe_pad_expert_input_to_capacity: true\n  moe_expert_capacity_factor: null\n")
    assert rule in violations("  moe_pad_expert_input_to_capacity: true\n  moe_expert_capacity_factor: -1\n")
    assert rule not in violations("  moe_pad_expert_input_to_capacity: true\n  moe_expert_capacity_factor: 1.0\n")
    assert rule not in violations("  moe_expert_capacity_factor: 1.0\n")
    assert rule in check([str(tmp_path / "c.yaml")]).passed


@pytest.mark.parametrize(
    ("balancing", "refused"),
    [
        ("sinkhorn", True),
        ("quantile_balancing", True),
        ("sinkorn", True),  # a typo: megatron-core takes only the four
        ("[aux_loss, sinkhorn]", True),
        ("[aux_loss, sinkorn]", True),  # one of the four beside a typo
        ("seq_aux_losses", True),  # holds "aux_loss" as text, is not one of the four
        ("aux_loss", False),
        ("seq_aux_loss", False),
        ("global_aux_loss", False),
        ("none", False),
        ("[aux_loss, seq_aux_loss]", False),
        ("[none]", False),
    ],
)
def test_a_capacity_factor_takes_only_the_four_load_balancing_types(tmp_path, balancing, refused):
    """A string or a list (each element checked), as megatron-core's TransformerConfig does; a list is not read as
    one unknown word."""
    config = tmp_path / "c.yaml"
    config.write_text(f"model:\n  moe_expert_capacity_factor: 1.0\n  moe_router_load_balancing_type: {balancing}\n")
    rule = "moe-capacity-factor-load-balancing"
    report = check([str(config)])
    assert (rule in [v.id for v in report.violations]) is refused
    assert (rule in report.passed) is not refused


def test_a_capacity_factor_rule_needs_a_factor_and_reads_megatrons_none(tmp_path):
    """No factor (the default) is dropless: any balancing passes; a negative factor is still checked (megatron-core
    sets it to None after the check); Megatron-LM's `--moe-router-load-balancing-type none` reads as None."""
    rule = "moe-capacity-factor-load-balancing"
    config = tmp_path / "c.yaml"
    config.write_text("model:\n  moe_router_load_balancing_type: sinkhorn\n")
    assert rule in check([str(config)]).passed
    config.write_text("model:\n  moe_expert_capacity_factor: -1\n  moe_router_load_balancing_type: sinkhorn\n")
    assert rule in [v.id for v in check([str(config)]).violations]

    def arguments_block(balancing: str) -> str:
        return "\n".join(
            [
                "------------------------ arguments ------------------------",
                "  moe_expert_capacity_factor ...................... 1.0",
                f"  moe_router_load_balancing_type .................. {balancing}",
                "-------------------- end of arguments ---------------------",
            ]
        )

    store = store_of({}, arguments_block("none"))
    assert store.resolve("model.moe_router_load_balancing_type").value is None
    assert rule in check_store(CATALOG, store).passed
    assert rule in [v.id for v in check_store(CATALOG, store_of({}, arguments_block("sinkhorn"))).violations]
    listed = store_of({}, arguments_block("['seq_aux_loss', 'none']"))
    assert listed.resolve("model.moe_router_load_balancing_type").value == ["seq_aux_loss", "none"]
    assert rule in check_store(CATALOG, listed).passed


def test_every_setting_of_a_violated_combination_is_cited_though_they_share_a_line(tmp_path):
    """A launch command holds every flag on one line: the evidence cited only the first key it read there
    (`model.cpu_offloading = True`), hiding the pipeline size that makes it a violation."""
    script = tmp_path / "launch.sh"
    script.write_text(
        "torchrun pretrain_gpt.py --num-layers 8 --pipeline-model-parallel-size 4 --cpu-offloading-num-layers 2 "
        "--transformer-impl transformer_engine\n"
    )
    [violation] = check([str(script)]).violations
    assert violation.id == "pp-cpu-offload"
    [evidence] = violation.evidence
    assert (evidence.path, evidence.line) == (str(script), 1)
    assert "model.pipeline_model_parallel_size = 4" in evidence.text and "model.cpu_offloading = True" in evidence.text
    shown = RUNNER.invoke(app, ["check", str(script), "--format", "text"]).stdout
    assert "model.cpu_offloading = True, model.pipeline_model_parallel_size = 4" in shown


def test_a_config_no_single_change_makes_fit_gets_no_fix_line_that_would_not_work(tmp_path):
    """check --gpu printed the signature's template change (`--recompute-granularity selective`) for a MoE model
    174 GB over an H100 whose activations are ~0: pasted, it changes nothing. Only a change the memory model
    calls fitting is printed; here none alone is, and the finding says so."""
    script = tmp_path / "launch.sh"
    script.write_text(
        "torchrun --nproc-per-node 2 pretrain_gpt.py --num-layers 8 --hidden-size 2048 --num-attention-heads 16 "
        "--seq-length 1024 --max-position-embeddings 1024 --micro-batch-size 1 --global-batch-size 2 "
        "--vocab-size 32000 --bf16 --use-distributed-optimizer --disable-bias-linear --num-experts 96 "
        "--moe-router-topk 2 --moe-ffn-hidden-size 4096 --transformer-impl local\n"
    )
    [violation] = [v for v in check([str(script)], gpu="H100-80GB").violations if v.id == "memory-exceeds-capacity"]
    assert violation.overrides == []
    assert violation.facts["cheapest_change_that_fits"].startswith("none alone")
    fitting = check([str(script)], gpu="H100-80GB", overrides=["model.num_moe_experts=16"]).violations
    assert [v.id for v in fitting if v.id == "memory-exceeds-capacity"] == []


def test_a_violation_that_an_earlier_fix_settles_keeps_no_lines_of_its_own():
    """pp-cpu-offload's fix turns activation offloading off, which leaves recompute-cpu-offload nothing to forbid:
    pasting both would also turn recompute off, for one conflict. The first finding keeps its own fix."""
    by_id = {v.id: v for v in check([MANY]).violations}
    assert ("model.cpu_offloading", False) in by_id["pp-cpu-offload"].changes
    settled = by_id["recompute-cpu-offload"]
    assert settled.changes == [] and settled.fix_note.startswith("pp-cpu-offload's fix")
    assert by_id["optimizer-offload-fraction-range"].changes == []  # off with state-offload-conflict's fix


@pytest.mark.parametrize(
    ("versions", "refused"),
    [
        ({}, True),  # not known: taken as the releases that refuse it
        ({"runtime.megatron_core_version": "0.16.1", "runtime.torch_version": "2.11.0"}, True),
        ({"runtime.megatron_core_version": "0.19.0", "runtime.torch_version": "2.9.1"}, True),
        ({"runtime.megatron_core_version": "0.19.0", "runtime.torch_version": "2.11.0+cu130"}, False),
    ],
)
def test_nccl_user_buffers_with_expandable_segments_is_refused_only_where_the_releases_refuse_it(versions, refused):
    """megatron-core 0.16.1 refuses the pair on any torch; 0.19.0 below torch 2.11 only
    (DistributedDataParallelConfig.__post_init__); with 0.19.0 and torch 2.11 it trained (fixtures/memory-calibration
    b37, two H200s, beside b38 without expandable segments)."""
    config = {"ddp.nccl_ub": True, "env.PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", **versions}
    report = check_store(CATALOG, store_of(config), only=["nccl-ub-expandable-segments"])
    assert ("nccl-ub-expandable-segments" in [v.id for v in report.violations]) is refused
    assert ("nccl-ub-expandable-segments" in report.passed) is not refused


def test_megatron_lms_start_up_lines_give_the_releases():
    log = FIXTURES / "memory-calibration" / "b37-gpt-dp2-nccl-ub-expandable.log.gz"
    from offloaddoctor.config.loading import load_log_config

    versions = {v.key: v.value for v in load_log_config(str(log)) if v.key.startswith("runtime.")}
    assert versions["runtime.torch_version"] == "2.11.0+cu130"
    assert versions["runtime.megatron_core_version"] == "0.19.0"
    trained = next(
        r for r in (FIXTURES / "memory-calibration" / "runs.tsv").read_text().splitlines() if r.startswith("b37")
    )
    assert "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" in trained and "--use-nccl-ub" in trained


def test_an_unchecked_constraint_names_only_the_values_it_needs_not_those_a_default_stands_in_for():
    """nccl-ub-expandable-segments takes unknown releases as the ones that refuse the pair (`if_missing`): where the
    allocator setting is not known, that is all `check` says it needs."""
    report = check_store(CATALOG, store_of({"ddp.nccl_ub": True}), only=["nccl-ub-expandable-segments"])
    [unchecked] = report.unchecked
    assert unchecked.missing == ("allocator.expandable_segments",)
