"""Parse PyTorch's CUDA out-of-memory message (every wording since 1.x) and classify it.

Fragmentation vs capacity is decided in one place, `fragmentation_verdict` (docs/oom.md, "The rule"): the
caching allocator fails a request it has no contiguous block for. When the memory the process could still
have used (what the driver reports free, within a per-process limit when one is printed) plus what the
allocator holds reserved-but-unallocated covers the request, the bytes were there but not in one block:
fragmentation, whose first fix, `expandable_segments:True`, costs nothing (the capacity fixes come after it).
With nothing reserved-unallocated there is no block to fragment: capacity. The same arithmetic on every GPU
size and every wording; the report shows it (`fragmentation_arithmetic`).

A process limited by `torch.cuda.set_per_process_memory_fraction` gets a message that says so ("16.00 GiB
allowed;", recorded on an H100 capped at 16 GiB: fixtures/oom-small-gpu-recorded). Its capacity is the limit,
not the card, and the card's free memory beyond the limit is not the process's to use.

The figures' patterns are bounded (a figure has at most 15 digits, a GPU index at most 4, spaces at most 8) and
a figure starts only where no digit precedes it, so a hostile line of any length costs linear time: unbounded
`\\d+` tried from every digit of a 10 KB run took 40 s.
"""

from __future__ import annotations

from offloaddoctor.scanning.failure_lines import (
    FORWARD_BACKWARD_FUNCTIONS,
    OPTIMIZER_BUILD_FUNCTIONS,
    START_UP_FUNCTIONS,
)
from offloaddoctor.scanning.units import format_bytes, to_bytes
from offloaddoctor.lazy_pattern import lazy_compile

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: typing costs start-up time
    from typing import Any

EXPANDABLE_SEGMENTS = "export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"
FIRST_EXPANDABLE_SEGMENTS = (
    "Expandable segments first (zero cost): free + reserved-unallocated memory covered the request."
)

# A figure as PyTorch prints it ("4.00 GiB", "0 bytes", "1.5e3 MB"), not a piece of a longer digit run.
_FIGURE = r"(?<![\d.])(\d{1,15}(?:\.\d{1,15})?(?:[eE][+-]?\d{1,3})?)\s{0,8}(bytes?|[KMGT]i?B|B)\b"
_SP = r"\s{1,8}"
_FIELDS = {
    "requested_bytes": (rf"Tried to allocate{_SP}{_FIGURE}",),
    "total_capacity_bytes": (rf"total capac\w{{0,4}}{_SP}of{_SP}{_FIGURE}", rf"{_FIGURE}{_SP}total capacity"),
    "free_bytes": (rf"of which{_SP}{_FIGURE}{_SP}is free", rf"{_FIGURE}{_SP}free\b"),
    "in_use_bytes": (rf"this process has{_SP}{_FIGURE}{_SP}memory in use",),
    "allowed_bytes": (rf"memory in use\.{_SP}{_FIGURE}{_SP}allowed",),
    "allocated_bytes": (rf"{_FIGURE}{_SP}is allocated by PyTorch", rf"{_FIGURE}{_SP}already allocated"),
    # torch <= 1.3 printed `amount_cached - amount_allocated` as "cached": reserved but unallocated, not the total.
    "reserved_unallocated_bytes": (
        rf"{_FIGURE}{_SP}is reserved by PyTorch but unallocated",
        rf"{_FIGURE}{_SP}cached\b",
    ),
    "reserved_bytes": (rf"{_FIGURE}{_SP}reserved in total by PyTorch",),
}
_COMPILED = {name: tuple(lazy_compile(p) for p in patterns) for name, patterns in _FIELDS.items()}
# torch >= 2.1 names each process on the GPU: "Process 530150 has 48.84 GiB memory in use." (the current one too, as
# "Process N" where its PID is not the driver's, in a container; else as "this process has").
_PROCESS = lazy_compile(rf"Process{_SP}\d{{1,10}}{_SP}has{_SP}{_FIGURE}{_SP}memory in use")
# torch 2.0 and older print "(GPU 0; 15.78 GiB total capacity; …)"; 2.1 rewrote the message and added expandable
# segments, which 2.0.1 refuses at its first CUDA allocation ("Unrecognized CachingAllocator option:
# expandable_segments": deepseek-ai/DeepSeek-VL2#103, ZhengPeng7/BiRefNet#179).
_BEFORE_TORCH_2_1 = lazy_compile(r"total\s{1,8}capacity;")
# What such a message names against fragmentation. On torch 2.11: 128 let both recorded Megatron fragmentation OOMs
# train that expandable segments fixed (fixtures/memory-calibration b114, b116) and served the synthetic ones of
# fixtures/oom-small-gpu-recorded; 512 only delayed one of the two by two iterations (b113).
MAX_SPLIT_SIZE = "max_split_size_mb:128"
_NAMES_MAX_SPLIT = "max_split_size_mb, which the message names"
# megatron-core's optimizer build (megatron/core/optimizer/__init__.py, 0.19.0) warns so below torch 2.3
_OFFLOADING_BELOW_2_3 = (
    'Optimizer offloading on this PyTorch: megatron-core warns "CPU offload is recommended for PyTorch >= 2.3.0, '
    "untested versions below this may have convergence issues\", and a Megatron-LM of torch 2.0's time may have no "
    "such flag."
)
# Four digits at most: int() refuses strings past 4,300 digits, and no host has 10,000 GPUs.
_GPU = lazy_compile(r"\bGPU\s{1,8}(\d{1,4})(?!\d)")


