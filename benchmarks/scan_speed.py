#!/usr/bin/env python3
"""Time `offloaddoctor diagnose --format json` on a log and report peak memory, next to `grep -F` for the
same error strings. usage: python3 benchmarks/scan_speed.py LOG"""

from __future__ import annotations

import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def timed(command: list[str]) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, stdout=subprocess.DEVNULL, check=False)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return elapsed, max(after.ru_maxrss, before.ru_maxrss) / 1024


def main() -> int:
    log = Path(sys.argv[1])
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    from offloaddoctor.catalog.loader import load_catalog

    literals = sorted({lit for s in load_catalog().signatures if s.match for lit in s.match.literals})
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as patterns:
        patterns.write("\n".join(literals) + "\n")
    size = log.stat().st_size / 1e6
    grep_s, _ = timed(["grep", "-F", "-f", patterns.name, str(log)])
    ours_s, rss = timed([sys.executable, "-m", "offloaddoctor", "diagnose", str(log), "--format", "json"])
    print(f"log {size:.0f} MB | grep -F -f: {grep_s:.2f} s | offloaddoctor: {ours_s:.2f} s "
          f"({size / ours_s:.0f} MB/s, {ours_s / grep_s:.1f}x grep) | peak RSS {rss:.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
