#!/usr/bin/env python3
"""The memory model's host figure against what each probe's host gave up (fixtures/memory-calibration/host-memory).

    python benchmarks/host_memory_accuracy.py [--markdown]

Measured: the largest fall of the host's MemAvailable from the first sample of a rank's trace (tools/host_trace.py),
over the probe's ranks (they share the host: the figure is the node's). Model: `estimate`'s host figure for the
probe's log, for all its ranks (every pipeline stage's). Sets: "fitted" (the runs memory/calibration.py's host constants come from),
"checked" (same kinds, not fitted), "held out" (planned in benchmarks/host_plan.json before they ran), "killed" (a
held-out run its host killed, as planned: what the host gave up is what it had, not what the run needed).
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from offloaddoctor.api import estimate  # noqa: E402

HOST = ROOT / "fixtures" / "memory-calibration" / "host-memory"
# p23 was planned before it ran (benchmarks/host_plan.json: +1.7 %); the workers' own pages were then fitted on it.
# p41 too (+11.8 % as planned): the pages of workers forked in the training loop were then fitted on it.
FITTED = {
    "p41-gpt1b-f100-gc-eval2-cyclic-w8",
    "p02-gpt1b-f100-gc",
    "p04-gpt1b-f100-gc-pa-off",
    "p05-gpt3b-f100-mbs3-gc",
    "p07-gpt1b-dp2-f050-gc",
    "p23-gpt3b-f100-mbs3-gc-w0",
}
GIB = 2**30


def measured_bytes(name: str) -> float:
    """The most the host's available memory fell while any of the probe's ranks traced it."""
    falls = []
    for trace in sorted(HOST.glob(f"{name}.host.*.gz")):
        with gzip.open(trace, "rt") as samples:
            available = [
                int(field.split("=")[1])
                for line in samples
                for field in line.split("\t")
                if field.startswith("MemAvailable=")
            ]
        falls.append(available[0] - min(available))
    return max(falls) * 1024


def _killed(log: Path) -> bool:
    with gzip.open(log, "rt") as text:
        return any("Signal 9 (SIGKILL) received by PID" in line for line in text)


def rows() -> list[tuple[str, int, float, float, str]]:
    planned = json.loads((ROOT / "benchmarks" / "host_plan.json").read_text())
    found = []
    for log in sorted(HOST.glob("p*.log.gz")):
        name = log.name.removesuffix(".log.gz")
        report = estimate([str(log)])
        ranks = report.estimate.shape.world_size
        kind = "fitted" if name in FITTED else "held out" if name in planned else "checked"
        if kind == "held out" and _killed(log):
            kind = "killed"
        found.append((name, ranks, measured_bytes(name), report.estimate.host_bytes_for(ranks), kind))
    return found


def main(markdown: bool) -> None:
    if markdown:
        print("| probe | ranks | host used, GiB | model, GiB | error | set |\n|---|---|---|---|---|---|")
    for name, ranks, measured, model, kind in rows():
        error = f"{(model - measured) / measured:+.1%}"
        if markdown:
            print(f"| {name} | {ranks} | {measured / GIB:,.1f} | {model / GIB:,.1f} | {error} | {kind} |")
        else:
            print(f"{name:<32} {ranks}  {measured / GIB:7.1f}  {model / GIB:7.1f}  {error:>7}  {kind}")


if __name__ == "__main__":
    main("--markdown" in sys.argv[1:])
