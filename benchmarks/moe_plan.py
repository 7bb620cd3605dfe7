#!/usr/bin/env python3
"""The predictions for the runs of tools/record_memory_calibration.py that group `moe` records (the MoE hold-outs
e06 on, and n15, a dense unfused SwiGLU), made with the memory model as committed before they were recorded, so
the report can say how the terms did on runs they were not derived against.

    python benchmarks/moe_plan.py NAME...      # adds the named runs to benchmarks/moe_plan.json
    python benchmarks/memory_accuracy.py       # after recording: the model now, "MoE hold-out" set

Each prediction is `estimate`'s peak for the run's own launch command (benchmarks/advice_on_gpu.py estimate_launch,
as benchmarks/two_gpu_plan.py does) and its fit verdict on an H100 80GB (on an H200 for a name ending "-h200").
A run already in the plan keeps its prediction.
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
from record_memory_calibration import RUN_ENV, RUNS  # noqa: E402

from offloaddoctor.api import load_catalog  # noqa: E402

PLAN = ROOT / "benchmarks" / "moe_plan.json"


def main(names: list[str]) -> int:
    return plan_each(names, RUNS, PLAN, "runs of record_memory_calibration.py", _predict)


def plan_each(names: list[str], known, plan_path: Path, what: str, predict) -> int:
    """Add `predict(name, catalog)` to the plan file for each named entry of `known` not planned yet (a planned one
    keeps its prediction). Shared with benchmarks/host_plan.py."""
    unknown = [name for name in names if name not in known]
    if not names or unknown:
        raise SystemExit(f"usage: {Path(sys.argv[0]).name} NAME... ({what}); unknown: {unknown}")
    catalog = load_catalog()
    plan = json.loads(plan_path.read_text()) if plan_path.exists() else {}
    for name in names:
        if name not in plan:
            plan[name] = predict(name, catalog)
            print(f"{name}: {plan[name]}")
    plan_path.write_text(json.dumps(plan, indent=1) + "\n")
    return 0


def _predict(name: str, catalog) -> dict:
    gpus, _, args = RUNS[name]
    gpu = "H200" if name.endswith("-h200") else "H100-80GB"
    report = estimate_launch(args, gpus, catalog, gpu, RUN_ENV.get(name))
    most = report.estimate.most_loaded
    return {
        "gpus": gpus,
        "predicted_mib": round(report.estimate.peak_allocated_bytes / 2**20),
        "phase": most.phase,
        "activations_mib": round(next(c.bytes for c in most.components if c.name == "activations") / 2**20),
        "verdict": report.verdict.status,
        **({"gpu": gpu} if gpu != "H100-80GB" else {}),
        **({"env": RUN_ENV[name]} if name in RUN_ENV else {}),
    }


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
