"""Parse PyTorch's CUDA out-of-memory message (every wording since 1.x) and classify it.

Fragmentation vs capacity: the caching allocator fails a request it has no contiguous block for. When the
memory it holds reserved-but-unallocated is at least the size of the request, the bytes were there but in
pieces: fragmentation, which `expandable_segments:True` removes. We also require that this slack is at
least FRAGMENTATION_MIN_SHARE of the GPU (or 1 GiB when the capacity is not printed): below that, even a
perfectly packed heap buys too little headroom, and the run is at capacity either way.

Between the two lies a close call: the slack could have served the request but is only 1-5 % of the GPU
(FRAGMENTATION_CLOSE_CALL_SHARE). Real OOMs on 16 GB and 32 GB cards sit there (736.86 MiB slack for a
546 MiB request; 1.15 GiB for 786 MiB), and in one of those threads expandable segments were the fix. It
stays a capacity finding, marked `fragmentation_close_call`, and its fix starts with the zero-cost setting.

A process limited by `torch.cuda.set_per_process_memory_fraction` gets a message that says so ("16.00 GiB
allowed;", recorded on an H100 capped at 16 GiB: fixtures/oom-small-gpu-recorded). Its capacity is the limit,
not the card: 2.50 GiB of slack is 3 % of the 79 GiB card but 16 % of what the process may use, and
expandable segments served the same request there.
"""

from __future__ import annotations

from offloaddoctor.analysis.units import QUANTITY, format_bytes, to_bytes
from offloaddoctor.lazy_pattern import lazy_compile

FRAGMENTATION_MIN_SHARE = 0.05
FRAGMENTATION_MIN_BYTES_WITHOUT_CAPACITY = 1024**3
FRAGMENTATION_CLOSE_CALL_SHARE = 0.01
FRAGMENTATION_CLOSE_CALL_MIN_BYTES_WITHOUT_CAPACITY = 256 * 1024**2
EXPANDABLE_SEGMENTS = "export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"

_FIELDS = {
    "requested_bytes": (rf"Tried to allocate\s+{QUANTITY}",),
    "total_capacity_bytes": (rf"total capac\w*\s+of\s+{QUANTITY}", rf"{QUANTITY}\s+total capacity"),
    "free_bytes": (rf"of which\s+{QUANTITY}\s+is free", rf"{QUANTITY}\s+free\b"),
    "in_use_bytes": (rf"this process has\s+{QUANTITY}\s+memory in use",),
    "allowed_bytes": (rf"memory in use\.\s+{QUANTITY}\s+allowed",),
    "allocated_bytes": (rf"{QUANTITY}\s+is allocated by PyTorch", rf"{QUANTITY}\s+already allocated"),
    "reserved_unallocated_bytes": (rf"{QUANTITY}\s+is reserved by PyTorch but unallocated",),
    "reserved_bytes": (rf"{QUANTITY}\s+reserved in total by PyTorch", rf"{QUANTITY}\s+cached\b"),
}
_COMPILED = {name: tuple(lazy_compile(p) for p in patterns) for name, patterns in _FIELDS.items()}
_GPU = lazy_compile(r"\bGPU\s+(\d+)")


def parse_oom(text: str) -> dict[str, int | float | bool]:
    facts: dict[str, int | float | bool] = {}
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
    suspected = fragmentation_suspected(facts)
    if suspected is not None:
        facts["fragmentation_suspected"] = suspected
        if not suspected and fragmentation_close_call(facts):
            facts["fragmentation_close_call"] = True
    capacity = usable_capacity(facts)
    if capacity and "reserved_unallocated_bytes" in facts:
        facts["reserved_unallocated_share"] = round(facts["reserved_unallocated_bytes"] / capacity, 4)
    return facts


def usable_capacity(facts: dict):
    """What the process may use: the card, or less when a per-process memory fraction caps it."""
    total, allowed = facts.get("total_capacity_bytes"), facts.get("allowed_bytes")
    if total and allowed:
        return min(total, allowed)
    return total or allowed


def fragmentation_suspected(facts: dict) -> bool | None:
    slack, requested = facts.get("reserved_unallocated_bytes"), facts.get("requested_bytes")
    if slack is None or requested is None:
        return None
    capacity = usable_capacity(facts)
    floor = capacity * FRAGMENTATION_MIN_SHARE if capacity else FRAGMENTATION_MIN_BYTES_WITHOUT_CAPACITY
    return slack >= requested and slack >= floor


def fragmentation_close_call(facts: dict) -> bool:
    """Slack at least the request, but below the fragmentation floor and above 1 % of the GPU."""
    slack, requested = facts.get("reserved_unallocated_bytes"), facts.get("requested_bytes")
    if slack is None or requested is None or slack < requested:
        return False
    capacity = usable_capacity(facts)
    floor = (
        capacity * FRAGMENTATION_CLOSE_CALL_SHARE if capacity else FRAGMENTATION_CLOSE_CALL_MIN_BYTES_WITHOUT_CAPACITY
    )
    return slack >= floor


def close_call_wording(facts: dict) -> str:
    share = facts.get("reserved_unallocated_share")
    where = "what the process may use" if facts.get("allowed_bytes") else "the GPU"
    of_gpu = f" ({share * 100:.1f} % of {where})" if share is not None else ""
    return (
        f"{format_bytes(facts['reserved_unallocated_bytes'])} reserved but unallocated{of_gpu} could have served "
        f"the {format_bytes(facts['requested_bytes'])} request: fragmentation or capacity. Try expandable "
        "segments first (zero cost); if the OOM stays, the fixes after it apply"
    )


def apply_close_calls(findings, expandable_segments_on) -> None:
    """A capacity finding on the edge of fragmentation: say so, and put the zero-cost fix first."""
    for finding in findings:
        if finding.facts.get("fragmentation_close_call") is not True:
            continue
        if expandable_segments_on is True:  # already on: the slack was not the problem
            del finding.facts["fragmentation_close_call"]
        else:
            finding.facts["fragmentation_close_call"] = close_call_wording(finding.facts)
            finding.overrides = [EXPANDABLE_SEGMENTS, *(o for o in finding.overrides if o != EXPANDABLE_SEGMENTS)]
