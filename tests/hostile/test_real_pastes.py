"""Real pastes from public threads that the report got wrong or missed (each fixture's SOURCE.md names its
thread): a VPP that does not divide an even split, caught only when the model is built; activation offloading
with nothing selected to offload; one allocation larger than the whole GPU; watchdog lines whose only rank is
the one their message names."""

from __future__ import annotations

import re


import pytest

from offloaddoctor.api import diagnose, diagnose_text
from offloaddoctor.cli import app
from offloaddoctor.logs.normalize import rank_in_message

from tests.conftest import FIXTURES, RUNNER
from tests.memory.recorded import LAUNCHES, trained


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


@pytest.mark.parametrize(
    ("case", "times"),
    [
        ("te-megatron-unfused-attention-fallback-oom-4096gib", "52x"),  # TransformerEngine#3006: a mask built whole
        ("megatron-deepspeed-dataloader-bug-attention-mask-oom-37631gib", "475x"),  # a data-loader bug's shape
    ],
)
def test_a_request_ten_times_the_gpu_or_more_is_a_tensor_sized_wrongly_not_a_capacity_limit(case, times):
    """Held-out batch 13: no OOM signature claims it (oom-capacity's "genuine capacity limit" misled); the OOM line is
    the failure shown, and the note says a tensor was sized wrongly."""
    report = diagnose([str(FIXTURES / "held-out" / case / "job.log")])
    assert report.findings == []
    assert "Tried to allocate" in report.unmatched.text
    [note] = [n for n in report.notes if "no shortage of this run's memory" in n]
    assert f"is {times} all the memory the process may use" in note and "a tensor sized wrongly" in note


def test_a_request_just_under_ten_times_the_gpu_is_still_the_runs_capacity():
    text = (FIXTURES / "excerpt-oom-larger-than-gpu" / "job.log").read_text()
    capacity = float(re.search(r"total capac\w* of ([\d.]+) GiB", text).group(1))
    [finding] = diagnose_text(text.replace("355.43 GiB", f"{capacity * 9.9:.2f} GiB")).findings
    assert finding.id == "oom-capacity" and "larger than all the memory" in finding.fix_note
    assert diagnose_text(text.replace("355.43 GiB", f"{capacity * 10.01:.2f} GiB")).findings == []


def test_an_allocation_within_the_gpu_keeps_its_fixes():
    text = (FIXTURES / "excerpt-oom-larger-than-gpu" / "job.log").read_text().replace("355.43 GiB", "35.43 GiB")
    [finding] = diagnose_text(text).findings
    assert "larger than all the memory" not in finding.fix_note


def test_the_ranks_of_watchdog_lines_without_a_launcher_prefix_are_the_ones_their_messages_name():
    report = diagnose([str(FIXTURES / "excerpt-nccl-watchdog-message-ranks" / "job.log")])
    [finding] = report.findings
    assert sorted({e.rank for e in finding.evidence}) == [2, 3, 4, 6]


@pytest.mark.parametrize(
    ("line", "rank"),
    [
        ("[E ProcessGroupNCCL.cpp:475] [Rank 2] Watchdog caught collective operation timeout", 2),
        ("  what():  [PG 1 Rank 5] Process group watchdog thread terminated with exception: [Rank 5] Watchdog", 5),
        ("[PG ID 0 PG GUID 0(default_pg) Rank 7] Process group watchdog thread terminated", 7),
        ("Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE)", None),
        ("[Ranks 3] not a rank", None),
    ],
)
def test_the_rank_a_message_names_as_its_own(line, rank):
    assert rank_in_message(line) == rank


def test_a_launcher_prefix_still_wins_over_the_rank_in_the_message():
    [finding] = diagnose_text(
        "[rank1]:[E1122 10:51:25 ProcessGroupNCCL.cpp:632] [Rank 7] Watchdog caught collective operation timeout: x"
    ).findings
    assert [e.rank for e in finding.evidence] == [1]


def test_another_ranks_frames_after_an_exception_do_not_take_the_failure_line():
    report = diagnose([str(FIXTURES / "excerpt-interleaved-frames-other-rank" / "job.log")])
    assert report.findings == []
    assert report.unmatched is not None
    assert (report.unmatched.rank, report.unmatched.text) == (
        15,
        "AssertionError: num_layers should be divisible by pipeline_model_parallel_size",
    )


