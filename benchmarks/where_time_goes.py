#!/usr/bin/env python3
"""Where `diagnose` spends its time on each log of the matrix (benchmarks/make_matrix.py): how many lines
grep hands over (candidates), how many of them are iteration lines (thinned in bulk), how many reach the
handlers, and the largest costs in this process under cProfile (grep's own time shows as waiting in `read1`).

usage: python3 benchmarks/where_time_goes.py [--only NAME[,NAME]] [DIR]
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def count(patterns: Path, path: Path) -> int:
    grep = ["grep", "-c", "-F", "-f", str(patterns)]
    env = {**os.environ, "LC_ALL": "C"}
    if path.suffix == ".gz":
        gunzip = subprocess.Popen(["gzip", "-cd", str(path)], stdout=subprocess.PIPE)
        done = subprocess.run(grep, stdin=gunzip.stdout, capture_output=True, text=True, env=env)
        gunzip.stdout.close()
        gunzip.wait()
    else:
        done = subprocess.run([*grep, str(path)], capture_output=True, text=True, env=env)
    return int(done.stdout.strip() or 0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", nargs="?", type=Path, default=Path("/tmp/offloaddoctor-bench"))
    parser.add_argument("--only", default="")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "src"))
    from offloaddoctor.scanning.scanner import Scanner, build_matchers
    from offloaddoctor.api import diagnose, load_catalog
    from offloaddoctor.logs import line_pass
    from offloaddoctor.logs.candidates import prefilter_literals
    from offloaddoctor.metrics.iteration_lines import LITERAL
    from offloaddoctor.policy import Policy

    catalog = load_catalog()
    literals = [lit.decode() for lit in prefilter_literals(Scanner(build_matchers(catalog)).literals)]
    wanted = {name for name in args.only.split(",") if name}
    delivered = [0]
    real_line = line_pass.Line

    def counting_line(*fields):
        delivered[0] += 1
        return real_line(*fields)

    line_pass.Line = counting_line
    with tempfile.TemporaryDirectory() as scratch:
        patterns, iteration = Path(scratch) / "patterns.txt", Path(scratch) / "iteration.txt"
        patterns.write_text("\n".join(literals) + "\n")
        iteration.write_text(LITERAL + "\n")
        print(
            "| log | candidate lines | iteration lines | lines reaching the handlers | diagnose in-process (s) "
            "| largest costs (cProfile, own time) |"
        )
        print("|---|---:|---:|---:|---:|---|")
        for path in sorted(p for p in args.dir.iterdir() if p.suffix in (".log", ".gz")):
            if wanted and path.name not in wanted and path.name.split(".")[0] not in wanted:
                continue
            candidates, iterations = count(patterns, path), count(iteration, path)
            delivered[0] = 0
            start = time.perf_counter()
            diagnose([str(path)], catalog=catalog, policy=Policy())
            seconds = time.perf_counter() - start
            reached = delivered[0]
            profile = cProfile.Profile()
            profile.runcall(diagnose, [str(path)], catalog=catalog, policy=Policy())
            stats = pstats.Stats(profile)
            total = sum(row[2] for row in stats.stats.values())
            top = sorted(stats.stats.items(), key=lambda item: item[1][2], reverse=True)[:4]
            costs = "; ".join(f"{_name(key)} {row[2] / total:.0%}" for key, row in top)
            print(
                f"| {path.name} | {candidates:,} | {iterations:,} | {reached:,} | {seconds:.2f} | {costs} |", flush=True
            )
    return 0


def _name(key) -> str:
    filename, _line, function = key
    if filename == "~":
        return function.strip("<>").replace("method ", "")
    return f"{Path(filename).stem}.{function}"


if __name__ == "__main__":
    sys.exit(main())
