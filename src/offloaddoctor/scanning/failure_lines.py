"""Lines a person would point at when no signature explains a failure, in the forms users paste them.

- a traceback cut after its last frame: the frame's `raise …` / `assert …` source line (no exception line);
- CUDA device-side assertions: `IndexKernel.cu:92: operator(): block: [0,0,0], thread: [0,0,0] Assertion
  `… "index out of bounds"` failed.`;
- NCCL warnings: `host:pid:tid [3] misc/ibvwrap.cc:178 NCCL WARN …`;
- torchrun's ChildFailedError summary: the root cause's `traceback : Signal 9 (SIGKILL) received by PID …`
  or `exitcode  : 1 (pid: …)` (an indented traceback there is read by the scanner like any other);
- (issue 27) frames pasted without their `Traceback (most recent call last):` header: the last `raise …` /
  `assert …` source line, else the last frame's statement; a lone indented `assert …` line (`[rank0]:     assert
  args.… == 1, …`) is the same shape, one line long;
- (issue 27) an exception class alone on its line (`…CheckpointingException:`), its message on the next: both.
"""

from __future__ import annotations

from offloaddoctor.lazy_pattern import lazy_compile

# Ray's header of a task's exception, `ray.exceptions.RayTaskError(OutOfMemoryError): ray::Actor.method() (pid=…)`:
# the task's frames and its own exception line follow it, so where a paste stops before that line, it is the failure
# (held-out nemo-rl-ppo-default-config-oom-in-get-logprobs).
RAY_TASK_ERROR = "RayTaskError("
# Each literal is on every line its alternative below matches (the scanner's gate and grep prefilter).
FAILURE_LINE_LITERALS = ("Assertion `", "NCCL WARN", "received by PID", "exitcode  : ", RAY_TASK_ERROR)
FAILURE_LINE_PATTERN = (
    r"\.cu:\d+: .*Assertion `.*` failed"
    r"|\bNCCL WARN\b"
    r"|\bSignal \d+ \(SIG\w+\) received by PID"
    r"|^\s*exitcode  : -?[1-9]\d* \(pid"
    r"|\bRayTaskError\(\w+\):"
)
_RAISING = ("raise ", "assert ", "assert(")
# On every indented raise/assert source line (a frame's statement) and every frame header (`File "x.py", line 3,
# in f`, or the tail of one whose start was not pasted).
# torch._dynamo prints the frames of the user code it was tracing after its exception, under this line: they are
# that exception's, not a later failure (a held-out ms-swift paste showed `predicted_logits_1d = …` as its failure)
DYNAMO_USER_CODE = "from user code:"
SOURCE_LINE_LITERALS = ("raise ", "assert ", '", line ', DYNAMO_USER_CODE)
_FRAME_HEADER = lazy_compile(r'", line \d{1,9}, in [\w<>.]+\s*$')
# `torch.multiprocessing.spawn.ProcessRaisedException:` with nothing after the colon: the message follows.
_EXCEPTION_CLASS = r"^\s*[A-Za-z_][\w.]{0,200}(?:Error|Exception)\s*"
_BARE_EXCEPTION = lazy_compile(_EXCEPTION_CLASS + r":\s*$")
_EXIT_STATUS = lazy_compile(r"^\s*exitcode  : -?\d+ \(pid")
_FRAME_PARTS = lazy_compile(r'File "(?P<path>[^"]{1,1000})", line (?P<line>\d{1,9}), in (?P<function>[\w<>.]+)')
_CLASS_ALONE = lazy_compile(_EXCEPTION_CLASS + "$")


def says_only_that_a_rank_failed(text: str) -> bool:
    """torchrun's `exitcode  : 1 (pid: …)`: shown when nothing else is known, never next to a finding."""
    return _EXIT_STATUS.match(text) is not None


def is_frame_header(body: str) -> bool:
    return body.lstrip().startswith('File "')


