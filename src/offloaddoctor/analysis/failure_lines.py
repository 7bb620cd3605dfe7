"""Lines a person would point at when no signature explains a failure, in the forms users paste them.

- a traceback cut after its last frame: the frame's `raise …` / `assert …` source line (no exception line);
- CUDA device-side assertions: `IndexKernel.cu:92: operator(): block: [0,0,0], thread: [0,0,0] Assertion
  `… "index out of bounds"` failed.`;
- NCCL warnings: `host:pid:tid [3] misc/ibvwrap.cc:178 NCCL WARN …`;
- torchrun's ChildFailedError summary: the root cause's `traceback : Signal 9 (SIGKILL) received by PID …`
  or `exitcode  : 1 (pid: …)` (an indented traceback there is read by the scanner like any other).
"""

from __future__ import annotations

from offloaddoctor.lazy_pattern import lazy_compile

# Each literal is on every line its alternative below matches (the scanner's gate and grep prefilter).
FAILURE_LINE_LITERALS = ("Assertion `", "NCCL WARN", "received by PID", "exitcode  : ")
FAILURE_LINE_PATTERN = (
    r"\.cu:\d+: .*Assertion `.*` failed"
    r"|\bNCCL WARN\b"
    r"|\bSignal \d+ \(SIG\w+\) received by PID"
    r"|^\s*exitcode  : -?[1-9]\d* \(pid"
)
_RAISING = ("raise ", "assert ", "assert(")
_EXIT_STATUS = lazy_compile(r"^\s*exitcode  : -?\d+ \(pid")


def says_only_that_a_rank_failed(text: str) -> bool:
    """torchrun's `exitcode  : 1 (pid: …)`: shown when nothing else is known, never next to a finding."""
    return _EXIT_STATUS.match(text) is not None


def is_frame_header(body: str) -> bool:
    return body.lstrip().startswith('File "')


def raising_statement(body: str) -> str | None:
    """The stripped source line of a traceback frame when it raises or asserts."""
    stripped = body.strip()
    if stripped == "raise" or stripped.startswith(_RAISING):
        return stripped
    return None
