"""Byte units, in the two readings our inputs use. One table, so "MB" is never read two ways by accident.

- `STANDARD`: what the unit says. PyTorch's OOM message ("4.00 GiB", "546.00 MiB") and sizes a user types
  (`--gpu-memory 80GB` is 80 * 10**9 bytes, `80GiB` is 80 * 2**30).
- `MEGATRON`: Megatron-LM computes its "MB" as bytes / 1024**2 (`report_memory`, the theoretical-memory line)
  and Bridge's theoretical "GB" as bytes / 1024**3: binary units under decimal names.
- `BRIDGE_REPORT`: Bridge's newer memory report divides by 1e9 and says "GB" / "gigabytes": decimal.
"""

from __future__ import annotations

MIB = 1024**2
GIB = 1024**3

_BINARY = {"b": 1, "byte": 1, "bytes": 1, "kib": 1024, "mib": MIB, "gib": GIB, "tib": 1024**4}
STANDARD: dict[str, float] = {**_BINARY, "kb": 1000, "mb": 1000**2, "gb": 1000**3, "tb": 1000**4}
MEGATRON: dict[str, float] = {**_BINARY, "kb": 1024, "mb": MIB, "gb": GIB}
BRIDGE_REPORT: dict[str, float] = {**MEGATRON, "gb": 1e9, "gigabytes": 1e9, "megabytes": MIB}
