#!/usr/bin/env python3
"""The host-memory predictions for tools/probe_host_memory.py's held-out probes, made with the memory model as
committed before they ran, so docs/estimate.md can say how the host figure did on runs it was not fitted on.

    python benchmarks/host_plan.py NAME...     # adds the named probes to benchmarks/host_plan.json
    python benchmarks/host_memory_accuracy.py  # after recording: measured against the model now

Each prediction is `estimate`'s host figure for the probe's own launch command (benchmarks/advice_on_gpu.py
estimate_launch), a rank and the node (all the probe's ranks run on one host). A probe already planned keeps it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from advice_on_gpu import estimate_launch  # noqa: E402
from probe_host_memory import PROBES  # noqa: E402

from offloaddoctor.api import load_catalog  # noqa: E402

PLAN = ROOT / "benchmarks" / "host_plan.json"


def main(names: list[str]) -> int:
    unknown = [name for name in names if name not in PROBES]
    if not names or unknown:
        raise SystemExit(f"usage: host_plan.py NAME... (probes of tools/probe_host_memory.py); unknown: {unknown}")
    catalog = load_catalog()
    plan = json.loads(PLAN.read_text())
    for name in names:
        if name in plan:
            continue
        gpus, args, env = PROBES[name]
        result = estimate_launch(args, gpus, catalog, "H100-80GB", env or None).estimate
        plan[name] = {
            "gpus": gpus,
            "host_used_gib_a_rank": round(result.host_bytes / 2**30, 2),
            "host_used_gib": round(result.host_bytes_for(gpus) / 2**30, 2),
        }
        print(f"{name}: {plan[name]}")
    PLAN.write_text(json.dumps(plan, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