def test_the_same_ranks_frames_after_its_error_line_still_do():
    text = "\n".join(
        [
            "[rank3]: RuntimeError: first failure",
            '[rank3]:   File "/workspace/train.py", line 12, in step',
            "[rank3]:     raise ValueError(bad_shape)",
        ]
    )
    assert diagnose_text(text).unmatched.text == "raise ValueError(bad_shape)"


# The head of https://github.com/NVIDIA/Megatron-LM/issues/935 as pasted: c10's C++ frames, then the NCCL error.
C10_FRAMES_THEN_NCCL = """\
frame #0: c10::Error::Error(c10::SourceLocation, std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >) + 0x99 (0x7fe76ab98969 in /usr/local/lib/python3.10/dist-packages/torch/lib/libc10.so)
frame #1: c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(std::optional<std::chrono::duration<long, std::ratio<1l, 1000l> > >) + 0x1e1 (0x7fe705ea04e1 in /usr/local/lib/python3.10/dist-packages/torch/lib/libtorch_cuda.so)
frame #2: c10d::ProcessGroupNCCL::watchdogHandler() + 0x222 (0x7fe705ea81a2 in /usr/local/lib/python3.10/dist-packages/torch/lib/libtorch_cuda.so)

terminate called after throwing an instance of 'c10::DistBackendError'
"""


def test_a_c10_stack_frame_is_no_failure_line():
    report = diagnose_text(C10_FRAMES_THEN_NCCL)
    assert [f.signature.id for f in report.findings] == ["nccl-collective-failure"]
    assert report.unmatched is None  # before: `frame #0: c10::Error::Error(…)` was "the most likely cause"


def test_cublas_failing_to_allocate_its_handle_is_the_out_of_memory_it_is():
    report = diagnose([str(FIXTURES / "excerpt-oom-nccl-cublas" / "job.log")])
    assert [f.signature.id for f in report.findings] == ["oom-capacity"]
    assert report.unmatched is None  # before: the CUBLAS_STATUS_ALLOC_FAILED line, "explained by no signature"


def test_hybrid_device_optimizers_keyerror_pasted_without_its_header_is_named():
    """Megatron-LM#4042's paste: two frames of hybrid_optimizer.py and the KeyError, no traceback header, no config."""
    [finding] = diagnose([str(FIXTURES / "excerpt-hdo-keyerror" / "job.log")]).findings
    assert (finding.signature.id, finding.config.verdict) == ("optimizer-offload-hdo-keyerror", "unknown")


def test_the_recorded_keyerror_is_confirmed_and_its_fix_is_the_run_that_trained():
    """n76 (one H100, offloading 0.5 in bf16 without the distributed or precision-aware optimizer) stopped at its first
    step on the KeyError; the fix printed is the pair of flags n78 ran with, and trained. n77 (the distributed
    optimizer alone) trained too, which is why the verdict turns on that key."""
    calibration = FIXTURES / "memory-calibration"
    report = diagnose([str(calibration / "refused" / "n76-gpt1b-f050-precision-aware-off.log.gz")])
    first = report.findings[0]
    assert (first.signature.id, first.config.verdict) == ("optimizer-offload-hdo-keyerror", "confirmed")
    assert first.overrides == ["--use-distributed-optimizer", "--use-precision-aware-optimizer"]
    fixed = LAUNCHES["n78-gpt1b-f050-precision-aware-distopt"]
    assert all(flag in fixed for flag in first.overrides) and "ODR_PRECISION_AWARE_OFF" not in fixed
    assert "ODR_PRECISION_AWARE_OFF=1" in LAUNCHES["n77-gpt1b-f050-precision-aware-off-distopt"]
    for run in ("n77-gpt1b-f050-precision-aware-off-distopt", "n78-gpt1b-f050-precision-aware-distopt"):
        assert not diagnose([str(calibration / f"{run}.log.gz")]).findings


