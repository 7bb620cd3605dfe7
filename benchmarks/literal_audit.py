#!/usr/bin/env python3
"""Audit the prefilter literals: the share of lines of healthy logs each one lets through to Python.

A literal must be rare in healthy logs (at most 0.1 % of lines); one that hits more sends those lines through
the per-line Python path on every scan. Healthy logs: the clean fixtures, and the head of each matrix log of
benchmarks/make_matrix.py (its failure is at the very end). Iteration lines are the one planned exception:
they are read as a sample (scanning/scanner.py IterationSampler), so their literal is listed but not flagged.

usage: python3 benchmarks/literal_audit.py [--head-mb N] [MATRIX_DIR]
"""

from __future__ import annotations

import argparse
import gzip
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 0.001


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("matrix", nargs="?", type=Path, default=Path("/tmp/offloaddoctor-bench"))
    parser.add_argument("--head-mb", type=int, default=64)
    parser.add_argument("--metrics", action="store_true", help="audit the metrics reader's literals instead")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "src"))
    from offloaddoctor.scanning.scanner import Scanner, build_matchers
    from offloaddoctor.api import load_catalog
    from offloaddoctor.metrics.iteration_lines import LITERAL as ITERATION_LITERAL
    from offloaddoctor.metrics.reader import RunReader

    found = RunReader("-").line_pass.literals if args.metrics else Scanner(build_matchers(load_catalog())).literals
    logs = [ROOT / "fixtures" / name / "job.log" for name in ("clean-baseline", "clean-opt050")]
    logs += sorted((ROOT / "fixtures" / "compare-family").glob("*.log"))
    if args.matrix.is_dir():
        logs += sorted(p for p in args.matrix.iterdir() if p.suffix in (".log", ".gz"))
    worst: dict[str, float] = {}
    for log in logs:
        opener = gzip.open if log.suffix == ".gz" else open
        with opener(log, "rb") as handle:
            lines = handle.read(args.head_mb << 20).decode("utf-8", "replace").split("\n")[:-1]
        matrix = ROOT not in log.parents
        if matrix:
            lines = lines[:-40]  # the OOM at the end of a matrix log is the failure, not the healthy part
        hits = {literal: sum(1 for line in lines if literal in line) for literal in found}
        for literal, count in hits.items():
            share = count / max(1, len(lines))
            if matrix:  # the fixtures are ~1,000 lines of start-up: 0.1 % of them is one line
                worst[literal] = max(worst.get(literal, 0.0), share)
        loud = sorted(((c / len(lines), lit) for lit, c in hits.items() if c / len(lines) > LIMIT), reverse=True)
        print(
            f"{log.relative_to(ROOT) if ROOT in log.parents else log}: {len(lines)} lines; over {LIMIT:.1%}: "
            + (", ".join(f"{lit!r} {share:.2%}" for share, lit in loud) or "none")
        )
    flagged = [lit for lit, share in worst.items() if share > LIMIT and lit != ITERATION_LITERAL]
    print(
        f"\n{len(found)} literals; over {LIMIT:.1%} of a long healthy log's lines (iteration lines excepted): "
        + (", ".join(f"{lit!r} ({worst[lit]:.2%})" for lit in sorted(flagged)) or "none")
    )
    return 1 if flagged else 0


if __name__ == "__main__":
    sys.exit(main())
