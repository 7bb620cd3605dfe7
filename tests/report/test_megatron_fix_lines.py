"""Megatron settings in a fix are left out where nothing shows a Megatron run (a bare torch OOM pasted alone), and
kept where the message matched is one only Megatron raises (a Bridge `validate()` traceback, a pasted assert)."""

from __future__ import annotations

from offloaddoctor.api import diagnose, diagnose_text

from tests.conftest import FIXTURES

TORCH_OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.18 GiB "
    "of which 1.00 GiB is free. Including non-PyTorch memory, this process has 78.00 GiB memory in use. Of the "
    "allocated memory 70.00 GiB is allocated by PyTorch, and 1.00 GiB is reserved by PyTorch but unallocated."
)


def test_a_torch_oom_alone_gets_no_megatron_settings():
    [finding] = diagnose_text(TORCH_OOM).findings
    assert finding.overrides == ["export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"]
    assert finding.fix_note.startswith("Megatron settings left out of this fix")


def test_a_message_only_megatron_raises_keeps_its_fix_without_a_config():
    bridge = FIXTURES / "bridge-0.3.1"
    [pp] = diagnose([str(bridge / "validate-error-pp2-offload-layers-0.log")]).findings
    assert pp.id == "pp-cpu-offload" and "model.cpu_offloading=False" in pp.overrides
    assert "left out" not in pp.fix_note
    [fine] = diagnose([str(bridge / "validate-error-fine-grained-local.log")]).findings
    assert fine.overrides == ["model.fine_grained_activation_offloading=False"]


def test_megatrons_start_up_lines_show_a_megatron_run():
    """Megatron-Bridge#771 (fixtures/held-out): NCCL's OOM right after `Training ...`, with Megatron's set-up lines
    but no arguments block or iteration line; the fix was once left without its Megatron settings."""
    case = FIXTURES / "held-out" / "mbridge-llama3-8b-fp8-nccl-oom"
    [finding] = diagnose([str(case / "job.log")]).findings
    assert "left out" not in finding.fix_note
    assert "optimizer.use_distributed_optimizer=True" in finding.overrides
    for line in ("[after dataloaders are built] datetime: 2025-09-24 16:15:24", "done with setup ..."):
        [with_line] = diagnose_text(f"{line}\n{TORCH_OOM}").findings
        assert "left out" not in with_line.fix_note


def test_a_traceback_through_megatrons_training_code_shows_a_megatron_run():
    frames = (
        "Traceback (most recent call last):\n"
        '  File "/workspace/Megatron-LM/megatron/training/training.py", line 2076, in setup_model_and_optimizer\n'
        "    model = _build_model_wrapper(wrap_with_ddp)\n"
    )
    [finding] = diagnose_text(frames + TORCH_OOM).findings
    assert "left out" not in finding.fix_note


def test_an_fp16_runs_optimizer_offloading_fix_brings_the_fp32_gradients_the_precision_aware_optimizer_needs():
    """Held-out A10G log (fp16, Megatron-LM): the fix from the OOM message's figures offloads the optimizer with the
    precision-aware optimizer, whose gradient clipping asserts fp32 or bf16 gradients: on an H100 the fp16 run so
    offloaded stopped at its first step (n117) and trained with --accumulate-allreduce-grads-in-fp32 (n120)."""
    log = FIXTURES / "held-out" / "megatron-lm-gpt2.6b-tp2pp4-a10g-seq8192-oom-in-vocab-parallel-ce" / "job.log"
    [finding] = diagnose([str(log)]).findings
    assert {"--use-precision-aware-optimizer", "--accumulate-allreduce-grads-in-fp32"} <= set(finding.overrides)
    assert ("ddp.grad_reduce_in_fp32", True) in finding.changes
    assert "`--accumulate-allreduce-grads-in-fp32` added: without it the run would stop before it trains a step " in (
        finding.fix_note
    )


def test_a_loss_scale_in_the_iteration_lines_says_fp16_where_nothing_else_says_the_precision():
    """Held-out V100 log (no arguments block; `loss scale: 268435456.0` in its iteration lines, fp16's dynamic loss
    scaling): its offloading fix takes the fp32 gradients an fp16 run's precision-aware optimizer needs (b100 stopped
    at its first step without them). A bf16 run prints loss scale 1.0, which says nothing."""
    log = FIXTURES / "held-out" / "megatron-lm-gpt2-2.6b-v100-backward-allreduce-oom" / "job.log"
    [finding] = diagnose([str(log)]).findings
    assert finding.overrides[-2:] == ["--use-precision-aware-optimizer", "--accumulate-allreduce-grads-in-fp32"]
    iteration = (
        " iteration        3/     100 | consumed samples:           48 | elapsed time per iteration (ms): 900.1 |"
        " learning rate: 1.0E-04 | global batch size:    16 | lm loss: 9.1E+00 | loss scale: {} | grad norm: 3.2 |"
    )
    oom = (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
        "79.18 GiB of which 1.00 GiB is free. Of the allocated memory 76.00 GiB is allocated by PyTorch, and 512.00 "
        "MiB is reserved by PyTorch but unallocated."
    )
    megatron = {"model.transformer_impl": "local"}
    for scale, fp16 in (("65536.0", True), ("1.0", False)):
        [finding] = diagnose_text(iteration.format(scale) + "\n" + oom, megatron).findings
        assert (("ddp.grad_reduce_in_fp32", True) in finding.changes) is fp16, scale
