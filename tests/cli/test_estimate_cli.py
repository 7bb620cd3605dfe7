"""`offloaddoctor estimate` through the CLI: output formats, exit codes, bad inputs; advice `check` accepts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from offloaddoctor.memory.fit import fits
from typer.testing import CliRunner

from offloaddoctor.api import check, estimate
from offloaddoctor.cli import app

from tests.conftest import schema_validator

ROOT = Path(__file__).resolve().parents[2]
RUN = "fixtures/memory-calibration/c04-mbs8.log.gz"
LAUNCH = "fixtures/estimate/llama3-8b-launch.sh"
RUNNER = CliRunner()


@pytest.fixture
def in_repo(monkeypatch):
    monkeypatch.chdir(ROOT)


HOST_KILLED = "fixtures/memory-calibration/out-of-memory/n135-llama5b-f100-host.log.gz"


def invoke(*args):
    return RUNNER.invoke(app, ["estimate", *args], catch_exceptions=False)


@pytest.mark.parametrize("fmt", ["text", "markdown", "json"])
def test_output_formats(in_repo, snapshot, fmt):
    result = invoke(LAUNCH, "--gpu", "H100-80GB", "--format", fmt)
    assert result.exit_code == 1  # does not fit
    assert result.stdout == snapshot


def test_json_follows_its_schema_and_adds_up(in_repo):
    set_up = "fixtures/offload-sweep/h1-gpt9b-full-f100.log.gz"  # the peak is the model set-up
    for args in (
        [RUN],
        [RUN, "--gpu", "H200"],
        [LAUNCH, "--gpu-memory", "80GiB"],
        [RUN, "--target", "12GiB"],
        [set_up, "--gpu", "H100-80GB"],
        [HOST_KILLED, "--gpu", "H100-80GB", "--host-memory", "124GiB"],
    ):
        document = json.loads(invoke(*args, "--format", "json").stdout)
        schema_validator("estimate.schema.json").validate(document)
        assert sum(document["components"].values()) == pytest.approx(document["peak_allocated_mb"], abs=0.5)


def test_exit_codes(in_repo):
    assert invoke(RUN).exit_code == 0  # no GPU: nothing to fail
    assert invoke(RUN, "--gpu", "H100-80GB").exit_code == 0  # 23 GiB on an 80 GB GPU
    assert invoke(RUN, "--gpu-memory", "16GiB").exit_code == 1
    # fits the GPU, not the host (n135: killed by its host)
    assert invoke(HOST_KILLED, "--gpu", "H100-80GB").exit_code == 0
    assert invoke(HOST_KILLED, "--gpu", "H100-80GB", "--host-memory", "124GiB").exit_code == 1
    assert invoke(HOST_KILLED, "--gpu", "H100-80GB", "--host-memory", "1TiB").exit_code == 0
    # fits its GPU, and check refuses it (n76 stopped at its first step)
    refused = invoke(
        "fixtures/memory-calibration/refused/n76-gpt1b-f050-precision-aware-off.log.gz", "--gpu", "H100-80GB"
    )
    assert (
        refused.exit_code == 1 and "Refused         optimizer-offload-requires-distributed-optimizer" in refused.stdout
    )


@pytest.mark.parametrize(
    "args,message",
    [
        ([], "nothing to estimate"),
        (["missing.yaml"], "missing.yaml"),
        ([RUN, "--gpu", "H42"], "unknown GPU"),
        ([RUN, "--gpu-memory", "80"], "with a unit"),
        ([RUN, "--gpu", "H100", "--gpu-memory", "80GiB"], "pick one"),
        ([RUN, "--target", "lots"], "--target"),
        ([RUN, "--host-memory", "512"], "with a unit"),
        ([RUN, "--host-memory", "0GiB"], "must be positive"),
        ([RUN, "--world-size", "0"], "at least 1"),
        (["fixtures/configs/bridge-run-config-optimizer-offload.yaml"], "needs model.seq_length, model.vocab_size"),
        ([LAUNCH, "--set", "model.hidden_size=wide"], "whole number"),
        ([LAUNCH, "--world-size", "3"], "not a multiple"),
        (["README.md"], "invalid YAML"),
    ],
)
def test_bad_inputs_are_one_line_and_exit_2(in_repo, args, message):
    result = RUNNER.invoke(app, ["estimate", *args])
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert "Traceback" not in result.output and len(result.stderr.strip().splitlines()) == 1


def test_every_suggestion_passes_check_and_fits_when_it_says_so(in_repo):
    report = estimate([LAUNCH], gpu="H100-80GB")
    assert report.fits is False and report.suggestions
    budget = report.budget_bytes
    for suggestion in report.suggestions:
        assert fits(suggestion.estimate, budget) == suggestion.fits
        assert not check([LAUNCH], list(suggestion.overrides)).has_errors, suggestion.change
    assert [s.cost_rank for s in report.suggestions] == sorted(s.cost_rank for s in report.suggestions)


def test_pipeline_parallel_run_is_never_told_to_offload_activations(in_repo):
    report = estimate([LAUNCH], ["model.pipeline_model_parallel_size=2"], gpu_memory="40GiB")
    assert report.suggestions
    assert not any("cpu_offloading" in line for s in report.suggestions for line in s.overrides)


def test_check_with_a_gpu_reports_the_memory_finding_with_the_cheapest_fix(in_repo):
    report = check([LAUNCH], gpu="H100-80GB")
    memory = [v for v in report.violations if v.id == "memory-exceeds-capacity"]
    assert memory and memory[0].overrides == ["--micro-batch-size 1"]  # a launch script: Megatron-LM flags
    assert "activations" in memory[0].facts["largest_component"]
    assert not any(v.id == "memory-exceeds-capacity" for v in check([LAUNCH], gpu="H200").violations)
    assert not any(v.id == "memory-exceeds-capacity" for v in check([LAUNCH]).violations)


def test_a_log_without_config_lines_is_one_line(tmp_path):
    log = tmp_path / "rank0.log"
    log.write_text("iteration 1/ 10 | elapsed time per iteration (ms): 400.0 |\n")
    result = RUNNER.invoke(app, ["estimate", str(log)])
    assert result.exit_code == 2 and "no arguments block or config lines" in result.stderr


def test_a_real_oom_is_sized_by_the_whole_step_not_the_failed_request(in_repo):
    from offloaddoctor.api import diagnose

    finding = diagnose(["fixtures/oom-capacity-recorded/job.log"]).findings[0]
    # free 3.02 + slack 1.83 GiB >= 3.91 GiB, but the whole step is far shorter: capacity (docs/oom.md)
    assert finding.id == "oom-capacity"
    assert "whole step is" in finding.facts["fragmentation_arithmetic"]
    assert finding.facts["shortfall_bytes"] < 2**30  # the request: 911 MiB
    assert finding.facts["whole_step_shortfall_bytes"] > 15 * 2**30  # the model: ~22 GiB
    assert "activations" in finding.facts["largest_component"]
    assert finding.facts["cheapest_change_that_fits"].startswith("micro-batch size 2 -> 1")
    # The memory model's capacity fix, printed as the log's Megatron-LM flags (no --config: the arguments block
    # is the config the user edits). Run as printed on an H100 (fixtures/memory-calibration n28): it ran, and
    # stepped 0.86x of selective recompute (n29), the fix before the dense runs measured both.
    assert finding.changes == [("train.micro_batch_size", 1)]
    assert finding.overrides == ["--micro-batch-size 1"]
    assert not any(key.startswith("_") for key in finding.facts)


def test_an_oom_that_the_config_cannot_explain_says_so(in_repo):
    from offloaddoctor.api import diagnose

    recorded = diagnose(["fixtures/oom-capacity-recorded/job.log"]).findings[0]
    assert "estimate_vs_allocated" not in recorded.facts  # 72.7 GiB allocated, the model ~93 GiB: consistent
    case = "fixtures/oom-partial-optimizer-offload-bridge/"
    composed = diagnose([case + "job.log"], [case + "run_config.yaml"]).findings[0]
    assert "6.6x the memory model's peak" in composed.facts["estimate_vs_allocated"]  # a synthetic 76 GiB message


def test_a_log_is_read_as_diagnose_reads_it_rank_prefixes_and_all(in_repo, tmp_path):
    import gzip

    with gzip.open(RUN, "rt") as log:
        text = log.read()
    prefixed = tmp_path / "rank0.log"
    prefixed.write_text("".join(f"[rank0]: {line}\n" for line in text.splitlines()))
    assert estimate([str(prefixed)]).estimate.peak_allocated_bytes == estimate([RUN]).estimate.peak_allocated_bytes


def test_the_peak_once_the_first_build_is_collected_sits_under_the_peak_it_is_the_same_as(in_repo, tmp_path):
    """The figure is the peak allocated without the optimizer's first build: it said "the same" under the
    nvidia-smi line (t09: 44,187 MiB under nvidia-smi 57,528, which is 13,341 MiB more, not the 6,403 MiB build)."""
    launch = tmp_path / "t09.sh"
    launch.write_text(
        "torchrun --nproc-per-node 2 pretrain_gpt.py --num-layers 16 --hidden-size 4096 --num-attention-heads 32 "
        "--seq-length 2048 --max-position-embeddings 2048 --micro-batch-size 1 --global-batch-size 4 "
        "--vocab-size 32000 --bf16 --use-distributed-optimizer --transformer-impl local "
        "--optimizer-cpu-offload --optimizer-offload-fraction 0.5\n"
    )
    report = estimate([str(launch)])
    collected = report.estimate.peak_allocated_if_collected_bytes
    assert collected < report.estimate.peak_allocated_bytes  # the case: a first build lingers
    lines = invoke(str(launch)).stdout.splitlines()
    row = next(i for i, line in enumerate(lines) if "the same once Python's garbage collector" in line)
    assert lines[row - 1].startswith("Peak allocated")
    assert f"{collected / 2**20:,.0f} MiB" in lines[row]


def test_text_rounds_each_figure_once_so_the_peak_and_its_stage_agree(in_repo, tmp_path):
    """t01's stage 0 peaks at 25,487.46 MiB: rounded to 0.1 first (25,487.5) and then to a whole MiB it read
    25,488 on the Peak allocated line, beside 'stage 0 (25,487 MiB' on the Most loaded line."""
    import re

    from offloaddoctor.byte_units import MIB

    rows = (ROOT / "fixtures/memory-calibration/runs.tsv").read_text().splitlines()
    command = next(row.split("\t")[4] for row in rows if row.startswith("t01-gpt13b-pp2-vpp2-mbs1\t"))
    launch = tmp_path / "t01.sh"
    launch.write_text(command + "\n")
    peak = estimate([str(launch)]).estimate.peak_allocated_bytes
    text = invoke(str(launch), "--gpu", "H200").stdout
    shown = re.search(r"Peak allocated\s+([\d,]+) MiB", text).group(1)
    stage = re.search(r"Most loaded\s+stage 0 \(([\d,]+) MiB", text).group(1)
    total = re.search(r"total \(peak\)\s+([\d,]+)", text).group(1)
    assert shown == stage == total == f"{peak / MIB:,.0f}"


def test_the_share_column_names_its_base(in_repo):
    """The share is of the GPU (or the target), not of the peak: c04 on an H100 totals 23.9 %, not 100 %. A column
    headed 'share' alone read as each component's share of the peak."""
    on_gpu = invoke(RUN, "--gpu", "H100-80GB").stdout
    assert "share of GPU" in on_gpu and "  share  " not in on_gpu
    on_target = invoke(RUN, "--gpu", "H100-80GB", "--target", "12GiB", "--format", "markdown").stdout
    assert "| component | MiB | share of target | how |" in on_target


