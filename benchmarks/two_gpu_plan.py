#!/usr/bin/env python3
"""The predictions for the two- and four-GPU runs of tools/record_memory_calibration.py (names "t…"), made with
the memory model as committed before they were recorded, so the report can say how the model did as planned.

    python benchmarks/two_gpu_plan.py          # writes benchmarks/two_gpu_plan.json
    python benchmarks/memory_accuracy.py       # after recording: the model now, "two-GPU" set

Each prediction is `estimate`'s peak on the most-loaded GPU for the run's own launch command (torchrun with the
run's GPU count, so data parallel and the pipeline stages are what the run had), and its fit verdict on an H100.

A run already in the plan keeps its prediction (it may have been recorded). `python benchmarks/two_gpu_plan.py
advice` plans the advice runs: multi-GPU bases that do not fit an H100 (or are
tight), each as given and with the advised changes (up to three that fit and need no Transformer Engine, which
the GPU machine lacks), named t2N-<base>-<n>; tools/record_memory_calibration.py reads them from the plan. A run
on an H200 that fits measures the same `max allocated` as on an H100, so "fits an H100" is checked as that peak
under what PyTorch may reserve on an H100 (77,178 MiB), and "does not fit" as a peak over it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from advice_on_gpu import _needs_te, apply, estimate_launch  # noqa: E402
from record_memory_calibration import DISTOPT, GQA, LLAMA, RUNS, SELECTIVE, shape  # noqa: E402

from offloaddoctor.api import load_catalog  # noqa: E402

PLAN = ROOT / "benchmarks" / "two_gpu_plan.json"


# Planned after the first two recordings (t01-t19), with the model as committed then.
ADVICE_BASES = {
    "gpt13b-pp2-vpp2-mbs8": (
        2,
        f"{shape(24, 2048, 16, 2048, 8, 32000, gbs=64)} --bf16 {DISTOPT} --pipeline-model-parallel-size 2 "
        "--num-layers-per-virtual-pipeline-stage 6",
    ),
    "llama3b-pp2-vpp3-mbs4": (
        2,
        f"{shape(24, 3072, 24, 4096, 4, 32000, gbs=32)} --ffn-hidden-size 8192 --bf16 {DISTOPT} {LLAMA} {GQA} 8 "
        f"--untie-embeddings-and-output-weights {SELECTIVE} --pipeline-model-parallel-size 2 "
        "--num-layers-per-virtual-pipeline-stage 4",
    ),
    "llama5b-dp2-mbs2": (
        2,
        f"{shape(24, 4096, 32, 2048, 2, 32000, gbs=8)} --ffn-hidden-size 11008 --bf16 {DISTOPT} {LLAMA} "
        f"--untie-embeddings-and-output-weights {SELECTIVE}",
    ),
}
ADVISED_PER_BASE = 3


def _entry(gpus: int, report, **extra) -> dict:
    peak = report.estimate.peak_allocated_bytes / 2**20
    return {"gpus": gpus, "predicted_mib": round(peak), "verdict": report.verdict.status, **extra}


def main() -> int:
    catalog = load_catalog()
    plan = json.loads(PLAN.read_text()) if PLAN.exists() else {}
    planned: dict[str, dict] = {}  # a run already in the plan keeps its prediction as planned
    if sys.argv[1:] == ["advice"]:
        for n, (base, (gpus, args)) in enumerate(ADVICE_BASES.items(), 20):
            report = estimate_launch(args, gpus, catalog)
            planned[f"t{n}-{base}-0"] = _entry(gpus, report, args=args, change="as given")
            fitting = [s for s in report.suggestions if s.fits and not _needs_te(s.overrides)][:ADVISED_PER_BASE]
            for k, suggestion in enumerate(fitting, 1):
                changed = apply(args, suggestion.overrides)
                planned[f"t{n}-{base}-{k}"] = _entry(
                    gpus, estimate_launch(changed, gpus, catalog), args=changed, change=suggestion.change
                )
    else:
        for name, (gpus, _, args) in RUNS.items():
            if name.startswith("t") and name not in plan:
                planned[name] = _entry(gpus, estimate_launch(args, gpus, catalog))
    plan.update({name: entry for name, entry in planned.items() if name not in plan})
    for name, entry in plan.items():
        print(
            f"{name:36} {entry['gpus']}  {entry['predicted_mib']:9,} MiB  {entry['verdict']}  {entry.get('change', '')}"
        )
    PLAN.write_text(json.dumps(plan, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
