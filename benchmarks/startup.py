#!/usr/bin/env python3
"""CLI start-up: the installed `offloaddoctor diagnose --format json` on a 1 KB log with a finding against `python3 -c
pass`, as an installed package runs it: bytecode compiled, the catalogue cache warm (the first run of a new
catalogue parses YAML: +~60 ms). Rounds run each command once, interleaved; the figure is the median of the
per-round ratios (this machine's speed drifts from minute to minute), for wall time and for the child's CPU
time (user + system); and the ratio of the fastest runs, the cost least disturbed by other work. Run from an empty directory (no project
file), and again from this repository, whose pyproject.toml names offloaddoctor and so is parsed for a
`[tool.offloaddoctor]` table. `import typer` alone for scale: the typer road costs at least that.
usage: python3 benchmarks/startup.py [ROUNDS]"""

from __future__ import annotations

import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def timed(command: list[str], cwd: str) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the child: user + system)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, cwd=cwd)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 21
    lines = (ROOT / "fixtures" / "pp-cpu-offload" / "job.log").read_text().splitlines()[-12:]
    with tempfile.TemporaryDirectory() as empty:
        log = Path(empty) / "tail.log"
        log.write_text("\n".join(lines)[:1024] + "\n")
        # The installed command, as users run it (pip's wrapper script), else `python -m offloaddoctor`.
        script = Path(sys.executable).with_name("offloaddoctor")
        entry = [sys.executable, str(script)] if script.is_file() else [sys.executable, "-m", "offloaddoctor"]
        diagnose = [*entry, "diagnose", str(log), "--format", "json"]
        subprocess.run(
            [sys.executable, "-m", "compileall", "-q", str(ROOT / "src")], stdout=subprocess.DEVNULL, check=True
        )
        warm = subprocess.run(diagnose, capture_output=True, text=True, check=False, cwd=empty)
        if '"id"' not in warm.stdout:
            print(f"the 1 KB log gave no finding (exit {warm.returncode}): not the case this measures", file=sys.stderr)
            return 2
        commands = {
            "bare": ([sys.executable, "-c", "pass"], empty),
            "typer": ([sys.executable, "-c", "import typer"], empty),
            "diagnose": (diagnose, empty),
            "diagnose in repo": (diagnose, str(ROOT)),
        }
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
        for _ in range(rounds):
            for name, (command, cwd) in commands.items():
                times[name].append(timed(command, cwd))
    for kind, index in (("wall", 0), ("CPU", 1)):
        bare = [t[index] for t in times["bare"]]
        print(f"{kind} time, {rounds} rounds; python3 -c pass: {statistics.median(bare) * 1000:.0f} ms (median)")
        for name in ("diagnose", "diagnose in repo", "typer"):
            mine = [t[index] for t in times[name]]
            ratios = sorted(t / b for t, b in zip(mine, bare))
            print(
                f"  {LABELS[name]}: {statistics.median(mine) * 1000:.0f} ms, median ratio {statistics.median(ratios):.1f}x "
                f"(middle half of rounds {ratios[len(ratios) // 4]:.1f}–{ratios[(3 * len(ratios)) // 4]:.1f}x); "
                f"fastest runs {min(mine) * 1000:.0f} vs {min(bare) * 1000:.0f} ms: {min(mine) / min(bare):.1f}x"
            )
    return 0


LABELS = {
    "typer": "import typer",
    "diagnose": "diagnose --format json on 1 KB, no project file",
    "diagnose in repo": "the same from this repository (pyproject.toml parsed)",
}


if __name__ == "__main__":
    sys.exit(main())
