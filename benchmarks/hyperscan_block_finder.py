#!/usr/bin/env python3
"""The smallest hyperscan road: today's block reader (logs/candidates.py, grep switched off) with hyperscan
finding each block's candidate lines instead of a `bytes.find` pass per literal. Everything after the finder
(line numbers, every_line, skip and the iteration sampler, cut lines) is the block reader's own, so the report
must be the same byte for byte; this prints `diagnose`'s time and whether it is.

With isal at hand, a .gz is inflated by isal's GzipFile instead of the standard library's (gzip(1)'s spool
switched off too: the .gz is read in-process).

Needs hyperscan (and isal) in the interpreter that runs it, with offloaddoctor's own dependencies:
    python3 -m venv /tmp/hsvenv && /tmp/hsvenv/bin/pip install hyperscan isal typer rich regex pyyaml
    PYTHONPATH=src /tmp/hsvenv/bin/python benchmarks/hyperscan_block_finder.py [--report] LOG [LOG ...]
--report prints `diagnose --format json`'s report instead of the times (hyperscan_probe.py compares it).
"""

from __future__ import annotations

import io
import os
import runpy
import sys
import time
from contextlib import redirect_stdout

import hyperscan

import offloaddoctor.logs.candidates as candidates


def install() -> None:
    """Grep and gzip(1) off, hyperscan as every reader's finder, isal's GzipFile for the standard library's."""
    databases: dict[tuple[bytes, ...], tuple[hyperscan.Database, hyperscan.Scratch]] = {}
    candidates.GREP_MIN_BYTES = 1 << 62
    candidates.GZ_SPOOL_MIN_BYTES = 1 << 62
    try:
        import gzip

        import isal.igzip

        # logs/sources.py opens a .gz by this name
        gzip.GzipFile = isal.igzip.IGzipFile  # type: ignore[misc]
    except ImportError:
        pass

    def hit_line_starts(reader, block: bytes, end: int, finder=None) -> list[int]:
        key = tuple(reader.literals)
        if key not in databases:
            db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
            db.compile(expressions=list(key), ids=list(range(len(key))), elements=len(key), literal=True)
            databases[key] = (db, hyperscan.Scratch(db))
        db, scratch = databases[key]
        ends: list[int] = []

        def on_match(ident, start, stop, flags, context):
            ends.append(stop)

        handler = on_match  # held for the whole scan (issue 28: a bare lambda crashed hyperscan 0.9.1)
        db.scan(memoryview(block)[:end], match_event_handler=handler, scratch=scratch)
        rfind = block.rfind
        return sorted({rfind(b"\n", 0, stop) + 1 for stop in ends})

    candidates.CandidateReader._hit_line_starts = hit_line_starts


def diagnose(log: str) -> tuple[float, float, str]:
    sys.argv = ["offloaddoctor", "diagnose", log, "--format", "json"]
    out = io.StringIO()
    cpu, start = time.process_time(), time.perf_counter()
    with redirect_stdout(out):
        try:
            runpy.run_module("offloaddoctor", run_name="__main__", alter_sys=True)
        except SystemExit:
            pass
    return time.perf_counter() - start, time.process_time() - cpu, out.getvalue()


def main() -> int:
    report_only = sys.argv[1:2] == ["--report"]
    logs = sys.argv[2:] if report_only else sys.argv[1:]
    if not logs:
        print(__doc__)
        return 2
    install()
    for log in logs:
        wall, cpu, report = diagnose(log)
        if report_only:
            sys.stdout.write(report)
        else:
            print(f"{os.path.basename(log)}: {wall:.2f} s wall, {cpu:.2f} s CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