def test_an_fp32_model_offloading_its_optimizer_is_told_to_train_in_bf16_and_that_launch_trained():
    """n104 and n105 (one H100, n16's GPT without --bf16, offloading 0.5 and 1.0) were refused at the optimizer's build
    with torch's "can't optimize a non-leaf Tensor" (Megatron-LM#6212); the fix printed is --bf16, and n104's launch
    with it (n106) trained. The same line without the config's precision, or from a bf16 model, is the fp32-parameter
    signature's, whose fix is a Megatron-Core with the upstream fix, not --bf16."""
    calibration = FIXTURES / "memory-calibration"
    for refused in ("n104-gpt1b-fp32-f050", "n105-gpt1b-fp32-f100"):
        [finding] = diagnose([str(calibration / "refused" / f"{refused}.log.gz")]).findings
        assert (finding.signature.id, finding.config.verdict) == ("optimizer-offload-fp32-model", "confirmed")
        assert finding.overrides == ["--bf16"]
    advised = "n106-gpt1b-fp32-f050-bf16-advised"
    assert LAUNCHES[advised].split() == [*LAUNCHES["n104-gpt1b-fp32-f050"].split(), "--bf16"]
    assert trained(advised, iterations=14) and not diagnose([str(calibration / f"{advised}.log.gz")]).findings
    [unknown_precision] = diagnose_text("[rank0]: ValueError: can't optimize a non-leaf Tensor\n").findings
    assert unknown_precision.signature.id == "optimizer-offload-fp32-params"
    assert "--bf16" not in unknown_precision.overrides and "#6982" in unknown_precision.signature.fix.summary


def test_an_fp16_run_offloading_its_optimizer_is_told_to_accumulate_gradients_in_fp32_and_that_launch_trained():
    """n117 (one H100, n16's GPT in fp16 offloading 0.5) stopped at its first step on a bare AssertionError raised by
    clip_grads.py's `assert param.decoupled_grad.dtype in [torch.float32, torch.bfloat16]`: the signature knows it by
    that assert, the config confirms it, and the fix printed, --accumulate-allreduce-grads-in-fp32, is n120's launch,
    which trained in fp16 (as n118 in bf16 and n119 without clipping did)."""
    calibration = FIXTURES / "memory-calibration"
    [finding] = diagnose([str(calibration / "refused" / "n117-gpt1b-fp16-f050.log.gz")]).findings
    assert (finding.signature.id, finding.config.verdict) == ("precision-aware-fp16-gradients", "confirmed")
    assert finding.overrides == ["--accumulate-allreduce-grads-in-fp32"]
    assert finding.evidence[0].text.startswith("AssertionError, raised by `assert param.decoupled_grad.dtype in")
    failed = LAUNCHES["n117-gpt1b-fp16-f050"]
    assert "--fp16" in failed.split() and "--clip-grad" not in failed
    assert LAUNCHES["n120-gpt1b-fp16-f050-grads-fp32"] == f"{failed} --accumulate-allreduce-grads-in-fp32"
    for run in ("n118-gpt1b-fp16-f050-bf16-advised", "n119-gpt1b-fp16-f050-no-clip", "n120-gpt1b-fp16-f050-grads-fp32"):
        assert trained(run) and not diagnose([str(calibration / f"{run}.log.gz")]).findings


def test_a_recorded_allocation_larger_than_the_gpu_quotes_no_offloading_or_recompute_and_its_advice_as_it_ran():
    """n79 (one H100): 128.00 GiB asked of 79.18 GiB. No memory setting, no offload fraction or its slowdown, no
    recompute or activation offloading as the way on; the cheapest change that fits the step stays: micro-batch
    16 -> 1, with expandable segments. Without them (n80) it ran out of memory in its first backward, on
    fragmentation: that report says so and leads with expandable segments; with them (n81, the change as printed now)
    it trained."""
    recorded = FIXTURES / "memory-calibration"
    [finding] = diagnose(
        [str(recorded / "out-of-memory" / "n79-gpt-s16k-mbs16-one-allocation-over-the-gpu.log.gz")]
    ).findings
    assert (finding.signature.id, finding.overrides) == ("oom-capacity", [])
    assert finding.fix_note.startswith("One allocation of 128.00 GiB is larger than all the memory")
    assert not {"offload_fraction_needed", "expected_slowdown"} & set(finding.facts)
    assert not any("recompute" in str(value) for key, value in finding.facts.items() if key != "largest_component")
    assert "of attention-score gradients during a layer's backward" in finding.facts["largest_component"]
    assert finding.facts["cheapest_change_that_fits"].startswith(
        "micro-batch size 16 -> 1 (same global batch, more micro-batches), with expandable segments: peak "
    )
    [then] = diagnose([str(recorded / "out-of-memory" / "n80-gpt-s16k-mbs1-advised.log.gz")]).findings
    assert then.signature.id == "oom-fragmentation"
    assert then.overrides[0] == "export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"
    assert LAUNCHES["n81-gpt-s16k-mbs1-expandable-advised"].startswith(
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
    )
    assert not diagnose([str(recorded / "n81-gpt-s16k-mbs1-expandable-advised.log.gz")]).findings


