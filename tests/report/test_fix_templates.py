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
