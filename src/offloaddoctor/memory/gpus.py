"""GPU memory capacities (what nvidia-smi reports as total) and parsing of sizes such as `80GiB`."""

from __future__ import annotations

import math

from offloaddoctor.byte_units import MIB
from offloaddoctor.byte_units import STANDARD as _UNITS
from offloaddoctor.errors import UserError
from offloaddoctor.lazy_pattern import lazy_compile

# name -> (total MiB as nvidia-smi reports it, where the figure comes from)
GPUS: dict[str, tuple[int, str]] = {
    "H100-80GB": (81559, "nvidia-smi on the H100 80GB HBM3 the calibration runs used"),
    "H200": (143771, "nvidia-smi on the H200 the calibration runs used"),
    "A100-80GB": (81920, "nvidia-smi total of an A100 80GB (not measured here)"),
    "A100-40GB": (40960, "nvidia-smi total of an A100 40GB (not measured here)"),
    "B200": (
        183359,
        "nvidia-smi total of a B200 as publicly reported (not measured here; pass --gpu-memory to be exact)",
    ),
    "GB200": (
        189471,
        "nvidia-smi total of a GB200 as publicly reported (not measured here; pass --gpu-memory to be exact)",
    ),
}
_SIZE = lazy_compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]+)\s*$")


def gpu_memory(name: str) -> tuple[int, str]:
    """(bytes, source) of a named GPU; case and `-`/`_`/space are ignored."""
    wanted = name.replace("_", "-").replace(" ", "-").upper()
    for known, (mib, source) in GPUS.items():
        if known.upper() == wanted or (wanted == "H100" and known == "H100-80GB"):
            return mib * MIB, f"{known}: {source}"
    raise UserError(f"--gpu {name}: unknown GPU (known: {', '.join(GPUS)}); or give --gpu-memory SIZE")


def parse_size(text: str, option: str) -> int:
    """`80GiB`, `80GB`, `81559MiB` -> bytes. A unit is required: 80 could be GB or GiB."""
    match = _SIZE.match(text)
    unit = match and _UNITS.get(match.group(2).lower())
    if not match or not unit:
        raise UserError(f"{option} {text}: give a size with a unit, e.g. 80GiB, 80GB or 81559MiB")
    value = float(match.group(1)) * unit
    if not math.isfinite(value) or value <= 0:
        raise UserError(f"{option} {text}: the size must be positive")
    return int(value)
