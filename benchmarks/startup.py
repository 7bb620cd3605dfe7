#!/usr/bin/env python3
"""CLI start-up: `offloaddoctor diagnose --format json` on a 1 KB log against `python3 -c pass`, median of
N runs each. usage: python3 benchmarks/startup.py [N]"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def median_seconds(command: list[str], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    lines = (ROOT / "fixtures" / "pp-cpu-offload" / "job.log").read_text().splitlines()[-12:]
    with tempfile.NamedTemporaryFile("w", suffix=".log", delete=False) as log:
        log.write("\n".join(lines)[:1024] + "\n")
    bare = median_seconds([sys.executable, "-c", "pass"], runs)
    ours = median_seconds([sys.executable, "-m", "offloaddoctor", "diagnose", log.name, "--format", "json"], runs)
    print(f"python3 -c pass: {bare * 1000:.0f} ms | diagnose --format json on 1 KB: {ours * 1000:.0f} ms "
          f"({ours / bare:.1f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
