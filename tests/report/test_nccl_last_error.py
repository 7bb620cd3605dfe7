"""The line after NCCL's `Last error:` says what failed (held-out megatron-lm-duplicate-gpu-nccl-invalid-usage-startup:
`Duplicate GPU detected : rank 7 and rank 0 both on CUDA device f000`): it is the failure line shown where the NCCL
error is the whole story, and not where another finding is the cause and the NCCL error on another rank its echo."""

from __future__ import annotations

from offloaddoctor.api import diagnose_text

OOM = (
    "[rank5]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB. GPU 5 has a total capacity of "
    "79.11 GiB of which 1.06 GiB is free. Of the allocated memory 70.00 GiB is allocated by PyTorch, and 6.00 GiB is "
    "reserved by PyTorch but unallocated."
)
NCCL = [
    "[rank0]: torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/"
    "ProcessGroupNCCL.cpp:1970, remote process exited or there was a network error, NCCL version 2.21.5",
    "[rank0]: ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.",
    "[rank0]: Last error:",
    "[rank0]: socket recv failed while polling for opId=0x7f3a2c0fbbd0",
]


def test_what_nccl_said_failed_is_the_failure_shown_where_nccl_is_the_whole_story():
    report = diagnose_text("\n".join(NCCL))
    assert [f.id for f in report.findings] == ["nccl-collective-failure"]
    assert (
        report.unmatched is not None
        and report.unmatched.text == "socket recv failed while polling for opId=0x7f3a2c0fbbd0"
    )


def test_what_nccl_said_failed_is_an_echo_where_another_rank_ran_out_of_memory():
    report = diagnose_text("\n".join([OOM, *NCCL]))
    assert [f.id for f in report.findings] == ["oom-fragmentation", "nccl-collective-failure"]
    assert report.unmatched is None


def test_a_last_error_line_at_the_end_of_a_log_reads_nothing_after_it():
    report = diagnose_text("\n".join(NCCL[:3]))
    assert report.unmatched is None or "Last error" not in report.unmatched.text


def test_a_finding_from_the_config_alone_does_not_make_what_nccl_said_an_echo():
    """A constraint the config breaks, found in the config and not in the log, is no failure the NCCL error could
    follow from."""
    config = {"optimizer.optimizer_cpu_offload": True, "optimizer.use_distributed_optimizer": False}
    report = diagnose_text("\n".join(NCCL), config)
    assert any(f.trigger == "config" for f in report.findings)
    assert report.unmatched is not None and report.unmatched.text.startswith("socket recv failed")
