"""A run that trains adapters (LoRA) over a frozen model: its optimizer holds the adapters' state alone, so an
out-of-memory fix offers no optimizer sharding or offloading (held-out flagscale-memrift-lora-…, batch 14)."""

from __future__ import annotations

import pytest

from offloaddoctor.api import diagnose, diagnose_text
from offloaddoctor.scanning.failure_lines import adapter_frame

from tests.conftest import FIXTURES

MEMRIFT = FIXTURES / "held-out" / "flagscale-memrift-lora-llama8b-64k-context-oom-metax"
OOM = (
    "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.55 GiB. GPU 0 has a total capacity of "
    "63.59 GiB of which 2.63 GiB is free. Of the allocated memory 59.02 GiB is allocated by PyTorch, and 210.29 MiB "
    "is reserved by PyTorch but unallocated."
)
MEGATRON_RUN = {"model.transformer_impl": "transformer_engine", "optimizer.use_distributed_optimizer": False}


def test_the_optimizer_lines_of_a_lora_run_out_of_memory_are_left_out_and_the_fix_says_why():
    [finding] = diagnose([str(MEMRIFT / "job.log")], [str(MEMRIFT / "config.yaml")]).findings
    assert finding.id == "oom-capacity"
    # the template's recompute is left out too: FlagScale refuses recompute in a PEFT run
    assert finding.overrides == []
    [note] = finding.fix_sentences  # in place of the summary, which leads with sharding the optimizer
    assert note.startswith("Optimizer settings left out of this fix: the run trains adapters over a frozen model")
    assert "config.yaml:65" in note
    assert note.endswith(
        "`++train.system.recompute_granularity=selective` left out: the run would stop before it trains a step "
        "(flagscale-peft-recompute: Activation recompute in a FlagScale PEFT (LoRA) run)."
    )


def test_a_traceback_through_adapter_code_says_it_without_the_config():
    report = diagnose([str(MEMRIFT / "job.log")])
    assert report.run_facts["trains_adapters"] is True
    [finding] = report.findings
    assert "flagscale/train/peft/lora.py" in finding.fix_sentences[0]
    assert not any("optimizer" in line for line in finding.overrides)


@pytest.mark.parametrize(
    ("setting", "adapters"),
    [
        ({"peft": "lora"}, True),  # Megatron-Bridge
        ({"peft._target_": "megatron.bridge.peft.lora.LoRA"}, True),
        ({"peft_type": "lora"}, True),  # FlagScale
        ({"train_type": "lora"}, True),  # ms-swift
        ({"train_type": "full"}, False),
        ({"peft": None}, False),
        ({}, False),
    ],
)
def test_which_configs_train_adapters(setting, adapters):
    [finding] = diagnose_text(OOM, {**MEGATRON_RUN, **setting}).findings
    offered = any(line.startswith("optimizer.") for line in finding.overrides)
    assert offered is not adapters
    assert ("trains adapters" in " ".join(finding.fix_sentences)) is adapters


def test_a_refusal_keeps_its_optimizer_lines_in_a_lora_run():
    """Only an out-of-memory fix: the lines that settle a refusal of the optimizer's settings stay."""
    text = (
        "AssertionError: The optimizer cpu offload must be used in conjunction with `--use-precision-aware-optimizer`, "
        "as the hybrid device optimizer reuses the code path of this flag."
    )
    settings = {"optimizer.optimizer_cpu_offload": True, "optimizer.use_precision_aware_optimizer": False}
    [finding] = diagnose_text(text, {**settings, "peft": "lora"}).findings
    assert finding.id == "optimizer-offload-precision-aware"
    assert "optimizer.use_precision_aware_optimizer=True" in finding.overrides
    assert "trains adapters" not in " ".join(finding.fix_sentences)