def test_a_data_loader_worker_killed_by_the_host_is_the_host_memory_finding_only_where_the_optimizer_is_offloaded():
    """Megatron-LM#1657's paste: the kernel killed a data-loader worker (torch's `is killed by signal: Killed.`). That
    run offloaded nothing: the line stays unexplained. With optimizer offloading on, it is the host-memory finding: the
    workers keep what the rank frees and writes after the fork (fixtures/memory-calibration/host-memory)."""
    job = str(FIXTURES / "excerpt-dataloader-worker-killed" / "job.log")
    plain = diagnose([job])
    assert not plain.findings and "is killed by signal: Killed." in plain.unmatched.text
    offloading = ["optimizer.optimizer_cpu_offload=True", "optimizer.optimizer_offload_fraction=1.0"]
    [finding] = diagnose([job], overrides=offloading).findings
    assert (finding.signature.id, finding.config.verdict) == ("optimizer-offload-host-memory", "confirmed")


@pytest.mark.parametrize(
    "case",
    [
        "megatron-deepspeed-summit-gpt1.3b-fp16-optimizer-init-oom",  # four ranks' tracebacks, interleaved
        "megatron-lm-deepspeed-zero2-dp1-oom-at-optimizer-init",
    ],
)
def test_an_oom_while_the_optimizer_is_built_is_offered_nothing_that_acts_on_activations(case):
    """Held-out batch 14: DeepSpeed allocated Adam's moments at its optimizer's construction, before any step. The
    Summit case was offered selective recompute; now no recompute, micro-batch or activation-offloading line."""
    [finding] = diagnose([str(FIXTURES / "held-out" / case / "job.log")]).findings
    assert finding.id == "oom-capacity"
    assert finding.facts["raised_while_building_the_optimizer"] == "_configure_optimizer"
    assert finding.overrides == []
    assert finding.fix_sentences[0].startswith("The OOM was raised while the optimizer was being built")


def test_an_oom_while_the_optimizer_is_built_keeps_the_memory_models_optimizer_change():
    """b03 and n131 (recorded: megatron-core's get_megatron_optimizer): the memory model's change is the optimizer's,
    and it stays as it was."""
    recorded = FIXTURES / "memory-calibration" / "out-of-memory"
    for run, first in (
        ("b03-gpt5b-pp2-cap28", "--optimizer-cpu-offload"),
        ("n131-gpt8b-f100-full-precision-aware-off-does-not-fit", "--use-precision-aware-optimizer"),
    ):
        [finding] = diagnose([str(recorded / f"{run}.log.gz")]).findings
        assert finding.facts["raised_while_building_the_optimizer"] == "get_megatron_optimizer"
        assert first in finding.overrides
        assert finding.fix_sentences[0].startswith("The memory model's cheapest single change")


def test_a_megatron_oom_while_the_optimizer_is_built_drops_only_the_activation_lines():
    text = "\n".join(
        [
            "[rank0]: Traceback (most recent call last):",
            '[rank0]:   File "/m/megatron/training/training.py", line 700, in setup_model_and_optimizer',
            "[rank0]:     optimizer = get_megatron_optimizer(config, model)",
            '[rank0]:   File "/m/megatron/core/optimizer/__init__.py", line 500, in get_megatron_optimizer',
            "[rank0]:     optimizer = _get_megatron_optimizer_based_on_param_groups(",
            "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity "
            "of 79.18 GiB of which 512.00 MiB is free. Including non-PyTorch memory, this process has 78.66 GiB memory "
            "in use. Of the allocated memory 77.90 GiB is allocated by PyTorch, and 200.00 MiB is reserved by PyTorch "
            "but unallocated.",
        ]
    )
    [finding] = diagnose_text(text, {"optimizer.use_distributed_optimizer": False}).findings
    assert finding.facts["raised_while_building_the_optimizer"] == "get_megatron_optimizer"
    assert finding.overrides and not any("recompute" in line or "micro_batch" in line for line in finding.overrides)
    assert any(line.startswith("optimizer.") for line in finding.overrides)


