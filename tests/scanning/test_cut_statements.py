"""A paste that stops at its raising frame in Megatron's code is read as the exception line the statement prints
(scanning/failure_lines.py exception_line_raised_by; FailureMatcher.statement_raised)."""

from __future__ import annotations

import pytest

from offloaddoctor.api import diagnose_text
from offloaddoctor.scanning.failure_lines import exception_line_raised_by

PP_RAISE = '    raise ValueError("Currently there is no support for Pipeline parallelism with CPU offloading")'
MEGATRON_FRAME = (
    '  File "/usr/local/lib/python3.12/dist-packages/megatron/core/transformer/transformer_config.py", '
    "line 1300, in __post_init__"
)
USER_FRAME = '  File "/workspace/train.py", line 12, in main'


@pytest.mark.parametrize(
    ("statement", "line"),
    [
        ('raise ValueError("can\'t optimize a non-leaf Tensor")', "ValueError: can't optimize a non-leaf Tensor"),
        ("raise RuntimeError('x y')", "RuntimeError: x y"),
        ('assert args.pp == 1, "no PP with offloading"', "AssertionError: no PP with offloading"),
        ('raise ValueError(f"layers {n}")', None),  # formatted: the printed message is not in the source
        ('raise ValueError("a" + b)', None),
        ("assert args.sequence_parallel, \\", None),  # the message is on the next line
        ("raise", None),
    ],
)
def test_the_exception_line_a_statement_prints(statement, line):
    assert exception_line_raised_by(statement) == line


@pytest.mark.parametrize("header", [True, False], ids=["with a header", "headless"])
def test_a_cut_paste_in_megatrons_code_is_its_exception(header):
    lines = (["Traceback (most recent call last):"] if header else []) + [MEGATRON_FRAME, PP_RAISE]
    (finding,) = diagnose_text("\n".join(lines)).findings
    assert finding.signature.id == "pp-cpu-offload"
    assert finding.evidence[0].text == PP_RAISE.strip()  # shown as the log has it


def test_a_cut_paste_outside_megatrons_code_claims_nothing():
    report = diagnose_text("\n".join(["Traceback (most recent call last):", USER_FRAME, PP_RAISE]))
    assert report.findings == [] and report.unmatched.text == PP_RAISE.strip()


NON_LEAF_FRAME = '  File "megatron/core/optimizer/cpu_offloading/hybrid_optimizer.py", line 57, in __init__'
NON_LEAF_RAISE = '    raise ValueError("can\'t optimize a non-leaf Tensor")'


def test_a_statement_followed_by_its_exception_line_is_read_once():
    exception = "ValueError: can't optimize a non-leaf Tensor"
    (finding,) = diagnose_text("\n".join([NON_LEAF_FRAME, NON_LEAF_RAISE, exception])).findings
    assert finding.occurrences == 1 and finding.evidence[0].text == exception


def test_a_statement_a_signature_already_took_is_not_read_twice():
    """pp-cpu-offload's pattern takes the raise line itself."""
    (finding,) = diagnose_text("\n".join([MEGATRON_FRAME, PP_RAISE])).findings
    assert finding.occurrences == 1


DYNAMO_PASTE = """[rank24]: torch._dynamo.exc.TorchRuntimeError: Failed running call_function <built-in function getitem>
[rank24]: Attempting to broadcast a dimension of length 90752 at -1!
[rank24]:
[rank24]: from user code:
[rank24]:    File "/w/Megatron-LM-0.11.0/megatron/core/tensor_parallel/cross_entropy.py", line 59, in calculate_predicted_logits
[rank24]:     predicted_logits_1d = logits_2d[arange_1d, masked_target_1d]
"""


def test_the_frames_torch_dynamo_prints_under_from_user_code_are_its_exceptions_not_a_later_failure():
    """Held-out ms-swift#4030 (batch 5): the exception comes first, then the traced user code's frames; the last
    frame's statement was shown as the failure line."""
    report = diagnose_text(DYNAMO_PASTE)
    assert report.unmatched is not None
    assert report.unmatched.text.startswith("torch._dynamo.exc.TorchRuntimeError: Failed running call_function")
    # a failure after it is read as ever: its frame's statement, below a later error line
    later = DYNAMO_PASTE + "[rank24]: RuntimeError: next\n" + USER_FRAME + "\n    x = f(y)\n"
    assert diagnose_text(later).unmatched.text == "x = f(y)"


RAY_HEADER = (
    "ray.exceptions.RayTaskError(OutOfMemoryError): ray::PolicyWorker.get_logprobs() (pid=2671339, ip=10.0.0.9)"
)


def test_a_ray_task_cut_before_its_own_exception_shows_the_tasks_header_not_its_last_frame():
    """Ray prints a task's frames under the header that names its exception class; a paste that stops inside them
    (held-out nemo-rl-ppo-default-config-oom-in-get-logprobs) fails on that header. Which memory ran out is on the
    line the paste cut, so no OOM finding is made from the header alone."""
    frames = [USER_FRAME, "    logprobs = forward(batch)"]
    report = diagnose_text("\n".join([RAY_HEADER, *frames]))
    assert report.findings == [] and report.unmatched.text == RAY_HEADER


@pytest.mark.parametrize(
    ("wrapped", "finding"),
    [
        ("ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.", None),
        (
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
            "79.18 GiB of which 512.00 MiB is free. Including non-PyTorch memory, this process has 78.66 GiB memory "
            "in use. Of the allocated memory 77.90 GiB is allocated by PyTorch, and 300.00 MiB is reserved by "
            "PyTorch but unallocated.",
            "oom-capacity",
        ),
    ],
    ids=["the node's memory", "the GPU's"],
)
def test_the_line_a_ray_wrapper_wraps_says_which_memory_ran_out(wrapped, finding):
    report = diagnose_text("\n".join([RAY_HEADER, USER_FRAME, "    logprobs = forward(batch)", wrapped]))
    assert [f.signature.id for f in report.findings] == ([finding] if finding else [])
