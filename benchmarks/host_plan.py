#!/usr/bin/env python3
"""The host-memory predictions for tools/probe_host_memory.py's held-out probes, made with the memory model as
committed before they ran, so docs/estimate.md can say how the host figure did on runs it was not fitted on.

    python benchmarks/host_plan.py NAME...     # adds the named probes to benchmarks/host_plan.json
    python benchmarks/host_memory_accuracy.py  # after recording: measured against the model now

Each prediction is `estimate`'s host figure for the probe's own launch command (benchmarks/advice_on_gpu.py
estimate_launch), a rank and the node (all the probe's ranks run on one host). A probe already planned keeps it.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from moe_plan import estimate_launch, plan_each  # noqa: E402 (moe_plan puts src/ and tools/ on the path)
from probe_host_memory import PROBES  # noqa: E402

PLAN = ROOT / "benchmarks" / "host_plan.json"


def _predict(name: str, catalog) -> dict:
    gpus, args, env = PROBES[name]
    result = estimate_launch(args, gpus, catalog, "H100-80GB", env or None).estimate
    return {
        "gpus": gpus,
        "host_used_gib_a_rank": round(result.host_bytes / 2**30, 2),
        "host_used_gib": round(result.host_bytes_for(gpus) / 2**30, 2),
    }


if __name__ == "__main__":
    sys.exit(plan_each(sys.argv[1:], PROBES, PLAN, "probes of tools/probe_host_memory.py", _predict))
