#!/usr/bin/env python3
"""Time `offloaddoctor diagnose --format json` on logs next to GNU `grep -F -f` for the catalogue's error
strings in the same file, and report peak memory. Runs alternate (grep, ours, grep, ours, ...) so that
both see the same machine; the ratio reported is the median of the per-pair ratios.

usage: python3 benchmarks/scan_speed.py [--runs N] LOG [LOG ...]

grep writes to a temporary file, not /dev/null: GNU grep stops at the first match when its output is
/dev/null, which would flatter it on a log whose failure is near the top.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def run(command: list[str], stdout) -> tuple[float, int, float]:
    """(seconds, exit code, peak RSS in MB) of one child."""
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=stdout)
    _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    return elapsed, process.returncode, usage.ru_maxrss / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("logs", nargs="+", type=Path)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    from offloaddoctor.api import load_catalog

    literals = sorted({lit for s in load_catalog().signatures if s.match for lit in s.match.literals})
    with tempfile.TemporaryDirectory() as scratch:
        patterns = Path(scratch) / "patterns.txt"
        patterns.write_text("\n".join(literals) + "\n")
        for log in args.logs:
            size = log.stat().st_size / 1e6
            ratios, ours_times, grep_times, peaks = [], [], [], []
            for _ in range(args.runs):
                with open(Path(scratch) / "grep.out", "wb") as sink:
                    grep_s, grep_rc, _ = run(["grep", "-F", "-f", str(patterns), str(log)], sink)
                with open(Path(scratch) / "ours.json", "wb") as sink:
                    ours_s, ours_rc, peak = run(
                        [sys.executable, "-m", "offloaddoctor", "diagnose", str(log), "--format", "json"], sink
                    )
                report = json.loads((Path(scratch) / "ours.json").read_text())
                if grep_rc not in (0, 1) or ours_rc not in (0, 1) or "findings" not in report:
                    print(f"{log}: a run failed (grep exit {grep_rc}, offloaddoctor exit {ours_rc})", file=sys.stderr)
                    return 2
                ratios.append(ours_s / grep_s)
                ours_times.append(ours_s)
                grep_times.append(grep_s)
                peaks.append(peak)
            ours_s, grep_s = statistics.median(ours_times), statistics.median(grep_times)
            print(
                f"log {size:.0f} MB | grep -F -f: {grep_s:.2f} s | offloaddoctor: {ours_s:.2f} s "
                f"({size / ours_s:.0f} MB/s) | ratio {statistics.median(ratios):.2f}x grep "
                f"(runs: {', '.join(f'{r:.2f}' for r in ratios)}) | peak RSS {max(peaks):.0f} MB "
                f"| {len(report['findings'])} findings"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
