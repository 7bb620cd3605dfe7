"""An OOM raised while the model is being built is capacity, and its fix spreads the parameters
(scanning/oom.py raised_while_building, parameters_over_the_gpu; ms-swift#9191 in fixtures/held-out)."""

from __future__ import annotations

import pytest

from offloaddoctor.api import diagnose, diagnose_text
from offloaddoctor.policy import Policy
from tests.conftest import FIXTURES

# The last frames and the message of ms-swift#9191 (GLM-5.1 on 139.81 GiB cards), as pasted.
OOM = (
    "[rank97]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 48.00 MiB. GPU 1 has a total capacity of "
    "139.81 GiB of which 22.44 MiB is free. Including non-PyTorch memory, this process has 139.78 GiB memory in use. "
    "Of the allocated memory 138.20 GiB is allocated by PyTorch, and 40.42 MiB is reserved by PyTorch but unallocated."
)
FRAMES = {
    "build_module": '  File "/usr/local/lib/python3.12/site-packages/megatron/core/transformer/spec_utils.py", line 119, in build_module\n    return module(',
    "get_model": '  File "/workspace/Megatron-LM/megatron/training/training.py", line 1706, in get_model\n    model = model_provider_func(',
    "provide_distributed_model": '  File "/opt/Megatron-Bridge/src/megatron/bridge/models/model_provider.py", line 107, in provide_distributed_model\n    model = get_model(',
}
TRAINING_FRAME = '  File "/workspace/Megatron-LM/megatron/core/pipeline_parallel/schedules.py", line 300, in forward_step\n    output_tensor = model(tokens)'


def _log(frame: str) -> str:
    lines = ["Traceback (most recent call last):", *frame.splitlines(), OOM]
    return "\n".join(f"[rank97]: {line}" if not line.startswith("[rank97]") else line for line in lines)


@pytest.mark.parametrize("function", sorted(FRAMES))
def test_a_covered_request_raised_while_building_the_model_is_capacity(function):
    report = diagnose_text(_log(FRAMES[function]))
    (finding,) = report.findings
    assert finding.signature.id == "oom-capacity"
    assert finding.facts["fragmentation_suspected"] is False
    assert finding.facts["raised_while_building_the_model"] == function
    assert f"raised while the model was being built (in {function})" in finding.facts["fragmentation_arithmetic"]


def test_the_same_request_raised_in_training_is_fragmentation():
    lines = ["Traceback (most recent call last):", *TRAINING_FRAME.splitlines(), OOM]
    report = diagnose_text("\n".join(f"[rank97]: {line}" if not line.startswith("[") else line for line in lines))
    (finding,) = report.findings
    assert finding.signature.id == "oom-fragmentation"
    assert "raised_while_building_the_model" not in finding.facts


def test_a_build_oom_is_offered_no_optimizer_or_recompute_lines():
    report = diagnose_text(
        _log(FRAMES["get_model"]),
        {"model.tensor_model_parallel_size": 8, "model.pipeline_model_parallel_size": 2},
    )
    (finding,) = report.findings
    assert finding.overrides == []
    assert "does not fit this layout (TP 8, PP 2)" in finding.fix_note
    assert "cannot help" in finding.fix_note


def test_the_held_out_paste_reads_as_capacity_with_the_layout_its_script_gives():
    case = FIXTURES / "held-out" / "swift-glm5-tp64-init-oom"
    report = diagnose([str(case / "job.log")], [str(case / "config.sh")], policy=Policy())
    (finding,) = report.findings
    assert finding.signature.id == "oom-capacity"
    assert finding.overrides == []
    assert "(TP 64, PP 2, EP 4)" in finding.fix_note


def test_a_fix_never_moves_full_recompute_down_to_selective():
    """The generic capacity fix names selective recompute; a run that recomputes in full has more than that."""
    message = (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB. GPU 0 has a total capacity of 79.18 "
        "GiB of which 680.19 MiB is free. Including non-PyTorch memory, this process has 78.51 GiB memory in use. Of "
        "the allocated memory 76.00 GiB is allocated by PyTorch, and 0 bytes is reserved by PyTorch but unallocated."
    )
    full = diagnose_text(message, {"model.recompute_granularity": "full"})
    none = diagnose_text(message, {"model.use_distributed_optimizer": False})
    assert not any("recompute" in line for line in full.findings[0].overrides)
    assert any("recompute_granularity=selective" in line for line in none.findings[0].overrides)


CALIBRATION = FIXTURES / "memory-calibration"
BUILD_OOMS = {
    # log -> the run that trained with the lines diagnose prints for it
    "b01-gpt5b-dp2-cap28-build-oom": "b06-gpt5b-pp2-sel-offload-cap28-advised",
    "b02-gpt5b-dp2-offload-cap28-build-oom": "b05-gpt5b-tp2-offload-cap28-advised",
}


def _launch_command(run: str) -> str:
    """The run's command as runs.tsv keeps it (its last column)."""
    rows = (CALIBRATION / "runs.tsv").read_text().splitlines()
    return next(row.split("\t")[-1] for row in rows if row.split("\t")[0] == run)