# The functions that build a model, each allocating its parameters and keeping them: Megatron-LM's get_model and,
# in megatron-core 0.19.0's training, _build_model_wrapper -> build_distributed_models -> ... -> _ddp_wrap (the
# gradient buffers: b01 ran out of memory there); megatron-core's build_module; a training script's
# model_provider; Megatron-Bridge 0.3.1's provide_distributed_model, get_model, _create_model and _ddp_wrap.
MODEL_BUILD_FUNCTIONS = frozenset(
    {
        "get_model",
        "_build_model_wrapper",
        "build_model",
        "build_distributed_models",
        "unimodal_build_distributed_models",
        "prepare_existing_model_chunks_for_distributed_training",
        "build_virtual_pipeline_stages",
        "build_module",
        "model_provider",
        "provide_distributed_model",
        "_create_model",
        "_ddp_wrap",
    }
)

# The functions that build the optimizer before any step: megatron-core's get_megatron_optimizer (fp32 main copies of
# the parameters), DeepSpeed's engine (_configure_optimizer, its fp16 and ZeRO optimizers' initialize_optimizer_states,
# which allocates Adam's moments with a step at construction). An OOM there is the parameters with the optimizer's
# state: the step's activations do not exist yet (held-out megatron-deepspeed-summit-gpt1.3b-fp16-optimizer-init-oom).
OPTIMIZER_BUILD_FUNCTIONS = frozenset(
    {
        "get_megatron_optimizer",
        "_configure_optimizer",
        "_configure_fp16_optimizer",
        "_configure_zero_optimizer",
        "initialize_optimizer_states",
    }
)

# megatron-core's schedules, which run a step's forward and backward passes (pipeline_parallel/schedules.py): an OOM
# there before any iteration line may have come before the optimizer's first step, when Adam's moments did not exist
# yet (scanning/oom.py before_the_first_step; run b81).
FORWARD_BACKWARD_FUNCTIONS = frozenset(
    {
        "forward_backward_no_pipelining",
        "forward_backward_pipelining_without_interleaving",
        "forward_backward_pipelining_with_interleaving",
    }
)

# The functions that set a job up before anything of its model is on the GPU: Megatron-LM's and Megatron-Bridge's
# initialize_megatron (-> _initialize_distributed -> init_process_group, initialize_model_parallel;
# _compile_dependencies' barrier), Bridge's torch_dist_init. A CUDA out-of-memory error there is not the run's
# memory: the GPU was full or faulty when the job started (held-out megatron-deepspeed-bad-gpu-ecc-then-oom-…).
START_UP_FUNCTIONS = frozenset(
    {
        "initialize_megatron",
        "finish_mpu_init",
        "_initialize_distributed",
        "init_process_group",
        "initialize_model_parallel",
        "_compile_dependencies",
        "torch_dist_init",
    }
)


def training_code(header: str) -> str | None:
    """Whose training loop a frame is in: FlagScale's (`flagscale/train/`, which runs Megatron-LM's), Megatron-LM's
    (`megatron/training/`) or Megatron-Bridge's (`megatron/bridge/`); None for megatron-core's own and everything
    else, which both run."""
    if "flagscale/train/" in header:
        return "flagscale"
    if "megatron/training/" in header:
        return "megatron-lm"
    if "megatron/bridge/" in header:
        return "bridge"
    return None


# A frame in adapter code (`flagscale/train/peft/lora.py`, `megatron/bridge/peft/lora.py`, `swift/tuners/lora/…`,
# `peft/tuners/lora/layer.py`): the run trains adapters over a frozen model (held-out flagscale-memrift-lora-…).
_ADAPTER_FRAME = lazy_compile(r'File "[^"]{0,1000}/(?:peft|tuners)/[^"]{0,1000}lora')


def adapter_frame(header: str) -> bool:
    return "lora" in header and _ADAPTER_FRAME.search(header) is not None


def frozen_weight_frame(header: str) -> bool:
    """megatron-core's `linear_with_frozen_weight` (tensor_parallel/layers.py `_forward_impl`: `if not
    weight.requires_grad`), as held-out flagscale-lora-…-seq9728's output layer ran out of memory in it."""
    return header.rstrip().endswith(" in linear_with_frozen_weight")