def parse_oom(text: str) -> dict[str, Any]:
    """The figures (bytes as ints), the GPU index, and the rule's verdict and arithmetic (a bool and a str)."""
    facts: dict[str, Any] = {}
    for name, patterns in _COMPILED.items():
        for pattern in patterns:
            found = pattern.search(text)
            if found:
                value = to_bytes(*found.groups())
                if value is not None:
                    facts[name] = value
                break
    gpu = _GPU.search(text)
    if gpu:
        facts["gpu"] = int(gpu.group(1))
    if "reserved_unallocated_bytes" not in facts and {"reserved_bytes", "allocated_bytes"} <= facts.keys():
        facts["reserved_unallocated_bytes"] = max(0, facts["reserved_bytes"] - facts["allocated_bytes"])
    if "reserved_unallocated_bytes" in facts and "allocated_bytes" in facts and "reserved_bytes" not in facts:
        facts["reserved_bytes"] = facts["allocated_bytes"] + facts["reserved_unallocated_bytes"]
    others = _other_processes_bytes(facts, [to_bytes(*found.groups()) for found in _PROCESS.finditer(text)])
    if others:
        facts["other_processes_bytes"] = others
    no_shortage = memory_was_free(facts) or sized_wrongly(facts)
    if no_shortage:
        facts["not_a_shortage"] = no_shortage
    verdict = fragmentation_verdict(facts)
    if verdict is not None:
        facts["fragmentation_suspected"], facts["fragmentation_arithmetic"] = verdict
    capacity = usable_capacity(facts)
    if capacity and "reserved_unallocated_bytes" in facts:
        facts["reserved_unallocated_share"] = round(facts["reserved_unallocated_bytes"] / capacity, 4)
    if _BEFORE_TORCH_2_1.search(text):
        setting = _NAMES_MAX_SPLIT if "max_split_size_mb" in text else "the message names no allocator setting"
        facts["allocator_release"] = f"torch 2.0 or older (the message's wording): no expandable segments; {setting}"
    return facts


def _other_processes_bytes(facts: dict, listed: list) -> int:
    """What the other processes on the GPU hold, at least. With "this process has" printed, every "Process N" is
    another; without it, this one is among them, and only an entry at least this process's reserved memory can be
    it: the largest such is counted as this one (verl#5840: 65.27 GiB and 7.41 GiB listed, 55.55 GiB reserved here)."""
    listed = [amount for amount in listed if amount is not None]
    if not listed:
        return 0
    if "in_use_bytes" in facts:
        return sum(listed)
    reserved = facts.get("reserved_bytes")
    could_be_this_one = [amount for amount in listed if reserved is not None and amount >= reserved]
    return sum(listed) - max(could_be_this_one) if could_be_this_one else 0


def usable_capacity(facts: dict):
    """What the process may use: the card, or less when a per-process memory fraction caps it."""
    total, allowed = facts.get("total_capacity_bytes"), facts.get("allowed_bytes")
    if total and allowed:
        return min(total, allowed)
    return total or allowed


