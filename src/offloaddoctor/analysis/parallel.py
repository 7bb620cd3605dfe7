"""Scan many log files on all cores: one file per task, results merged in the order the files were given.

Worth it only for real work (process start-up costs ~50 ms): at least two files and PARALLEL_MIN_BYTES in
all. Standard input is always read in this process. A single huge file is scanned by one core: its
arguments blocks and tracebacks carry state from line to line.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from offloaddoctor.analysis.scanner import Matcher, Scanner, ScanResult
from offloaddoctor.logs.sources import LogSource

PARALLEL_MIN_BYTES = 16 * 1024 * 1024
_MATCHERS: list[Matcher] = []


def scan_sources(
    matchers: list[Matcher], sources: Sequence[LogSource], workers: int | None = None, on_bytes=None
) -> ScanResult:
    """`on_bytes(n)` reports progress: per block read serially, per file finished in parallel."""
    workers = min(workers or os.cpu_count() or 1, len(sources))
    if workers < 2 or any(s.path == "-" for s in sources) or total_bytes(sources) < PARALLEL_MIN_BYTES:
        return Scanner(matchers, on_bytes).scan(sources)
    from concurrent.futures import ProcessPoolExecutor  # not imported for a single small log (start-up time)
    from multiprocessing import get_context

    global _MATCHERS
    _MATCHERS = matchers  # inherited by the forked workers: compiled patterns are not pickled
    results = []
    with ProcessPoolExecutor(workers, mp_context=get_context("fork")) as pool:
        for source, result in zip(sources, pool.map(_scan_one, sources)):
            results.append(result)
            if on_bytes is not None:
                on_bytes(total_bytes([source]))
    return Scanner(matchers).merge(results)


def _scan_one(source: LogSource) -> ScanResult:
    return Scanner(_MATCHERS).scan([source])


def total_bytes(sources: Sequence[LogSource]) -> int:
    total = 0
    for source in sources:
        try:
            total += os.path.getsize(source.path)
        except OSError:
            pass
    return total