def test_an_unmeasured_changes_cost_does_not_claim_an_order_the_list_does_not_have(in_repo, tmp_path):
    """When no change fits, the list is ordered by peak, not cost: c10 on a 10 GiB target lists Transformer
    Engine second, above measured optimizer offloading, while its cost said 'so listed after the measured
    changes'."""
    rows = (ROOT / "fixtures/memory-calibration/runs.tsv").read_text().splitlines()
    command = next(row.split("\t")[4] for row in rows if row.startswith("c10-llama-gqa\t"))
    launch = tmp_path / "c10.sh"
    launch.write_text(command + "\n")
    report = estimate([str(launch)], gpu="H100-80GB", target="10GiB")
    assert not any(s.fits for s in report.suggestions)
    assert any("not measured here" in s.cost for s in report.suggestions)
    assert not any("listed after" in s.cost for s in report.suggestions)


def test_a_run_that_fits_its_target_is_offered_only_changes_that_lower_its_peak():
    """e52 (a 40-expert MoE on two H200) peaks in the optimizer step: recompute changes its activations, not its
    peak, so it is not offered; and the list says the run already fits."""
    from offloaddoctor.api import estimate
    from offloaddoctor.render.estimate_view import render_estimate_text

    log = "fixtures/memory-calibration/e52-moe40-ep1-base-h200.log.gz"
    report = estimate([log], gpu="H200", target="100GiB")
    assert report.fits and report.suggestions
    peak = report.estimate.peak_allocated_bytes
    assert all(s.peak_allocated_bytes < peak for s in report.suggestions)
    assert not any("recompute" in s.change for s in report.suggestions)
    assert "It fits; changes that lower the peak further, cheapest first:" in render_estimate_text(report)
