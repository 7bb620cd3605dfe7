"""Scan many log files on all cores: the files in contiguous runs, one run per task, results merged in the
order the files were given (Scanner.merge), equal to one core's result.

Worth it only for real work (process start-up costs ~50 ms): at least two files, and PARALLEL_MIN_BYTES in
all or PARALLEL_MIN_FILES files (20,000 rank logs of a few lines are little data but much per-file work).
Standard input is always read in this process. A single huge file is scanned by one process: its arguments
blocks and tracebacks carry state from line to line.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence

from offloaddoctor.scanning.scanner import Matcher, Scanner, ScanResult
from offloaddoctor.logs.sources import LogSource, expanded_size

PARALLEL_MIN_BYTES = 16 * 1024 * 1024
PARALLEL_MIN_FILES = 512
TASKS_PER_WORKER = 4  # runs of files per worker: enough to even out unequal files, few enough to merge cheaply
_MATCHERS: list[Matcher] = []
_SOURCES: list[LogSource] = []


def scan_sources(
    matchers: list[Matcher],
    sources: Sequence[LogSource],
    workers: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> ScanResult:
    """`progress(done, total)` in bytes: per block read serially, per run of files finished in parallel."""
    many = len(sources) >= PARALLEL_MIN_FILES
    # Many files go to the pool whatever their bytes: without a progress bar to size, their sizes are only
    # what resolving them gave (a directory's listing gives none: no stat per file for 200,000 rank logs).
    sizes = [s.size or 0 for s in sources] if many and progress is None else [_size(s) for s in sources]
    total = sum(sizes)
    # Progress counts the log's own bytes: a .gz by what it decompresses to (a 40 MB file can hold 600 MB).
    shown = sizes
    if progress is not None:
        shown = [expanded_size(s.path, size) if s.path.endswith(".gz") else size for s, size in zip(sources, sizes)]
    on_bytes = None if progress is None else _progress_counter(progress, sum(shown))

    workers = min(workers or _cores(), len(sources))
    if workers < 2 or any(s.path == "-" for s in sources) or (total < PARALLEL_MIN_BYTES and not many):
        return Scanner(matchers, on_bytes).scan(sources)
    from concurrent.futures import ProcessPoolExecutor  # not imported for a single small log (start-up time)
    from multiprocessing import get_context

    global _MATCHERS, _SOURCES
    # Inherited by the forked workers, not pickled: compiled patterns, and the sources, which a task names by
    # their places (pickling 20,000 sources cost the parent ~40 ms as the workers started).
    _MATCHERS, _SOURCES = matchers, list(sources)
    runs = _runs(sizes, workers * TASKS_PER_WORKER)
    del sizes

    def results(pool) -> Iterator[ScanResult]:
        for (start, stop, _), result in zip(runs, pool.map(_scan_run, [(a, b) for a, b, _ in runs])):
            if on_bytes is not None:
                on_bytes(sum(shown[start:stop]))
            _adopt_paths(result, _SOURCES[start:stop])
            yield result

    try:
        with ProcessPoolExecutor(workers, mp_context=get_context("fork")) as pool:
            # Merged as they come, in order: each run's result is dropped once absorbed (200,000 rank logs).
            return Scanner(matchers).merge(results(pool))
    finally:
        _SOURCES = []


def _adopt_paths(result: ScanResult, run: list[LogSource]) -> None:
    """A worker's result names its files with copies of the parent's path strings: point it at the parent's
    own, so that each name is held once (200,000 rank logs, each named by its source, its line count, its
    iteration records' key and a finding's files)."""
    own = {source.name: source.name for source in run}
    result.lines_read = {own.get(path, path): count for path, count in result.lines_read.items()}
    result.iterations = {(own.get(path, path), segment): r for (path, segment), r in result.iterations.items()}
    for aggregate in result.aggregates:
        aggregate.paths = {own.get(path, path) for path in aggregate.paths}


def _progress_counter(progress: Callable[[int, int], None], total: int) -> Callable[[int], None]:
    done = [0]

    def on_bytes(count: int) -> None:
        done[0] += count
        progress(done[0], total)

    return on_bytes


def _runs(sizes: list[int], count: int) -> list[tuple[int, int, int]]:
    """Contiguous runs of about equal bytes (each file also weighs a fixed amount: its opening costs), as
    (start, stop, bytes) of the files whose `sizes` these are."""
    weight = [size + 64 * 1024 for size in sizes]
    target = sum(weight) / max(1, count)
    runs, start, current_bytes, current_weight = [], 0, 0, 0.0
    for index, (size, heavy) in enumerate(zip(sizes, weight)):
        current_bytes += size
        current_weight += heavy
        if current_weight >= target:
            runs.append((start, index + 1, current_bytes))
            start, current_bytes, current_weight = index + 1, 0, 0.0
    if start < len(sizes):
        runs.append((start, len(sizes), current_bytes))
    return runs


def _scan_run(places: tuple[int, int]) -> ScanResult:
    start, stop = places
    return Scanner(_MATCHERS).scan(_SOURCES[start:stop])


def _size(source: LogSource) -> int:
    if source.size is not None:
        return source.size
    try:
        return os.path.getsize(source.path) if source.path != "-" else 0
    except OSError:
        return 0


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1
