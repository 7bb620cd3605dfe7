#!/usr/bin/env python3
"""Instructions `diagnose`'s scanner spends on one file of a directory of rank logs: the figure the scan-speed
rounds compare versions by (docs/performance.md), as wall time on this shared machine swings by ±30 %.

Under `valgrind --tool=cachegrind --cache-sim=no`, one serial Scanner reads the directory's first WARM_UP
files (caches, the literals' finder), and a second Scanner the next N; the same script reading none after the
warm-up is subtracted, and the rest divided by N. Serial, in one process: no pool, no report, no JSON.

usage: python3 benchmarks/instructions_per_file.py DIR [N]      (valgrind must be installed)
OFFLOADDOCTOR_ROOT=DIR measures another tree's src/ (e.g. `git archive BASE src signatures | tar -x -C DIR`).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(os.environ.get("OFFLOADDOCTOR_ROOT") or Path(__file__).resolve().parents[1])
WARM_UP = 300

_SCAN = """
import gc, sys
sys.path.insert(0, {src!r})
gc.set_threshold(100_000, 50, 100)  # as the CLI sets it
from offloaddoctor.api import load_catalog
from offloaddoctor.scanning.scanner import Scanner, build_matchers
from offloaddoctor.logs.sources import resolve_sources
matchers = build_matchers(load_catalog())
sources = resolve_sources([{directory!r}])
Scanner(matchers).scan(sources[:{warm_up}])
if {count}:
    Scanner(matchers).scan(sources[{warm_up}:{warm_up} + {count}])
"""


def instructions(directory: Path, count: int) -> int:
    script = _SCAN.format(src=str(ROOT / "src"), directory=str(directory), warm_up=WARM_UP, count=count)
    done = subprocess.run(
        [
            "valgrind",
            "--tool=cachegrind",
            "--cache-sim=no",
            "--cachegrind-out-file=/dev/null",
            sys.executable,
            "-c",
            script,
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    found = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
    if found is None:
        raise SystemExit(f"no instruction count in valgrind's output:\n{done.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def main() -> None:
    if len(sys.argv) not in (2, 3):
        raise SystemExit(__doc__.strip().splitlines()[-1])
    directory = Path(sys.argv[1])
    count = int(sys.argv[2]) if len(sys.argv) == 3 else 1000
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed")
    files = sum(1 for entry in os.scandir(directory) if entry.is_file())
    if files < WARM_UP + count:
        raise SystemExit(f"{directory}: {files} files; {WARM_UP + count} needed (warm-up {WARM_UP} + {count})")
    per_file = (instructions(directory, count) - instructions(directory, 0)) / count
    print(f"{directory.name}: {per_file / 1000:,.0f}k instructions a file ({count} files after {WARM_UP})")


if __name__ == "__main__":
    main()