# Free memory this far past the request is no shortage: a genuine one leaves little free when the message reads it
# (DeepSpeed#115: 586 MiB free for 24 MiB asked, on a 16 GB card 14.13 GiB full, was capacity).
FREE_NO_SHORTAGE_BYTES = 4 * 2**30
FREE_NO_SHORTAGE_TIMES = 10


def memory_was_free(facts: dict) -> str:
    """Why an out-of-memory message is no shortage of memory, where its free memory (within a per-process limit)
    was 4 GiB or more and ten times the request or more; "" otherwise (held-out ms-swift-megatron-grpo-colocate-…:
    20 MiB asked with 66.43 GiB free, vLLM's CuMem allocator failing beside it)."""
    requested, free = facts.get("requested_bytes"), usable_free(facts)
    if requested is None or free < max(FREE_NO_SHORTAGE_BYTES, FREE_NO_SHORTAGE_TIMES * requested):
        return ""
    return (
        f"the GPU had {format_bytes(free)} free for a request of {format_bytes(requested)}: the allocation failed "
        "with the memory there (a custom allocator such as vLLM's CuMem pool, a driver or device error: the error "
        "before it in the log says which), not for want of memory"
    )


def sized_wrongly(facts: dict) -> str:
    """Why an out-of-memory message is no shortage of the run's memory, where its one request is ten times or more all
    the memory the process may use: a tensor sized wrongly, not a budget any setting of the run's meets; "" otherwise.
    Held-out te-megatron-unfused-attention-fallback-…: 4096 GiB of 79.18 GiB, a mask Transformer Engine's unfused
    fallback built whole; megatron-deepspeed-dataloader-bug-…: 37,631.79 GiB, a data-loader bug's shape. A request
    over the GPU by less is the run's settings: n79's 128 GiB of 79.18 GiB, unfused attention's score gradients at
    micro-batch 16, fitted at micro-batch 1 (oom-capacity says so: one_allocation_over_the_gpu)."""
    requested, capacity = facts.get("requested_bytes"), usable_capacity(facts)
    if not requested or not capacity or requested < FREE_NO_SHORTAGE_TIMES * capacity:
        return ""
    return (
        f"one allocation of {format_bytes(requested)} is {requested / capacity:,.0f}x all the memory the process may "
        f"use ({format_bytes(capacity)}): a tensor sized wrongly (a shape or length mistake, or a bug in the code "
        "that sizes it), which the traceback's last frames name, not a budget the run's settings can meet"
    )


def usable_free(facts: dict) -> int:
    """The free memory the process could still have taken: the driver's free memory, but within a per-process
    limit only what the limit leaves above what the allocator holds (PyTorch checks reserved + request against
    it). 0 when the message prints no free figure (the oldest wordings always print one)."""
    free = facts.get("free_bytes") or 0
    allowed = facts.get("allowed_bytes")
    if allowed is not None:  # a limit of 0 bytes leaves nothing free, it is not "no limit"
        held = facts.get("reserved_bytes", facts.get("in_use_bytes"))
        if held is not None:
            free = min(free, max(0, allowed - held))
    return free


def shortfall_bytes(facts: dict) -> float:
    """How far an OOM's request was over the free memory it could have taken (0 without a request): of a
    failure's ranks, the one furthest over is the one a fix must cover."""
    requested = facts.get("requested_bytes")
    return requested - usable_free(facts) if requested is not None else 0.0


