"""Fix templates fill `{suggested.*}` values from their own namespace: they are not config keys."""

from __future__ import annotations

from offloaddoctor.api import diagnose
from offloaddoctor.config.derived import fix_values
from offloaddoctor.config.keys import is_known
from offloaddoctor.config.values import ConfigStore, ConfigValue, Source
from offloaddoctor.policy import Policy

from tests.conftest import FIXTURES


def store_of(**values) -> ConfigStore:
    store = ConfigStore()
    for key, value in values.items():
        store.add(ConfigValue(key.replace("__", "."), value, Source("cfg.yaml", 1, "config"), "config"))
    return store


def test_suggestions_are_not_config_keys():
    assert not is_known("optimizer.suggested_offload_fraction") and not is_known(
        "model.suggested_virtual_pipeline_size"
    )
    store = store_of(optimizer__optimizer_offload_fraction=0.3)
    assert store.resolve("optimizer.suggested_offload_fraction") is None
    assert fix_values(store) == {
        "suggested.offload_fraction": 0.5,
        "suggested.omp_threads": "$(( $(nproc) / $(nvidia-smi -L | wc -l) ))",  # one rank a GPU: none said
    }


def test_the_omp_threads_a_rank_come_from_the_launch_commands_processes_per_node():
    assert fix_values(store_of(nproc_per_node=4))["suggested.omp_threads"] == "$(( $(nproc) / 4 ))"


def test_the_vpp_fix_line_is_filled_from_the_suggestion():
    report = diagnose([str(FIXTURES / "vpp-layer-divisibility" / "job.log")], policy=Policy())
    finding = next(f for f in report.findings if f.id == "vpp-layer-divisibility")
    _, value = next(c for c in finding.changes if c[0] == "model.virtual_pipeline_model_parallel_size")
    assert value is None or isinstance(value, int)  # filled: no `<suggested.…>` left
    assert not any("suggested" in line or "<" in line for line in finding.overrides)


def test_a_refused_module_list_from_the_log_alone_is_filled_from_the_names_the_message_gives():
    """Bridge 0.3.1's validate() refusing attn_proj without core_attn names one module and nothing else of the list:
    the fix pastes the nearest list megatron-core takes with what is known, never an unfilled template."""
    report = diagnose([str(FIXTURES / "bridge-0.3.1" / "validate-error-fine-grained-attn-proj.log")], policy=Policy())
    [finding] = report.findings
    assert finding.facts["offload_modules_named"] == "attn_proj"
    assert ("model.offload_modules", ["core_attn", "attn_proj"]) in finding.changes
    empty = diagnose([str(FIXTURES / "bridge-0.3.1" / "validate-error-fine-grained-no-modules.log")], policy=Policy())
    assert ("model.offload_modules", ["core_attn"]) in empty.findings[0].changes


def test_no_fixtures_fix_line_is_an_unfilled_suggestion():
    logs = sorted(FIXTURES.glob("*/job.log")) + sorted((FIXTURES / "bridge-0.3.1").glob("*.log"))
    for log in logs:
        for finding in diagnose([str(log)], policy=Policy()).findings:
            assert not any("<suggested." in str(value) for _, value in finding.changes), (log, finding.id)


def test_a_fix_line_whose_value_nothing_gives_is_left_out_with_a_note_naming_its_key(tmp_path):
    """slime#1818 (held-out batch 5): the message gives the expert grid's product (16) and the world (8), not the
    expert-parallel size, so no value can be suggested; a `<suggested.…>` line is not one to paste."""
    log = tmp_path / "job.log"
    log.write_text("RuntimeError: world_size (8) is not divisible by expert_tensor_model_pipeline_parallel size (16)\n")
    [finding] = diagnose([str(log)], policy=Policy()).findings
    assert finding.id == "expert-grid-divides-world"
    assert finding.overrides == [] and finding.changes == []
    assert "Left out of this fix: `model.expert_model_parallel_size`" in finding.fix_sentences[0]
    with_config = tmp_path / "cfg.yaml"
    with_config.write_text("model:\n  expert_model_parallel_size: 8\n  pipeline_model_parallel_size: 2\n")
    [configured] = diagnose([str(log)], config_paths=[str(with_config)], policy=Policy()).findings
    # the config's EP and PP, with the world the message printed: 8 GPUs over PP 2 leave room for EP 4
    assert configured.overrides == ["model.expert_model_parallel_size=4"] and not configured.fix_note


def test_check_fills_the_offloaded_layer_count_from_the_config_when_no_message_gives_it(tmp_path):
    """`check` reads no megatron-core message: `{max_offload_layers}` came only from one, so `check` printed
    `model.cpu_offloading_num_layers=<max_offload_layers>`. The most TransformerConfig takes is num_layers - 1."""
    from offloaddoctor.api import check

    config = tmp_path / "cfg.yaml"
    config.write_text("model:\n  num_layers: 8\n  cpu_offloading: true\n  cpu_offloading_num_layers: 8\n")
    [violation] = [v for v in check([str(config)]).violations if v.id == "cpu-offload-num-layers"]
    assert violation.overrides == ["model.cpu_offloading_num_layers=7"]


def test_the_vpp_suggestion_divides_the_first_stages_layers_where_only_those_are_known(tmp_path):
    """The first stage's 3 layers take no VPP of 2 or more: VPP goes off (null), not an unfilled template."""
    config = tmp_path / "cfg.yaml"
    config.write_text("model:\n  num_layers_in_first_pipeline_stage: 3\n  virtual_pipeline_model_parallel_size: 2\n")
    log = tmp_path / "job.log"
    log.write_text(
        "ValueError: number of layers at first stage: 3must be divisible by virtual pipelineparallel degree 2\n"
    )
    [finding] = diagnose([str(log)], config_paths=[str(config)], policy=Policy()).findings
    assert finding.overrides == ["model.virtual_pipeline_model_parallel_size=null"]
    assert (
        fix_values(
            store_of(model__num_layers_in_first_pipeline_stage=6, model__virtual_pipeline_model_parallel_size=4)
        )["suggested.virtual_pipeline_size"]
        == 3
    )
