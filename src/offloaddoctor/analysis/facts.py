"""Named fact parsers that signatures attach to their matches (`match.facts`)."""

from __future__ import annotations

from collections.abc import Callable

from offloaddoctor.analysis.oom import parse_oom


def _cpu_offload_layers(text: str, captures: dict) -> dict:
    layers = captures.get("num_layers")
    if isinstance(layers, int) and layers > 0:
        return {"max_offload_layers": layers - 1}
    return {}


FACT_PARSERS: dict[str, Callable[[str, dict], dict]] = {
    "cuda-oom": lambda text, captures: parse_oom(text),
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
