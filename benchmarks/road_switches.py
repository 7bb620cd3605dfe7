#!/usr/bin/env python3
"""Does a road of the log reader pay? `diagnose` as it is against `diagnose` with one road switched off.

A road is switched off by raising the size it starts at (a module constant) past any log, in the child
process only: nothing in the code changes. The pairs run interleaved, N runs each; printed are the medians
of wall and CPU seconds, the median of the per-pair ratios, and whether the two JSON reports are the same
byte for byte (a road must never change a finding).

  cover     logs/literal_cover.py: fewer, shared patterns for a file of COVER_MIN_BYTES or more (removed in
            the sixth round: reported as removed)
  split     logs/grep_prefilter.py: two greps, one a half, from SPLIT_MIN_BYTES
  gz-spool  logs/candidates.py: a large .gz decompressed by gzip(1) into a temporary file, then read on the
            grep road (until the sixth round one grep followed gzip as it wrote: the feeder); off, the .gz is
            read in Python (gzip module, block reader), as a small or damaged one is

usage: python3 benchmarks/road_switches.py [--runs N] [--roads cover,split,gz-spool] LOG...
(A road whose constant is gone from the code is reported as such: it was removed.)
"""

from __future__ import annotations

import argparse
import filecmp
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NEVER = 1 << 62
SWITCHES = {
    "cover": ("offloaddoctor.logs.candidates", "COVER_MIN_BYTES"),
    "split": ("offloaddoctor.logs.grep_prefilter", "SPLIT_MIN_BYTES"),
    "gz-spool": ("offloaddoctor.logs.candidates", "GZ_SPOOL_MIN_BYTES"),
}
RUN = """
import importlib, runpy, sys
for module, name in {switches!r}:
    setattr(importlib.import_module(module), name, {never})
sys.argv = ["offloaddoctor", "diagnose", {log!r}, "--format", "json"]
runpy.run_module("offloaddoctor", run_name="__main__", alter_sys=True)
"""


def has_switch(road: str) -> bool:
    module, name = SWITCHES[road]
    source = ROOT / "src" / (module.replace(".", "/") + ".py")
    return source.exists() and f"\n{name} = " in source.read_text()


def timed(log: str, switches: list[tuple[str, str]], out: str) -> tuple[float, float, int]:
    """(wall s, CPU s of the child and its children, exit code)."""
    code = RUN.format(switches=switches, never=NEVER, log=log)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    start = time.perf_counter()
    with open(out, "wb") as sink:
        process = subprocess.Popen([sys.executable, "-c", code], stdout=sink, stderr=subprocess.DEVNULL, env=env)
        _, status, usage = os.wait4(process.pid, 0)
    return time.perf_counter() - start, usage.ru_utime + usage.ru_stime, os.waitstatus_to_exitcode(status)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("logs", nargs="+")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--roads", default=",".join(SWITCHES))
    args = parser.parse_args()
    print(
        f"cores: {len(os.sched_getaffinity(0))}, load average at start: {os.getloadavg()[0]:.2f}; {args.runs} pairs\n"
    )
    print("| log | road off | as is (s) | off (s) | ratio off/as is (pairs) | CPU as is / off (s) | same report |")
    print("|---|---|---:|---:|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="road-switches-") as scratch:
        for log in args.logs:
            for road in [r for r in args.roads.split(",") if r]:
                if not has_switch(road):
                    print(f"| {os.path.basename(log)} | {road} | | | removed from the code | | |")
                    continue
                base, off, same = [], [], True
                for _ in range(args.runs):
                    base.append(timed(log, [], os.path.join(scratch, "base.json")))
                    off.append(timed(log, [SWITCHES[road]], os.path.join(scratch, "off.json")))
                    same = same and filecmp.cmp(
                        os.path.join(scratch, "base.json"), os.path.join(scratch, "off.json"), shallow=False
                    )
                if any(rc not in (0, 1) for *_, rc in base + off):
                    print(f"| {os.path.basename(log)} | {road} | a run failed | | | | |")
                    continue
                ratios = ", ".join(f"{o[0] / b[0]:.2f}" for b, o in zip(base, off))
                ratio = statistics.median(o[0] / b[0] for b, o in zip(base, off))
                print(
                    f"| {os.path.basename(log)} | {road} | {statistics.median(b[0] for b in base):.2f} "
                    f"| {statistics.median(o[0] for o in off):.2f} | **{ratio:.2f}** ({ratios}) "
                    f"| {statistics.median(b[1] for b in base):.2f} / {statistics.median(o[1] for o in off):.2f} "
                    f"| {'yes' if same else 'NO'} |",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