def fragmentation_verdict(
    facts: dict,
    whole_step_short: float | None = None,
    first_build_bytes: float = 0.0,
    expandable_segments_on: bool = False,
    building_model: str | None = None,
    building_optimizer: str | None = None,
) -> tuple[bool, str] | None:
    """THE rule (docs/oom.md): fragmentation when reserved-but-unallocated memory is not zero and, with the
    usable free memory, covers the request, and the free memory alone is under twice it; otherwise capacity.
    The failed request is only the first that did not fit: when the run's config is known and the memory model
    says the whole step is short even in its best case (`whole_step_short` > 0: the peak with the cache squeezed
    is over the limit), no allocator setting can make it fit → capacity (e74's covered request: with expandable
    segments, e77, it ran out of memory again).
    `first_build_bytes`: the part of that shortfall that is optimizer offloading's first build, which only
    Python's garbage collector frees (memory/model.py), for the wording. `expandable_segments_on`: the run's
    config says so; the allocator then maps memory where a request needs it, no block to miss → capacity.
    `building_model`: the model-build function the OOM's traceback passed (raised_while_building) → capacity;
    `building_optimizer`: the optimizer-build one (raised_in) → capacity, for the same reason.
    Returns (fragmentation?, its arithmetic), or None when the message lacks the request or the
    reserved-unallocated figure."""
    slack, requested = facts.get("reserved_unallocated_bytes"), facts.get("requested_bytes")
    if slack is None or requested is None:
        return None
    free = usable_free(facts)
    free_label = "free within the per-process limit" if facts.get("allowed_bytes") is not None else "free"
    covered = free + slack
    fragmentation = slack > 0 and covered >= requested
    sums = f"{free_label} {format_bytes(free)} + reserved-unallocated {format_bytes(slack)} = {format_bytes(covered)}"
    if fragmentation and free >= 2 * requested:
        why = (
            "but the free memory alone was twice the request or more: the allocator takes a new block from the "
            "driver when its cache has none, so the cache's pieces did not fail it; the memory was gone when it "
            "asked (another process or rank on this GPU) or came back before the message → capacity, as far as "
            "this message tells"
        )
        return False, f"{sums} ≥ request {format_bytes(requested)}, {why}"
    if fragmentation and expandable_segments_on:
        why = (
            "but expandable segments were on (the allocator maps its memory where a request needs it, no "
            "contiguous block to miss) → capacity"
        )
        return False, f"{sums} ≥ request {format_bytes(requested)}, {why}"
    if fragmentation and building_model:
        why = (
            f"but it was raised while the model was being built (in {building_model}): what the build allocated "
            "stays, and the rest of the model, the optimizer's state and the activations come on top → capacity"
        )
        return False, f"{sums} ≥ request {format_bytes(requested)}, {why}"
    if fragmentation and building_optimizer:
        why = (
            f"but it was raised while the optimizer was being built (in {building_optimizer}): the state it "
            "allocated stays, and the gradients and the activations come on top → capacity"
        )
        return False, f"{sums} ≥ request {format_bytes(requested)}, {why}"
    if fragmentation and whole_step_short:
        case = (
            f"with the optimizer's first build still allocated ({format_bytes(first_build_bytes)}, freed only by "
            "Python's garbage collector; --manual-gc frees it)"
            if first_build_bytes
            else "even in its best case"
        )
        why = (
            f"but the memory model's whole step is {format_bytes(whole_step_short)} short {case}: "
            "no allocator setting gives the step the bytes → capacity"
        )
        return False, f"{sums} ≥ request {format_bytes(requested)}, {why}"
    if fragmentation:
        why = "the allocator had the bytes but not in one block → fragmentation"
        return True, f"{sums} ≥ request {format_bytes(requested)}: {why}"
    if slack == 0:
        why = "nothing was reserved-unallocated, no block to fragment → capacity"
        return False, f"{sums}, request {format_bytes(requested)}: {why}"
    why = "the GPU did not have the bytes even in pieces → capacity"
    return False, f"{sums} < request {format_bytes(requested)}: {why}"


def raised_in(facts: dict, function: str) -> dict:
    """An OOM whose traceback passed `function`: the job's start-up (failure_lines.START_UP_FUNCTIONS: no shortage of
    the run's), the optimizer's build (failure_lines.OPTIMIZER_BUILD_FUNCTIONS) or the model's build
    (failure_lines.MODEL_BUILD_FUNCTIONS: capacity)."""
    if function in START_UP_FUNCTIONS:
        return {**facts, "not_a_shortage": raised_before_the_model(function), "raised_in_start_up": function}
    if function in FORWARD_BACKWARD_FUNCTIONS:  # read against the log's iteration lines: before_the_first_step
        return {**facts, _FORWARD_BACKWARD: function}
    if function in OPTIMIZER_BUILD_FUNCTIONS:
        # held-out megatron-deepspeed-v100-tp4-zero0-optimizer-state-oom: 738 MiB in pieces covered a 130 MiB request
        # of FusedAdam's moments, allocated at construction; the step's gradients and activations were still to come
        built = {**facts, "raised_while_building_the_optimizer": function}
        verdict = fragmentation_verdict(facts, building_optimizer=function)
        if verdict is None:
            return built
        return {**built, "fragmentation_suspected": verdict[0], "fragmentation_arithmetic": verdict[1]}
    return raised_while_building(facts, function)


