#!/usr/bin/env python3
"""The predictions for the two- and four-GPU runs of tools/record_memory_calibration.py (names "t…"), made with
the memory model as committed before they were recorded, so the report can say how the model did as planned.

    python benchmarks/two_gpu_plan.py          # writes benchmarks/two_gpu_plan.json
    python benchmarks/memory_accuracy.py       # after recording: the model now, "two-GPU" set

Each prediction is `estimate`'s peak on the most-loaded GPU for the run's own launch command (torchrun with the
run's GPU count, so data parallel and the pipeline stages are what the run had), and its fit verdict on an H100.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tools"))

from record_memory_calibration import COMMON, RUNS  # noqa: E402

from offloaddoctor.api import estimate, load_catalog  # noqa: E402

PLAN = ROOT / "benchmarks" / "two_gpu_plan.json"


def main() -> int:
    catalog = load_catalog()
    plan = {}
    for name, (gpus, _, args) in RUNS.items():
        if not name.startswith("t"):
            continue
        with tempfile.NamedTemporaryFile("w", suffix=".sh") as script:
            script.write(f"torchrun --nproc-per-node {gpus} pretrain_gpt.py {COMMON} {args}\n")
            script.flush()
            report = estimate([script.name], gpu="H100-80GB", catalog=catalog)
        peak = report.estimate.peak_allocated_bytes / 2**20
        plan[name] = {"gpus": gpus, "predicted_mib": round(peak), "verdict": report.verdict.status}
        print(f"{name:32} {gpus}  {peak:9,.0f} MiB  {report.verdict.status}")
    PLAN.write_text(json.dumps(plan, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
