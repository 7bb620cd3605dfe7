"""Numbers as Megatron prints them, and memory sizes in one unit.

Megatron-LM computes its "MB" as bytes / 1024**2 (`report_memory`, the theoretical-memory line), so on those
lines "MB" is a mebibyte in all but name, and Bridge's theoretical "GB" is bytes / 1024**3. Bridge's newer
memory report divides by 1e9 and says "GB" / "gigabytes": a decimal gigabyte. Every size we hand out is in
MiB, labelled `_mb` the way Megatron labels it, so numbers read from either tool compare directly.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

from offloaddoctor.byte_units import BRIDGE_REPORT, MEGATRON, MIB

_NUMBER = re.compile(r"[-+]?(?:(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|nan|inf(?:inity)?)", re.IGNORECASE)

# Bytes per printed unit on Megatron/Bridge lines (byte_units.py: the "MB" that is a MiB).
MEGATRON_UNIT_BYTES = MEGATRON
# Bridge's `report_memory`: bytes / 1e9 under the name "GB" / "<metric>-gigabytes".
BRIDGE_REPORT_UNIT_BYTES = BRIDGE_REPORT


def parse_number(text: str) -> float | None:
    """`1234.5`, `9.779754E-05`, `470503424`, `NAN`, `-inf` -> float; anything else -> None."""
    text = text.strip()
    if not _NUMBER.fullmatch(text):
        return None
    return float(text)


def to_mib(value: float, unit: str, table: Mapping[str, float] = MEGATRON_UNIT_BYTES) -> float | None:
    """A printed size in MiB, or None for a unit the table does not know."""
    factor = table.get(unit.strip().lower())
    if factor is None:
        return None
    return value * factor / MIB


def as_count(value: float | None) -> int | None:
    if value is None or not math.isfinite(value):
        return None
    return int(value)