_FORWARD_BACKWARD = "raised_in_forward_backward"
BEFORE_THE_FIRST_STEP = "before_any_iteration_line"


def before_the_first_step(aggregates: list, iterations: dict, resumed: bool = False) -> None:
    """An OOM raised in a step's forward/backward with no iteration line before it in its log may be the first step's:
    the optimizer's first step allocates Adam's moments (torch's Adam and the fused ones fill their state in `step`),
    so the GPU held no moments then (n16: max allocated 39,708 MiB in iteration 1, 46,388 from iteration 2; run b81
    ran out of memory in iteration 1's forward/backward). `iterations`: ScanResult.iterations, (path, segment) ->
    the iteration lines kept, an even sample that keeps one before an OOM where any was printed. `resumed`: the run
    loaded a checkpoint, and the optimizer's state with it (Megatron's `successfully loaded checkpoint`)."""
    for aggregate in aggregates:
        function = aggregate.facts.get(_FORWARD_BACKWARD)
        if function is None:
            continue
        facts = {name: value for name, value in aggregate.facts.items() if name != _FORWARD_BACKWARD}
        lines = [e for e in aggregate.evidence if e.line is not None]
        first = min(lines, key=lambda e: e.line) if lines else None
        # Megatron prints iteration lines on the last rank only: another rank's log with any is a step done.
        if (
            first is not None
            and not resumed
            and not any(
                path != first.path or record.line < first.line
                for (path, _), records in iterations.items()
                for record in records
            )
        ):
            facts[BEFORE_THE_FIRST_STEP] = (
                f"raised in the forward/backward ({function}) with no iteration line before it: if this was the first "
                "step, Adam's moments were not on the GPU yet (the optimizer's first step allocates them)"
            )
        aggregate.facts = facts


def without_the_warnings_of_a_start_up_oom(aggregates: list) -> list:
    """The aggregates less the out-of-memory lines without figures (NCCL's `NCCL WARN Cuda failure 2 'out of memory'`,
    `Failed to CUDA calloc`) printed before an OOM raised in the job's start-up in the same log: NCCL warns, then
    raises the exception that start-up's traceback ends in, so they are that failure, told by its note (held-out
    megatron-deepspeed-2node-nccl-init-oom-gpus-held-by-vllm: their own finding called it a capacity limit)."""
    last: dict[str, int] = {}
    for aggregate in aggregates:
        if aggregate.facts.get("raised_in_start_up"):
            for evidence in aggregate.evidence:
                last[evidence.path] = max(last.get(evidence.path, 0), evidence.line or 0)
    if not last:
        return aggregates

    def told_by_it(aggregate) -> bool:
        return (
            "allocator_figures" in aggregate.facts
            and "not_a_shortage" not in aggregate.facts
            and bool(aggregate.evidence)
            and all((e.line or 0) <= last.get(e.path, -1) for e in aggregate.evidence)
        )

    return [aggregate for aggregate in aggregates if not told_by_it(aggregate)]


def raised_before_the_model(function: str) -> str:
    """Why an out-of-memory error raised in the job's start-up (failure_lines.START_UP_FUNCTIONS) is no shortage of
    the run's: nothing of its model was on the GPU yet (held-out megatron-deepspeed-bad-gpu-ecc-then-oom-…)."""
    return (
        f"it was raised in {function}, while the job was being set up, before any of its model was on the GPU: the "
        "GPU was full or faulty when the job started (another process or a previous job's leftovers: nvidia-smi; a "
        "hardware fault: ECC errors or Xid lines in the node's log)"
    )


