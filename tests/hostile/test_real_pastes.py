"""Real pastes from public threads that the report got wrong or missed (each fixture's SOURCE.md names its
thread): a VPP that does not divide an even split, caught only when the model is built; activation offloading
with nothing selected to offload; one allocation larger than the whole GPU."""

from __future__ import annotations

from offloaddoctor.api import diagnose, diagnose_text
from offloaddoctor.cli import app

from tests.conftest import FIXTURES, RUNNER


def test_the_build_time_vpp_assert_is_the_vpp_finding_with_the_vpp_that_divides():
    report = diagnose([str(FIXTURES / "vpp-layer-divisibility-even-split" / "job.log")])
    [finding] = report.findings
    assert finding.signature.id == "vpp-layer-divisibility"
    assert (finding.facts["layers"], finding.facts["vpp"]) == (20, 12)
    # 20 layers a stage: 10 is the largest VPP up to 12 that divides them (Megatron-Bridge PR 5893 chose 10)
    assert finding.overrides == ["--num-virtual-stages-per-pipeline-rank 10"]  # in the log's dialect (Megatron-LM)


def test_check_confirms_nothing_to_offload_from_the_config_and_its_defaults():
    result = RUNNER.invoke(
        app, ["check", "--set", "model.cpu_offloading=true", "--set", "model.cpu_offloading_activations=false"]
    )
    assert result.exit_code == 1, result.output
    assert "cpu-offload-nothing-to-offload" in result.output
    assert "model.cpu_offloading_weights = False  (default (ModelParallelConfig" in result.output


def test_selecting_weights_or_keeping_activations_is_no_violation():
    for setting in ("model.cpu_offloading_weights=true", "model.cpu_offloading_activations=true"):
        result = RUNNER.invoke(app, ["check", "--set", "model.cpu_offloading=true", "--set", setting])
        assert "cpu-offload-nothing-to-offload" not in result.output, setting


def test_one_allocation_larger_than_the_gpu_gets_no_memory_setting():
    report = diagnose([str(FIXTURES / "excerpt-oom-larger-than-gpu" / "job.log")])
    [finding] = report.findings
    assert finding.signature.id == "oom-capacity"
    assert finding.overrides == []
    assert finding.fix_note_replaces_summary
    assert finding.fix_note.startswith("One allocation of 355.43 GiB is larger than all the memory")


def test_an_allocation_within_the_gpu_keeps_its_fixes():
    text = (FIXTURES / "excerpt-oom-larger-than-gpu" / "job.log").read_text().replace("355.43 GiB", "35.43 GiB")
    [finding] = diagnose_text(text).findings
    assert "larger than all the memory" not in finding.fix_note