def test_full_recompute_did_not_help_an_oom_raised_while_the_optimizer_was_built():
    """b77 (two H200s under a 28 GiB card's limit; planned in benchmarks/build_oom_plan.json): b03 with full recompute,
    the most an activation line saves, ran out of memory again in get_megatron_optimizer, asking what b03 asked."""
    recorded = FIXTURES / "memory-calibration" / "out-of-memory"
    asked = []
    for run in ("b03-gpt5b-pp2-cap28", "b77-gpt5b-pp2-full-recompute-cap28"):
        [finding] = diagnose([str(recorded / f"{run}.log.gz")]).findings
        assert finding.facts["raised_while_building_the_optimizer"] == "get_megatron_optimizer"
        asked.append(finding.facts["requested_bytes"])
    assert asked[0] == asked[1]
    assert LAUNCHES["b77-gpt5b-pp2-full-recompute-cap28"] == (
        f"{LAUNCHES['b03-gpt5b-pp2-cap28']} --recompute-granularity full --recompute-method uniform --recompute-num-layers 1"
    )


def test_nccls_own_allocation_failing_while_the_job_is_set_up_is_the_cause_and_its_echoes_are_not_a_finding():
    """Held-out batch 17 (first read: misleading, nccl-collective-failure): on two nodes, rank 0's process group
    creation (initialize_megatron -> initialize_model_parallel) failed with a DistBackendError whose message ends in
    NCCL's `Failed to CUDA calloc async 4 bytes` (the GPU was already taken); every other NCCL error followed. The
    message's lines belong to the exception raised in start-up, so the OOM is no shortage of the run's, the NCCL
    errors are its echo, and the failure shown is rank 0's."""
    case = FIXTURES / "held-out" / "megatron-deepspeed-2node-nccl-init-calloc-failure"
    report = diagnose([str(case / "job.log")])
    assert report.findings == [] and report.run_facts["oom_in_start_up"] is True
    assert (report.unmatched.line, report.unmatched.rank) == (55, 0)
    [note] = [note for note in report.notes if "no shortage of this run's memory" in note]
    assert note.startswith(f"{case / 'job.log'}:58: ") and "raised in initialize_megatron" in note


def test_an_oom_while_the_optimizer_is_built_is_capacity_whatever_its_request():
    """Held-out batch 17 (right with its launch script; from the log alone, oom-fragmentation): a ZeRO-0 run's FusedAdam
    allocating its moments at initialisation asked 130 MiB with 738 MiB free in pieces. What the build allocated stays
    and the step's gradients and activations come on top, as for the model's build: capacity."""
    case = FIXTURES / "held-out" / "megatron-deepspeed-v100-tp4-zero0-optimizer-state-oom"
    [finding] = diagnose([str(case / "job.log")]).findings
    assert finding.id == "oom-capacity" and finding.facts["fragmentation_suspected"] is False
    assert (
        "raised while the optimizer was being built (in _configure_optimizer)"
        in finding.facts["fragmentation_arithmetic"]
    )


def test_nccls_warnings_before_a_start_up_oom_are_that_failure_not_a_capacity_limit():
    """Held-out batch 18 (first read: misleading, oom-capacity): on the first node every rank's NCCL warned `Cuda
    failure 2 'out of memory'` / `Failed to CUDA calloc async 16 bytes` (the GPUs were held by vLLM workers), then
    raised the DistBackendError its process-group creation's traceback ends in. The warnings are that start-up
    failure: no shortage of the run's memory, no finding of their own."""
    case = FIXTURES / "held-out" / "megatron-deepspeed-2node-nccl-init-oom-gpus-held-by-vllm"
    report = diagnose([str(case / "job.log")])
    assert report.findings == [] and report.run_facts["oom_in_start_up"] is True
    assert report.unmatched.text.startswith("torch.distributed.DistBackendError") and report.unmatched.rank == 3
    assert any("no shortage of this run's memory" in note for note in report.notes)


def test_nccl_errors_of_other_ranks_after_an_exception_no_signature_explains_are_its_echo():
    """Held-out batch 18 (first read: misleading, nccl-collective-failure): one node's rank died of a FileNotFoundError
    (a dataset index cache built on the other node only); the other node's NCCL then said its peer closed the
    connection. The exception is the failure shown; the NCCL lines are said to follow from it."""
    case = FIXTURES / "held-out" / "megatron-deepspeed-2node-missing-index-cache-on-remote-node"
    report = diagnose([str(case / "job.log")])
    assert report.findings == []
    assert report.unmatched.text.startswith("FileNotFoundError") and report.unmatched.rank == 4
    [note] = [note for note in report.notes if "follow from it" in note]
    assert note.startswith(f"{case / 'job.log'}:71: the NCCL errors after this failure (from line 104)")
