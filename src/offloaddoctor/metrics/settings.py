"""The run's settings as its logs print them (the arguments block, the launch line, MCore's config reprs),
read by config/from_log.py's LogConfigCollector, and the offload settings picked out of them."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from offloaddoctor.coerce import boolean, number
from offloaddoctor.config.from_log import LogConfigCollector
from offloaddoctor.config.values import ConfigValue

OFFLOAD_KEYS = (
    "optimizer.optimizer_cpu_offload",
    "optimizer.optimizer_offload_fraction",
    "optimizer.overlap_cpu_optimizer_d2h_h2d",
    "optimizer.use_precision_aware_optimizer",
    "optimizer.offload_optimizer_states",
)


def latest_values(values: Iterable[ConfigValue]) -> dict[str, Any]:
    """Canonical key -> value; a value read later (a later line, a later source) wins."""
    return {value.key: value.value for value in values}


def final_arguments(collectors: Iterable[LogConfigCollector]) -> dict[str, Any]:
    """What the last start of the job ran with: each source's last segment (one per arguments block)."""
    return latest_values(v for c in collectors for v in c.segment_values(c.segment))


def offload_settings(arguments: dict[str, Any]) -> dict[str, Any]:
    """The five offload settings by field name; None where the log does not say."""
    return {key.split(".", 1)[1]: arguments.get(key) for key in OFFLOAD_KEYS}


def effective_offload_fraction(offload: dict[str, Any]) -> float | None:
    """The share of optimizer state updated on the CPU: 0 when optimizer_cpu_offload is off (Megatron-LM's
    argparse default fraction is 1.0 whether or not offloading is on), the fraction when it is on, None if
    the log does not say whether it is on."""
    enabled = boolean(offload.get("optimizer_cpu_offload"))
    if enabled is None:
        return None
    if not enabled:
        return 0.0
    return number(offload.get("optimizer_offload_fraction"))


def segment_offload(collector: LogConfigCollector, segment: int) -> dict[str, Any]:
    """The offload settings one segment printed (empty when it printed none)."""
    values = latest_values(collector.segment_values(segment))
    return {k.split(".", 1)[1]: values[k] for k in OFFLOAD_KEYS if k in values}
