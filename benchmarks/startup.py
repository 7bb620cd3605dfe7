#!/usr/bin/env python3
"""CLI start-up: `offloaddoctor diagnose --format json` on a 1 KB log with a finding against `python3 -c
pass`, median of N interleaved runs each; `import typer` alone for scale. As an installed package would be:
bytecode compiled and the catalogue cache warm (the first run of a new catalogue parses YAML: +~60 ms).
usage: python3 benchmarks/startup.py [N]"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def medians(commands: list[list[str]], runs: int) -> list[float]:
    times: list[list[float]] = [[] for _ in commands]
    for _ in range(runs):
        for index, command in enumerate(commands):
            start = time.perf_counter()
            subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
            times[index].append(time.perf_counter() - start)
    return [statistics.median(t) for t in times]


def main() -> int:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    lines = (ROOT / "fixtures" / "pp-cpu-offload" / "job.log").read_text().splitlines()[-12:]
    with tempfile.NamedTemporaryFile("w", suffix=".log", delete=False) as log:
        log.write("\n".join(lines)[:1024] + "\n")
    diagnose = [sys.executable, "-m", "offloaddoctor", "diagnose", log.name, "--format", "json"]
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "src")], stdout=subprocess.DEVNULL, check=True)
    warm = subprocess.run(diagnose, capture_output=True, text=True, check=False)
    if '"id"' not in warm.stdout:
        print(f"the 1 KB log gave no finding (exit {warm.returncode}): not the case this measures", file=sys.stderr)
        return 2
    bare, typer, ours = medians([[sys.executable, "-c", "pass"], [sys.executable, "-c", "import typer"], diagnose], runs)
    print(f"python3 -c pass: {bare * 1000:.0f} ms | import typer: {typer * 1000:.0f} ms ({typer / bare:.1f}x) | "
          f"diagnose --format json on 1 KB: {ours * 1000:.0f} ms ({ours / bare:.1f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
