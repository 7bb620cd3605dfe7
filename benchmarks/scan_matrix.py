#!/usr/bin/env python3
"""Scan speed on the matrix of benchmarks/make_matrix.py, as ratios to GNU grep measured in one run.

For each log (or directory of logs) under DIR: `grep -F -f` with the literals `diagnose` searches for (the
same set, deduplicated as the reader does), then `offloaddoctor diagnose --format json`, alternating, N runs
each; the ratio printed is the median of the per-pair ratios, with peak RSS and the findings. A .gz log is
compared with `gzip -cd | grep`, a directory with `grep -r`. Then start-up: `diagnose`/`check`/`metrics` on a
tiny input against `python -c pass`. Nothing here asserts: it prints figures (docs/performance.md).

usage: python3 benchmarks/scan_matrix.py [--runs N] [--only NAME[,NAME]] [DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def timed(command, stdout, shell: bool = False, env=None) -> tuple[float, int, float, float]:
    """(wall seconds, exit code, peak RSS of the child in MB, CPU seconds of the child and its children)."""
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=stdout, stderr=subprocess.DEVNULL, shell=shell, env=env)
    _, status, usage = os.wait4(process.pid, 0)
    cpu = usage.ru_utime + usage.ru_stime
    return time.perf_counter() - start, os.waitstatus_to_exitcode(status), usage.ru_maxrss / 1024, cpu


def literals() -> list[str]:
    sys.path.insert(0, str(ROOT / "src"))
    from offloaddoctor.scanning.scanner import Scanner, build_matchers
    from offloaddoctor.api import load_catalog
    from offloaddoctor.logs.candidates import prefilter_literals

    scanner = Scanner(build_matchers(load_catalog()))
    return [lit.decode() for lit in prefilter_literals(scanner.literals)]


def size_of(path: Path) -> int:
    if path.is_dir():
        return sum(p.stat().st_size for p in path.iterdir())
    if path.suffix == ".gz":
        with open(path, "rb") as handle:  # gzip's trailer: the uncompressed size mod 2**32 (ours are < 4 GiB)
            handle.seek(-4, 2)
            return int.from_bytes(handle.read(4), "little")
    return path.stat().st_size


def grep_command(path: Path, patterns: Path) -> tuple[list[str] | str, bool]:
    if path.is_dir():
        return ["grep", "-r", "-F", "-f", str(patterns), str(path)], False
    if path.suffix == ".gz":
        return f"gzip -cd '{path}' | grep -F -f '{patterns}'", True
    return ["grep", "-F", "-f", str(patterns), str(path)], False


GREP_ENV = {**os.environ, "LC_ALL": "C"}  # grep's fastest mode


def bench(path: Path, patterns: Path, runs: int, scratch: Path, env_python: str) -> str:
    ratios, cpu_ratios, ours, greps, peaks = [], [], [], [], []
    report = {}
    for _ in range(runs):
        command, shell = grep_command(path, patterns)
        with open(scratch / "grep.out", "wb") as sink:  # not /dev/null: grep stops at the first match there
            grep_s, grep_rc, _, grep_cpu = timed(command, sink, shell, GREP_ENV)
        with open(scratch / "ours.json", "wb") as sink:
            ours_s, ours_rc, peak, ours_cpu = timed(
                [env_python, "-m", "offloaddoctor", "diagnose", str(path), "--format", "json"], sink
            )
        # Read line by line, never whole: 200,000 sources make a 50 MB report, and a big parent inflates every
        # later child's peak RSS (Linux keeps the high-water mark across fork and exec).
        report = finding_ids(scratch / "ours.json")
        if grep_rc not in (0, 1) or ours_rc not in (0, 1) or "findings" not in report:
            return f"{path.name}: a run failed (grep exit {grep_rc}, offloaddoctor exit {ours_rc})"
        ratios.append(ours_s / grep_s)
        cpu_ratios.append(ours_cpu / max(grep_cpu, 1e-3))
        ours.append(ours_s)
        greps.append(grep_s)
        peaks.append(peak)
    mb = size_of(path) / 1e6
    ours_s, grep_s = statistics.median(ours), statistics.median(greps)
    findings = ",".join(f["id"] for f in report["findings"])
    return (
        f"| {path.name} | {mb:.0f} | {grep_s:.2f} | {ours_s:.2f} | **{statistics.median(ratios):.2f}x** "
        f"({', '.join(f'{r:.2f}' for r in ratios)}) | {statistics.median(cpu_ratios):.2f}x | {max(peaks):.0f} "
        f"| {findings} |"
    )


def finding_ids(path: Path) -> dict:
    """{"findings": [{"id": …}, …]} from a report, or {} when it has no findings list."""
    found, seen_list, inside, previous = [], False, False, ""
    with open(path, encoding="utf-8") as report:
        for line in report:
            if line.startswith('  "findings": ['):
                seen_list, inside = True, not line.rstrip().endswith(("[]", "[],"))  # `[]`: none
            elif inside and line.startswith("  ]"):
                inside = False
            elif inside and previous == "    {\n" and line.startswith('      "id": "'):
                found.append({"id": line.split('"')[3]})
            previous = line
    return {"findings": found} if seen_list else {}


def startup(runs: int, env_python: str, scratch: Path) -> list[str]:
    tiny = scratch / "tiny.log"
    tiny.write_text("[rank0]: hello\n")
    config = scratch / "cfg.yaml"
    config.write_text("model:\n  num_layers: 16\n")
    base = [env_python, "-m", "offloaddoctor"]
    commands = {
        "python -c pass": [env_python, "-c", "pass"],
        "diagnose tiny.log": [*base, "diagnose", str(tiny), "-f", "json"],
        "check cfg.yaml": [*base, "check", str(config), "-f", "json"],
        "metrics tiny.log": [*base, "metrics", str(tiny), "-f", "json"],
    }
    for command in commands.values():  # warm: the catalogue cache, the page cache
        timed(command, subprocess.DEVNULL)
    times = {
        name: statistics.median(timed(c, subprocess.DEVNULL)[0] for _ in range(runs)) for name, c in commands.items()
    }
    bare = times["python -c pass"]
    return [f"| {name} | {seconds * 1000:.0f} ms | {seconds / bare:.1f}x |" for name, seconds in times.items()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", nargs="?", type=Path, default=Path("/tmp/offloaddoctor-bench"))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", default="")
    parser.add_argument("--no-startup", action="store_true")
    args = parser.parse_args()
    env_python = sys.executable
    wanted = {name for name in args.only.split(",") if name}
    entries = sorted(p for p in args.dir.iterdir() if not p.name.endswith(".partial"))
    entries = [p for p in entries if not wanted or p.name in wanted or p.name.split(".")[0] in wanted]
    with tempfile.TemporaryDirectory(prefix="offloaddoctor-bench-") as scratch_name:
        scratch = Path(scratch_name)
        patterns = scratch / "patterns.txt"
        found = literals()
        patterns.write_text("\n".join(found) + "\n")
        print(
            f"grep -F -f (LC_ALL=C) with the {len(found)} literals diagnose searches for; {args.runs} runs each, alternating"
        )
        print(f"cores: {len(os.sched_getaffinity(0))}, load average at start: {os.getloadavg()[0]:.2f}\n")
        print("| log | MB | grep -F -f (s) | diagnose (s) | wall ratio (runs) | CPU ratio | peak RSS (MB) | findings |")
        print("|---|---:|---:|---:|---|---:|---:|---|")
        for path in entries:
            print(bench(path, patterns, args.runs, scratch, env_python), flush=True)
        if not args.no_startup:
            print("\n| start-up | median | vs python -c pass |\n|---|---:|---:|")
            for row in startup(max(5, args.runs), env_python, scratch):
                print(row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