def raised_while_building(facts: dict, function: str) -> dict:
    """An OOM raised while the model was being built (its traceback passed `function`, one of
    failure_lines.MODEL_BUILD_FUNCTIONS) is capacity whatever its request: the build allocates parameters and keeps
    them, and the training step needs the rest of the model, its gradients and the optimizer's state on top, far
    more than the slack. ms-swift#9191: GLM-5.1's build asked for 48 MiB with 62.86 MiB free + reserved-unallocated
    on a 139.81 GiB card (fixtures/held-out/swift-glm5-tp64-init-oom)."""
    verdict = fragmentation_verdict(facts, building_model=function)
    built = {**facts, "raised_while_building_the_model": function}
    if verdict is None:
        return built
    return {**built, "fragmentation_suspected": verdict[0], "fragmentation_arithmetic": verdict[1]}


# How pipeline parallelism deals out the layers: with the sizes that split the parameters (config/derived.py
# EXPERT_GRID_KEYS), what spreads a model's parameters over more GPUs; every other memory fix acts after the build.
_DEALS_OUT_LAYERS = ("model.num_layers_in_first_pipeline_stage", "model.num_layers_in_last_pipeline_stage")


def other_processes_first(findings) -> None:
    """Where other processes on the GPU hold more than the request was short by, freeing them is the first fix,
    before the run gives anything up: in RL frameworks (verl, slime, NeMo-RL) an inference engine colocated with
    training that kept its memory (held-out verl#5840: 7.41 GiB held beside a 1.58 GiB shortfall)."""
    for finding in findings:
        others, short = finding.facts.get("other_processes_bytes", 0), shortfall_bytes(finding.facts)
        if not others or not 0 < short <= others:
            continue
        # beside fragmentation's own first fix (the allocator setting, free too), freeing them is the other way
        what = "freeing them covers it too" if finding.facts.get("fragmentation_suspected") else "free them first"
        said = (
            f"Other processes hold at least {format_bytes(others)} of this GPU, more than the {format_bytes(short)} "
            f"this request was short by: {what} (`nvidia-smi` lists them; where an inference engine shares the GPU "
            "with training, check that it released its memory before the training step)."
        )
        _say_first(finding, said)


def parameters_over_the_gpu(findings, store) -> None:
    """An OOM raised while the model was being built (raised_while_building): the parameters alone did not fit, so
    the first change must spread them (TP, PP, EP). The optimizer's sharding or offloading, recompute and the
    allocator act after the build: lines that change only those come after the spreading ones, for the step that
    follows (b01's lines, PP 2 first, then selective recompute and offloading, trained as printed: b06, fixtures/
    memory-calibration), and a fix with no spreading line at all is left out (ms-swift#9191 was offered only those)."""
    from offloaddoctor.config.derived import EXPERT_GRID_KEYS  # here: `signatures` and `explain` load no config
    from offloaddoctor.config.dialect import parse_fix_line

    spreads_parameters = (*EXPERT_GRID_KEYS, *_DEALS_OUT_LAYERS)

    for finding in findings:
        function = finding.facts.get("raised_while_building_the_model")
        if not function:
            continue
        spreads = [
            bool(changes) and all(key in spreads_parameters for key, _ in changes)
            for changes in map(parse_fix_line, finding.overrides)
        ]
        layout = ", ".join(
            f"{name} {store.value(key)}"
            for name, key in (
                ("TP", "model.tensor_model_parallel_size"),
                ("PP", "model.pipeline_model_parallel_size"),
                ("EP", "model.expert_model_parallel_size"),
            )
            if store.value(key) is not None
        )
        said = (
            f"The OOM was raised while the model was being built (in {function}): the model alone (its parameters "
            f"and the gradient buffers built with them) does not fit this layout{f' ({layout})' if layout else ''}. "
            "The optimizer's sharding and offloading, recompute and the allocator act after the build"
        )
        if any(spreads):
            finding.overrides = [line for line, spread in zip(finding.overrides, spreads) if spread] + [
                line for line, spread in zip(finding.overrides, spreads) if not spread
            ]
            finding.fix_note = f"{said}: spread the parameters first; the other lines are for the step that follows."
        else:
            finding.overrides = []
            finding.fix_note = (
                f"{said} and cannot help. Spread the parameters over more GPUs: pipeline parallel, expert parallel "
                "for a MoE's experts, tensor parallel within a node."
            )
        finding.fix_note_replaces_summary = True  # the signature's summary names the optimizer and recompute first


