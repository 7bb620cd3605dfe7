#!/usr/bin/env python3
"""How close is `offloaddoctor estimate` to what real runs measured, and how close is Megatron's own formula?

    python benchmarks/memory_accuracy.py [--markdown]

For every recorded run (fixtures/memory-calibration/*.log.gz and fixtures/compare-family/*.log): the measured
peak (`max allocated` of Megatron's memory report, the largest over ranks and iterations), our estimate made
from the log's own arguments block (nothing else), and Megatron's "Theoretical memory footprints" line. Runs
whose name starts with "h" were held out of calibration (memory/calibration.py); runs starting with "n" were
recorded after the model was frozen (commit 23e1289) and never used to change it; runs starting with "e" are
MoE runs recorded after the MoE formulas were written, never used to change them; runs starting with "t" are
issue 25's two- and four-GPU runs (PP with VPP, DP/TP sharding a partially offloaded optimizer), planned with
the model as committed before each recording (benchmarks/two_gpu_plan.json). Each set is reported apart.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MOE_PLAN = json.loads((ROOT / "benchmarks" / "moe_plan.json").read_text())
sys.path.insert(0, str(ROOT / "src"))

from offloaddoctor.api import estimate  # noqa: E402

MEMORY = re.compile(
    r"\[Rank \d+\] \(after \d+ iterations\) memory \(MB\) \| allocated: [\d.]+ \| "
    r"max allocated: ([\d.]+)"
)
RESERVED = re.compile(r"max reserved: ([\d.]+)")
THEORY = re.compile(r"Theoretical memory footprints: .* total=([\d.]+) MB")


def runs():
    folder = ROOT / "fixtures" / "memory-calibration"
    for path in sorted(folder.glob("*.log.gz")):
        with gzip.open(path, "rt") as handle:
            text = handle.read()
        yield path.name.removesuffix(".log.gz"), path, text
    for path in sorted((ROOT / "fixtures" / "compare-family").glob("*.log")):
        yield f"cf-{path.stem}", path, path.read_text()
    # The runs near the 80 GB limit (fixtures/offload-sweep) that ran all three iterations.
    for path in sorted((ROOT / "fixtures" / "offload-sweep").glob("*.log.gz")):
        with gzip.open(path, "rt") as handle:
            text = handle.read()
        if "(after 3 iterations) memory (MB)" in text:
            yield f"sweep:{path.name.removesuffix('.log.gz')}", path, text


# The sweep's own table says which of its runs are held out (tools/finish_offload_sweep.py decides it).
SWEEP_HELD_OUT = {
    row.split("\t")[0]
    for row in (ROOT / "fixtures" / "offload-sweep" / "runs.tsv").read_text().splitlines()[1:]
    if row.split("\t")[6] == "yes"
}


def _set(name: str) -> str:
    if name.startswith("sweep:"):
        return "sweep, held out" if name[6:] in SWEEP_HELD_OUT else "sweep, calibration"
    if name in MOE_PLAN and name[0] == "e":  # planned in benchmarks/moe_plan.json before recording
        return "MoE hold-out"
    return {"h": "held out", "n": "after freeze", "e": "MoE", "t": "multi-GPU"}.get(name[0], "calibration")


def nvidia_smi_peaks() -> dict[str, float]:
    table = ROOT / "fixtures" / "memory-calibration" / "runs.tsv"
    rows = [line.split("\t") for line in table.read_text().splitlines()[1:]]
    return {row[0]: float(row[3]) for row in rows if float(row[3]) > 0}


def measure():
    rows = []
    smi = nvidia_smi_peaks()
    for name, path, text in runs():
        peaks = [float(m) for m in MEMORY.findall(text)]
        theory = THEORY.search(text)
        result = estimate([str(path)])
        ours = result.estimate.peak_allocated_bytes / 2**20
        measured = max(peaks)
        rows.append(
            {
                "run": name,
                "held_out": "held out" in _set(name) or "hold-out" in _set(name) or name[0] in "net",
                "set": _set(name),
                "measured": measured,
                "ours": ours,
                "ours_error": 100 * (ours - measured) / measured,
                # The peak if Python's garbage collector freed optimizer offloading's first build in time.
                "collected_error": _error(result.estimate.peak_allocated_if_collected_bytes / 2**20, measured),
                "megatron": float(theory.group(1)) if theory else None,
                "megatron_error": 100 * (float(theory.group(1)) - measured) / measured if theory else None,
                "phase": result.estimate.most_loaded.phase,
                "reserved_error": _error(
                    result.estimate.reserved_bytes[0] / 2**20, max(float(m) for m in RESERVED.findall(text))
                ),
                "smi_error": _error(result.estimate.nvidia_smi_bytes[0] / 2**20, smi[name]) if name in smi else None,
            }
        )
    return rows


def _error(ours: float, measured: float) -> float:
    return 100 * (ours - measured) / measured


def summary(rows, key):
    errors = [abs(r[key]) for r in rows if r[key] is not None]
    if not errors:
        return "no runs"
    within = sum(e <= 10 for e in errors)
    return (
        f"median |error| {statistics.median(errors):.2f} %, max {max(errors):.1f} %, "
        f"within ±10 %: {within}/{len(errors)} ({100 * within / len(errors):.1f} %)"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    args = parser.parse_args()
    rows = measure()
    if args.markdown:
        print("| run | held out | measured MiB | ours MiB | ours error | Megatron MiB | Megatron error |")
        print("|---|---|---:|---:|---:|---:|---:|")
        for r in rows:
            print(
                f"| {r['run']} | {'yes' if r['held_out'] else 'no'} | {r['measured']:,.0f} | {r['ours']:,.0f} | "
                f"{r['ours_error']:+.2f} % | {r['megatron'] or 0:,.0f} | {r['megatron_error'] or 0:+.1f} % |"
            )
    else:
        print(
            f"{'run':26} {'held':4} {'measured':>9} {'ours':>9} {'error':>8} {'megatron':>9} {'error':>8}  peak during"
        )
        for r in rows:
            print(
                f"{r['run']:26} {'yes' if r['held_out'] else 'no':4} {r['measured']:9.0f} {r['ours']:9.0f} "
                f"{r['ours_error']:+7.2f}% {r['megatron'] or 0:9.0f} {r['megatron_error'] or 0:+7.1f}%  {r['phase']}"
            )
    for label, subset in (
        ("calibration", [r for r in rows if r["set"] == "calibration"]),
        ("held out", [r for r in rows if r["set"] == "held out"]),
        ("after freeze", [r for r in rows if r["set"] == "after freeze"]),
        ("MoE", [r for r in rows if r["set"] == "MoE"]),
        ("MoE hold-out", [r for r in rows if r["set"] == "MoE hold-out"]),
        ("multi-GPU", [r for r in rows if r["set"] == "multi-GPU"]),
        ("sweep, calib", [r for r in rows if r["set"] == "sweep, calibration"]),
        ("sweep, held", [r for r in rows if r["set"] == "sweep, held out"]),
        ("all", rows),
    ):
        if not subset:  # the MoE hold-outs until they are recorded
            continue
        print(f"{label:12} ({len(subset):2} runs)  ours: {summary(subset, 'ours_error')}")
        in_range = sum(min(abs(r["ours_error"]), abs(r["collected_error"])) <= 2 for r in subset)
        print(f"{'':12} {'':10} within 2 % of one end of [collected, not collected]: {in_range}/{len(subset)}")
        print(f"{'':12} {'':10} Megatron: {summary(subset, 'megatron_error')}")
        print(f"{'':12} {'':10} reserved: {summary(subset, 'reserved_error')}")
        print(f"{'':12} {'':10} nvidia-smi: {summary(subset, 'smi_error')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
