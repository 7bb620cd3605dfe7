"""Named fact parsers that signatures attach to their matches (`match.facts`)."""

from __future__ import annotations

from collections.abc import Callable

from offloaddoctor.scanning.oom import parse_oom


def _cpu_offload_layers(text: str, captures: dict) -> dict:
    layers = captures.get("num_layers")
    if isinstance(layers, int) and layers > 0:
        return {"max_offload_layers": layers - 1}
    return {}


# An OOM line without the caching allocator's figures (the CUDA runtime's `CUDA error: out of memory`,
# NCCL's own allocation failures, a cut message) is still an OOM; it says what to collect next time.
FIGURES_MISSING = (
    "not in this message, so fragmentation cannot be told from capacity; next time collect "
    "PYTORCH_CUDA_ALLOC_CONF, torch.cuda.memory_summary() at the failure, and --log-memory-interval N"
)


def _cuda_oom(text: str, captures: dict) -> dict:
    facts: dict[str, object] = dict(parse_oom(text))
    if "requested_bytes" not in facts:
        facts["allocator_figures"] = FIGURES_MISSING
    return facts


FACT_PARSERS: dict[str, Callable[[str, dict], dict]] = {
    "cuda-oom": _cuda_oom,
    "cpu-offload-layers": _cpu_offload_layers,
}


def captured_facts(groups: dict[str, str | None]) -> dict:
    """Named regex captures become facts; numbers become numbers."""
    facts: dict[str, int | float | str] = {}
    for name, value in groups.items():
        if value is None:
            continue
        try:
            facts[name] = int(value)
        except ValueError:
            try:
                facts[name] = float(value)
            except ValueError:
                facts[name] = value
    return facts