@pytest.mark.parametrize("log", sorted(BUILD_OOMS))
def test_a_real_build_oom_is_capacity_and_its_printed_lines_are_what_trained(log):
    """b01/b02: two ranks out of memory in megatron-core 0.19.0's _build_model_wrapper (the fp32 gradient buffer);
    the lines diagnose prints, spreading the parameters first, are the flags of the run that trained (b06, b05)."""
    report = diagnose([str(CALIBRATION / "out-of-memory" / f"{log}.log.gz")], policy=Policy())
    (finding,) = [f for f in report.findings if f.signature.id.startswith("oom-")]
    assert finding.signature.id == "oom-capacity"
    assert finding.facts["raised_while_building_the_model"] == "_build_model_wrapper"
    assert finding.overrides[0].startswith(("--pipeline-model-parallel-size", "--tensor-model-parallel-size"))
    trained = _launch_command(BUILD_OOMS[log])
    for line in finding.overrides:
        flag, _, value = line.partition(" ")
        assert f"{flag} {value}".strip() in trained


def test_the_oom_after_the_build_is_not_called_a_build_oom():
    """b03 (PP 2) got past the build and ran out of memory at the optimizer's fp32 copies."""
    report = diagnose([str(CALIBRATION / "out-of-memory" / "b03-gpt5b-pp2-cap28.log.gz")], policy=Policy())
    (finding,) = [f for f in report.findings if f.signature.id.startswith("oom-")]
    assert "raised_while_building_the_model" not in finding.facts


def test_another_error_raised_while_building_keeps_its_own_fix():
    """cpu-offload-requires-te is refused inside the model build too: only an out-of-memory error is judged by it."""
    case = FIXTURES / "cpu-offload-requires-te"
    (finding,) = diagnose([str(case / "job.log")], policy=Policy()).findings
    assert "raised_while_building_the_model" not in finding.facts
    assert finding.overrides == ["--cpu-offloading-num-layers 0"]


# The start-up frames of the held-out bigscience tr1-13B paste (a GPU with an uncorrectable ECC error, reused by the
# next job) and of Megatron-LM's and Megatron-Bridge's process-group set-up.
START_UP_FRAMES = {
    "_compile_dependencies": (
        '  File "/code/Megatron-DeepSpeed/megatron/initialize.py", line 89, in initialize_megatron\n'
        "    _compile_dependencies()\n"
        '  File "/code/Megatron-DeepSpeed/megatron/initialize.py", line 140, in _compile_dependencies\n'
        "    torch.distributed.barrier()"
    ),
    "torch_dist_init": (
        '  File "/opt/Megatron-Bridge/src/megatron/bridge/training/initialize.py", line 260, in torch_dist_init\n'
        "    _initialize_distributed("
    ),
}


@pytest.mark.parametrize("function", sorted(START_UP_FRAMES))
@pytest.mark.parametrize("message", [OOM, "[rank97]: RuntimeError: CUDA error: out of memory"])
def test_an_oom_raised_while_the_job_is_set_up_claims_no_memory_cause_and_says_why(function, message):
    """Before the model exists the job has put nothing on the GPU: it was full or faulty already, and no memory
    setting of the run's would help (held-out megatron-deepspeed-bad-gpu-ecc-then-oom-at-init-barrier)."""
    lines = ["Traceback (most recent call last):", *START_UP_FRAMES[function].splitlines(), message]
    report = diagnose_text("\n".join(f"[rank97]: {line}" if not line.startswith("[") else line for line in lines))
    assert report.findings == []
    assert report.unmatched is not None and "out of memory" in report.unmatched.text
    outermost = "initialize_megatron" if function == "_compile_dependencies" else function
    [note] = [n for n in report.notes if "while the job was being set up" in n]
    assert f"raised in {outermost}," in note and "no memory setting is the fix" in note


@pytest.mark.parametrize(
    ("case", "shown"),
    [
        # a job placed on a GPU with an uncorrectable ECC error: the OOM in its start-up follows the error above it
        ("megatron-deepspeed-bad-gpu-ecc-then-oom-at-init-barrier", "uncorrectable ECC error encountered"),
        # 20 MiB asked with 66.43 GiB free: vLLM's CuMem allocator failed first
        ("ms-swift-megatron-grpo-colocate-vllm-cumem-invalid-argument", "cumem_allocator.cpp:119"),
    ],
)
def test_an_oom_that_is_no_shortage_points_at_the_failure_above_it(case, shown):
    report = diagnose([str(FIXTURES / "held-out" / case / "job.log")])
    assert report.findings == []
    assert shown in report.unmatched.text
    assert any("no shortage of this run's memory" in note for note in report.notes)


def test_a_real_job_started_on_a_gpu_another_process_held_claims_no_memory_setting():
    """b66 (an H200, megatron-core 0.19.0): another process held all but 298 MiB of the card; the job stopped at
    `torch.cuda.set_device` in initialize_megatron with `CUDA error: out of memory`."""
    log = FIXTURES / "memory-calibration" / "out-of-memory" / "b66-tiny-on-a-full-gpu.log.gz"
    report = diagnose([str(log)])
    assert report.findings == []
    assert report.unmatched.text == "torch.AcceleratorError: CUDA error: out of memory"
    [note] = [n for n in report.notes if "no shortage" in n]
    assert "raised in initialize_megatron," in note