# What acts on the step's activations only: a fix line that changes nothing else cannot help an OOM raised while the
# optimizer was being built, before any step.
_ACTIVATIONS_ONLY = (
    "model.recompute_",
    "train.micro_batch_size",
    "model.cpu_offloading",
    "model.fine_grained_activation_offloading",
    "model.offload_modules",
)


def optimizer_state_over_the_gpu(findings) -> None:
    """An OOM raised while the optimizer was being built (failure_lines.OPTIMIZER_BUILD_FUNCTIONS): the parameters and
    the optimizer's state did not fit before any step ran, so a line that changes only the step's activations is
    left out, and the fix says why (held-out megatron-deepspeed-summit-gpt1.3b-fp16-optimizer-init-oom was offered
    selective recompute for Adam's moments allocated at DeepSpeed's optimizer construction). A fix with no such line
    stays as it was (b03, n131: the memory model's optimizer offloading, precision-aware optimizer, --manual-gc)."""
    from offloaddoctor.config.dialect import parse_fix_line

    for finding in findings:
        function = finding.facts.get("raised_while_building_the_optimizer")
        if not function:
            continue
        kept = [
            line
            for line in finding.overrides
            if not ((changes := parse_fix_line(line)) and all(key.startswith(_ACTIVATIONS_ONLY) for key, _ in changes))
        ]
        if len(kept) == len(finding.overrides) and finding.overrides:
            continue
        said = (
            f"The OOM was raised while the optimizer was being built (in {function}): the parameters and the "
            "optimizer's state did not fit before any step ran. Recompute, a smaller micro-batch and activation "
            "offloading act on the step's activations, which did not exist yet"
        )
        finding.fix_note = (
            f"{said}: shard or offload the optimizer's state, or spread the parameters over more GPUs."
            if kept
            else f"{said}, and cannot help. Shard or offload the optimizer's state, or spread the parameters over "
            "more GPUs (pipeline, tensor or expert parallel)."
        )
        finding.overrides = kept
        finding.fix_note_replaces_summary = True


def lead_with_expandable_segments(findings, expandable_segments_on, allocator_conf: str = "") -> None:
    """A fragmentation finding's first fix is the zero-cost allocator setting, whatever capacity fix the
    memory advice put in front of it (advice runs first and may replace the overrides). `allocator_conf`: the
    run's PYTORCH_CUDA_ALLOC_CONF, where known (an older PyTorch's max_split_size_mb set already)."""
    if expandable_segments_on is True:
        return
    for finding in findings:
        if finding.facts.get("fragmentation_suspected") is True:
            finding.overrides = [EXPANDABLE_SEGMENTS, *(o for o in finding.overrides if o != EXPANDABLE_SEGMENTS)]
            if finding.fix_note:  # the advice's note is about the capacity fixes, which now come second
                note = finding.fix_note
                if note[1:2].islower():  # "The numbers say ..." reads on after a comma; "PP 2 ..." keeps its case
                    note = note[0].lower() + note[1:]
                finding.fix_note = f"{FIRST_EXPANDABLE_SEGMENTS} If the OOM stays, {note}"
    for finding in findings:
        if "allocator_release" in finding.facts:
            _without_expandable_segments(finding, "max_split_size_mb" in allocator_conf)


def offloading_on_an_older_torch(findings) -> None:
    """An OOM of torch 2.0 or older whose printed fix (after every line a run cannot take is left out) turns
    optimizer offloading on: megatron-core's own warning for it, said with the fix."""
    for finding in findings:
        offloads = any(
            line.startswith("--optimizer-cpu-offload") or "optimizer_cpu_offload=true" in line.lower()
            for line in finding.overrides
        )
        if "allocator_release" in finding.facts and offloads:
            finding.fix_note = f"{finding.fix_note} {_OFFLOADING_BELOW_2_3}".strip()