@pytest.mark.parametrize(
    ("header", "adapters"),
    [
        ('  File "/x/flagscale/train/peft/lora.py", line 46, in forward', True),
        ('  File "/opt/megatron/bridge/peft/lora.py", line 120, in forward', True),
        ('  File "/usr/lib/python3/site-packages/peft/tuners/lora/layer.py", line 9, in forward', True),
        ('  File "/root/swift/tuners/lora.py", line 9, in forward', True),
        ('  File "/x/megatron/core/transformer/mlp.py", line 9, in forward', False),
        ('  File "/x/explora/model.py", line 9, in forward', False),
    ],
)
def test_adapter_frames(header, adapters):
    assert adapter_frame(header) is adapters


SEQ9728 = FIXTURES / "held-out" / "flagscale-lora-llama8b-seq9728-oom-output-layer"


def test_an_oom_in_megatrons_road_for_a_frozen_weight_leaves_out_the_optimizer_and_says_where():
    """Held-out batch 16 (first read: right, with the distributed optimizer and offloading first in its fix): the LoRA
    run's output layer ran out of memory in `linear_with_frozen_weight`, megatron-core's road for a weight that takes no
    gradient, and neither its config nor its traceback names adapters."""
    report = diagnose([str(SEQ9728 / "job.log")], [str(SEQ9728 / "config.sh")])
    assert report.run_facts["frozen_weight_in_traceback"] is True and "trains_adapters" not in report.run_facts
    [finding] = report.findings
    assert finding.id == "oom-capacity"
    assert not any(line.split("=")[0].startswith(("optimizer.", "ddp.")) for line in finding.overrides)
    [note] = finding.fix_sentences
    assert "job.log:215" in note and "where the frozen part is the bulk of the model" in note


@pytest.mark.parametrize(
    ("header", "frozen"),
    [
        ('  File "/opt/megatron/core/tensor_parallel/layers.py", line 435, in linear_with_frozen_weight', True),
        ('  File "/opt/megatron/core/tensor_parallel/layers.py", line 956, in _forward_impl', False),
        ('  File "/x/train.py", line 9, in linear_with_frozen_weight_stats', False),
    ],
)
def test_which_frames_are_megatrons_road_for_a_frozen_weight(header, frozen):
    from offloaddoctor.scanning.failure_lines import frozen_weight_frame

    assert frozen_weight_frame(header) is frozen


def test_a_real_oom_through_a_frozen_weight_is_read_so_its_optimizer_lines_free_nothing_and_its_fix_trained():
    """b78-b80 (one H100, megatron-core 0.19.0, planned in benchmarks/build_oom_plan.json): a GPT frozen but its layer
    norms, its tied output layer frozen with the embedding, under an 11,000 MiB limit. b78 ran out of memory in the
    output layer through linear_with_frozen_weight; b79, with the distributed optimizer and all of the optimizer
    offloaded, ran out there again asking the same 3.91 GiB; b80, b78 with the line diagnose prints, trained."""
    from tests.memory.recorded import LAUNCHES, trained

    stopped = FIXTURES / "memory-calibration" / "out-of-memory"
    reports = {
        run: diagnose([str(stopped / f"{run}.log.gz")])
        for run in ("b78-gpt-v256k-frozen-cap11g-oom", "b79-gpt-v256k-frozen-cap11g-offload-all")
    }
    for report in reports.values():
        assert report.run_facts["frozen_weight_in_traceback"] is True
        [finding] = report.findings
        assert round(finding.facts["requested_bytes"] / 2**30, 2) == 3.91
        assert not any(line.startswith(("--use-distributed", "--optimizer")) for line in finding.overrides)
    [b78] = reports["b78-gpt-v256k-frozen-cap11g-oom"].findings
    assert b78.overrides == ["--micro-batch-size 1"] and "peak 6,433 MiB" in b78.facts["cheapest_change_that_fits"]
    assert "--optimizer-offload-fraction 1" in LAUNCHES["b79-gpt-v256k-frozen-cap11g-offload-all"]
    fixed = "b80-gpt-v256k-frozen-mbs1-cap11g-advised"
    assert trained(fixed) and "--micro-batch-size 1 " in LAUNCHES[fixed]