# Traceback frames that say the model under the run is frozen, by the run fact each gives (run_facts.py): adapter
# code, or megatron-core's road for a frozen weight. The first frame of each kind is kept (ScanResult.frozen_frames).
FROZEN_MODEL_FRAMES = (("trains_adapters", adapter_frame), ("frozen_weight_in_traceback", frozen_weight_frame))


def runs_a_path(header: str) -> bool:
    """A frame of runpy.run_path (`File "<frozen runpy>", line 286, in run_path`): the `<module>` frame after it is a
    script's top level run as a module, as multiprocessing's spawn start method runs the parent's script in each
    child."""
    return header.rstrip().endswith(" in run_path") and "runpy" in header


def frame_function(header: str) -> str | None:
    """The function a traceback frame's header names (`File "…", line 119, in build_module` → build_module)."""
    found = _FRAME_PARTS.search(header)
    return found["function"] if found is not None else None


def raised_by(header: str | None, statement: str) -> str:
    """A frame's `raise`/`assert` line and where it stands, for an exception line that names only its class
    (`assert len(steps) == 1` fails as a bare `AssertionError`): `assert … (megatron/core/x.py:839, in f)`."""
    found = _FRAME_PARTS.search(header or "")
    if found is None:
        return f"`{statement}`"
    path = found["path"].rpartition("-packages/")[2]
    return f"`{statement}` ({path}:{found['line']}, in {found['function']})"


def names_only_its_class(text: str) -> bool:
    """An exception line with neither a message nor the colon one follows (Python prints `AssertionError`)."""
    return _CLASS_ALONE.match(text) is not None


def raising_statement(body: str) -> str | None:
    """The stripped source line of a traceback frame when it raises or asserts."""
    stripped = body.strip()
    if stripped == "raise" or stripped.startswith(_RAISING):
        return stripped
    return None


def is_pasted_frame_header(text: str) -> bool:
    """A traceback frame's header, whole or its tail (`…/arguments.py", line 561, in validate_args`)."""
    return _FRAME_HEADER.search(text) is not None


def indented_raising_statement(text: str) -> str | None:
    """A frame's `raise …` / `assert …` source line as it stands in a traceback: indented, outside any header."""
    if not text[:1].isspace():
        return None
    return raising_statement(text)


# `raise ValueError("can't optimize a non-leaf Tensor")`, `assert x == 1, 'message'`: a message that is one plain
# string literal (no f-string, no formatting), which the exception line prints as it stands.
_RAISES_LITERAL = lazy_compile(
    r"""^raise\s+(?P<cls>[A-Za-z_][\w.]{0,200})\(\s*(?P<q>["'])(?P<msg>(?:(?!(?P=q)|\\).){1,2000})(?P=q)\s*\)$"""
)
_ASSERTS_LITERAL = lazy_compile(r"""^assert\b.{1,2000}?,\s*(?P<q>["'])(?P<msg>(?:(?!(?P=q)|\\).){1,2000})(?P=q)$""")


def exception_line_raised_by(statement: str) -> str | None:
    """The exception line a `raise`/`assert` statement prints when its message is one plain string literal
    (`raise ValueError("can't optimize a non-leaf Tensor")` -> `ValueError: can't optimize a non-leaf Tensor`)."""
    found = _RAISES_LITERAL.match(statement)
    if found is not None:
        return f"{found['cls']}: {found['msg']}"
    found = _ASSERTS_LITERAL.match(statement)
    return f"AssertionError: {found['msg']}" if found is not None else None


def passes_megatron(header: str) -> bool:
    """A frame in Megatron's code (megatron-core, Megatron-LM's training, Megatron-Bridge)."""
    return "megatron/" in header


def message_follows(text: str) -> bool:
    """An exception class alone on its line, its message printed on the next one."""
    return _BARE_EXCEPTION.match(text) is not None