def _without_expandable_segments(finding, max_split_set: bool) -> None:
    """An OOM of torch 2.0 or older: a line turning on expandable segments would stop the relaunch at its first CUDA
    allocation. Where the message names max_split_size_mb, that setting takes its place; else the line goes."""
    lines = [line for line in finding.overrides if "expandable_segments:True" in line]
    if not lines:
        return
    has_max_split = _NAMES_MAX_SPLIT in finding.facts["allocator_release"]
    finding.overrides = [
        line.replace("expandable_segments:True", MAX_SPLIT_SIZE)
        for line in finding.overrides
        if line not in lines or (has_max_split and not max_split_set and "max_split_size_mb" not in line)
    ]
    said = (
        "This PyTorch is 2.0 or older (its message's wording), which has no expandable segments: torch 2.0.1 stops "
        "at its first CUDA allocation on `RuntimeError: Unrecognized CachingAllocator option: expandable_segments`. "
    )
    first = any(MAX_SPLIT_SIZE in line for line in finding.overrides)
    if first:
        said += (
            f"Its own setting against fragmentation, {MAX_SPLIT_SIZE} (which its message names), first: on torch 2.11 "
            "it let two Megatron runs train whose fragmentation OOMs expandable segments fixed (fixtures/memory-"
            "calibration b114, b116), where max_split_size_mb:512 only delayed one of them by two iterations (b113). "
            "A PyTorch of 2.1 or later has expandable segments."
        )
    elif has_max_split:
        said += "Its own setting against fragmentation, max_split_size_mb, which its message names, is set already."
    else:
        said += (
            "Its message names no allocator setting against fragmentation (a PyTorch of 2.1 or later has expandable "
            "segments)."
        )
    note = finding.fix_note.removeprefix(FIRST_EXPANDABLE_SEGMENTS).strip()
    if not first:
        note = note.removeprefix("If the OOM stays, ")
        note = note[:1].upper() + note[1:]
    if finding.signature.id == "oom-fragmentation" and not note:
        note = (
            "If the OOM stays, the GPU is short of memory as well: the capacity fixes that follow."
            if first
            else "The capacity fixes that follow free the memory the request needs instead."
        )
        finding.fix_note_replaces_summary = True
    finding.fix_note = f"{said} {note}".strip()


def larger_than_the_gpu(facts: dict) -> bool:
    """An OOM whose single request is larger than all the memory the process may use (EasyEdit#563: 355.43 GiB
    on an 80 GB card; n79: 128 GiB on 79 GiB): a tensor's shape, not the run's memory budget."""
    requested, capacity = facts.get("requested_bytes"), usable_capacity(facts)
    return bool(requested and capacity and requested > capacity)


def one_allocation_over_half_the_gpu(findings) -> None:
    """An allocation larger than half of what the process may use (and not larger than all of it: that is
    one_allocation_over_the_gpu's) is one tensor's shape before it is the run's budget: the fix says where to look
    first, and keeps its lines (held-out slime#1767: 61.34 GiB on a 79.11 GiB card, fp32 logits of a long
    sequence)."""
    for finding in findings:
        requested, capacity = finding.facts.get("requested_bytes"), usable_capacity(finding.facts)
        if not requested or not capacity or not capacity / 2 < requested <= capacity:
            continue
        said = (
            f"One allocation of {format_bytes(requested)} is {requested / capacity:.0%} of the memory the process may "
            "use: find the tensor in the traceback's last frames and the setting that sizes it (sequence length, "
            "vocabulary, micro-batch size) before giving anything else up."
        )
        _say_first(finding, said)


def _say_first(finding, sentence: str) -> None:
    """Put a sentence before what the fix's note says already (the advice's numbers, the Megatron lines left out)."""
    finding.fix_note = f"{sentence} {finding.fix_note}".strip()


def one_allocation_over_the_gpu(findings) -> None:
    """No sharding of the optimizer, offloading, recompute or allocator setting makes one allocation larger than the
    GPU fit (larger_than_the_gpu), so none is offered."""
    for finding in findings:
        if not larger_than_the_gpu(finding.facts):
            continue
        requested, capacity = finding.facts["requested_bytes"], usable_capacity(finding.facts)
        finding.overrides = []
        finding.fix_note_replaces_summary = True
        finding.fix_note = (
            f"One allocation of {format_bytes(requested)} is larger than all the memory the process may use "
            f"({format_bytes(capacity)}): no sharding, offloading, recompute or allocator setting makes it fit. "
            "Find the tensor in the traceback's last frames and the setting that sizes it (sequence length or "
            "max_position_embeddings, vocabulary, micro-batch size): a tensor this large is usually a shape mistake."
        )
