"""Byte quantities as PyTorch and Megatron print them."""

from __future__ import annotations

import math

from offloaddoctor.byte_units import STANDARD
from offloaddoctor.lazy_pattern import lazy_compile

_FACTORS = STANDARD  # the unit as printed: PyTorch says MiB/GiB where it means them
QUANTITY = r"(\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)\s*(bytes?|[KMGT]i?B|B)\b"
_QUANTITY = lazy_compile(QUANTITY)


def to_bytes(amount: str, unit: str) -> int | None:
    """None for a figure no GPU has (an overflow to infinity in a damaged or hostile line)."""
    value = float(amount) * _FACTORS[unit.lower()]
    return round(value) if math.isfinite(value) else None


def parse_quantity(text: str) -> int | None:
    match = _QUANTITY.fullmatch(text.strip())
    return to_bytes(*match.groups()) if match else None


def format_bytes(count: float | None) -> str:
    if count is None:
        return "?"
    for unit, factor in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if abs(count) >= factor:
            return f"{count / factor:.2f} {unit}"
    return f"{int(count)} bytes"
