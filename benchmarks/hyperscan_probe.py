#!/usr/bin/env python3
"""Probe: could one in-process road over hyperscan (+ isal for gzip) replace the grep subprocess road?

Issue 28, point 1. Scans logs of benchmarks/make_matrix.py for the literals `diagnose` searches for (the
line pass's handlers' literals, deduplicated as the reader does: the same set as scan_matrix.py), in-process,
and prints the times next to GNU `grep -F -f` (LC_ALL=C, output to a file) and, with --diagnose, today's
`offloaddoctor diagnose --format json`, interleaved, N runs each (medians; CPU seconds beside wall seconds).

The roads probed (each finds the candidate lines' end offsets; the sampled ones also their line numbers):
  hs-stream-all  stream mode, one database of every literal, a Python callback per match (the issue's road)
  hs-block-all   block mode over 8 MiB chunks cut at a line end, one database, a callback per match
  hs-sampled     the iteration literal (half of a `--log-interval 1` log's lines) left out of that database;
                 its lines are sampled by byte offset instead: a second database compiled with
                 HS_FLAG_SINGLEMATCH, scanned once per window of size/4096 bytes (>= 16 KiB), so one callback
                 a window at most. Newlines are counted per chunk (bytearray.count) for line numbers.
  hs-sampled-x2  the same over two halves of the file in two threads (hyperscan releases the GIL in a scan)
For a .gz: gzip (stdlib) and isal decompressing alone, then isal (igzip_threaded: inflating in a thread of
its own) feeding hs-sampled, against `gzip -cd | grep -F -f`.

Needs hyperscan and isal, which offloaddoctor does not depend on: run it from a venv of its own, e.g.
    python3 -m venv /tmp/hsvenv && /tmp/hsvenv/bin/pip install hyperscan isal
    PYTHONPATH=src /tmp/hsvenv/bin/python benchmarks/hyperscan_probe.py --runs 3 \\
        --diagnose /work/main/.venv/bin/python /tmp/offloaddoctor-bench/interval-1.log ...
--check compares the lines found with grep's (every literal; the sampled roads: every line holding a literal
other than the iteration one) before timing. Note: the callback is held in a variable for the whole scan:
with hyperscan 0.9.1's stream mode a bare lambda crashed the interpreter (issue 28).
"""

from __future__ import annotations

import argparse
import gzip
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import hyperscan
import isal.igzip
import isal.igzip_threaded

ROOT = Path(__file__).resolve().parents[1]
CHUNK = 8 << 20
SAMPLES = 4096  # iteration-line windows per log
MIN_WINDOW = 16 << 10


def catalogue_literals() -> tuple[list[bytes], bytes]:
    """(the reader's literals, the iteration literal), from the code."""
    sys.path.insert(0, str(ROOT / "src"))
    from offloaddoctor.scanning.scanner import ITERATION_LITERAL, Scanner, build_matchers
    from offloaddoctor.api import load_catalog
    from offloaddoctor.logs.candidates import prefilter_literals

    scanner = Scanner(build_matchers(load_catalog()))
    return list(prefilter_literals(scanner.literals)), ITERATION_LITERAL.encode()


def database(literals: list[bytes], mode: int, flags: int = 0) -> hyperscan.Database:
    db = hyperscan.Database(mode=mode)
    db.compile(expressions=literals, ids=list(range(len(literals))), elements=len(literals), flags=flags, literal=True)
    return db


class Found:
    """Match end offsets (absolute), as the callbacks record them."""

    def __init__(self):
        self.ends: list[int] = []
        self.base = 0

    def on_match(self, ident, start, end, flags, context):
        self.ends.append(self.base + end)
        return False  # go on


def chunks(fd: int, start: int, stop: int, buffer: bytearray):
    """(offset, length) of chunks of [start, stop) cut after a newline, read into `buffer` (reused: no new
    pages a chunk)."""
    view = memoryview(buffer)
    offset = start
    while offset < stop:
        got = os.preadv(fd, [view[: min(CHUNK, stop - offset)]], offset)
        if got == 0:
            return
        cut = buffer.rfind(b"\n", 0, got) + 1 if offset + got < stop else got
        if cut == 0:
            cut = got  # a line longer than a chunk: cut it (the probe does not care)
        yield offset, cut
        offset += cut


def hs_stream_all(path: str, db: hyperscan.Database) -> int:
    found = Found()
    handler = found.on_match  # held: see the module's docstring
    with open(path, "rb", buffering=0) as log, db.stream(match_event_handler=handler) as stream:
        buffer = bytearray(CHUNK)
        while got := log.readinto(buffer):
            stream.scan(bytes(buffer[:got]) if got < CHUNK else buffer)
    return len(found.ends)


def hs_block_all(path: str, db: hyperscan.Database) -> int:
    found = Found()
    handler = found.on_match
    fd = os.open(path, os.O_RDONLY)
    try:
        buffer = bytearray(CHUNK)
        view = memoryview(buffer)
        for offset, length in chunks(fd, 0, os.fstat(fd).st_size, buffer):
            found.base = offset
            db.scan(view[:length], match_event_handler=handler)
    finally:
        os.close(fd)
    return len(found.ends)


class Sampled:
    """One range's scan: the candidate lines (line number, line start) of the rare literals, a sample of the
    iteration lines by byte offset, and the newlines counted."""

    def __init__(self, rare: hyperscan.Database, iteration: hyperscan.Database, window: int):
        self.rare, self.iteration, self.window = rare, iteration, window
        self.rare_scratch = hyperscan.Scratch(rare)
        self.iteration_scratch = hyperscan.Scratch(iteration)
        self.rare_found, self.iteration_found = Found(), Found()
        self.lines: list[tuple[int, int]] = []  # (line number counted from the range's start, offset)
        self.samples: list[tuple[int, int]] = []
        self.newlines = 0

    def scan(self, buffer: bytearray, offset: int, length: int) -> None:
        view = memoryview(buffer)[:length]
        rare, iteration = self.rare_found, self.iteration_found
        rare.ends, iteration.ends = [], []
        rare.base = iteration.base = 0
        rare_handler, iteration_handler = rare.on_match, iteration.on_match
        self.rare.scan(view, match_event_handler=rare_handler, scratch=self.rare_scratch)
        for at in range(0, length, self.window):
            iteration.base = at
            self.iteration.scan(
                view[at : at + self.window], match_event_handler=iteration_handler, scratch=self.iteration_scratch
            )
        # Line numbers: one count of the chunk's newlines, in pieces between the lines found (sorted together).
        starts = sorted(
            {
                (buffer.rfind(b"\n", 0, end) + 1, into)
                for ends, into in ((rare.ends, 0), (iteration.ends, 1))
                for end in ends
            }
        )
        line, position, targets = self.newlines, 0, (self.lines, self.samples)
        for start, into in starts:
            line += buffer.count(b"\n", position, start)
            position = start
            targets[into].append((line + 1, offset + start))
        self.newlines = line + buffer.count(b"\n", position, length)


def hs_sampled(path: str, rare, iteration, threads: int = 1) -> tuple[int, int, int]:
    """(rare candidate lines, iteration samples, lines); with `threads` 2, the halves on two threads."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        window = max(MIN_WINDOW, size // SAMPLES)
        bounds = [0, size]
        if threads == 2:
            middle = size // 2
            middle += os.pread(fd, 1 << 20, middle).find(b"\n") + 1
            bounds = [0, middle, size]
        parts = [Sampled(rare, iteration, window) for _ in bounds[1:]]

        def run(part: Sampled, start: int, stop: int) -> None:
            buffer = bytearray(CHUNK)
            for offset, length in chunks(fd, start, stop, buffer):
                part.scan(buffer, offset, length)

        workers = [threading.Thread(target=run, args=(part, bounds[i], bounds[i + 1])) for i, part in enumerate(parts)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    finally:
        os.close(fd)
    lines = sum(part.newlines for part in parts)
    return sum(len(p.lines) for p in parts), sum(len(p.samples) for p in parts), lines


def gz_read(path: str, opener) -> int:
    total = 0
    with opener(path, "rb") as log:
        while data := log.read(CHUNK):
            total += len(data)
    return total


def gz_sampled(path: str, rare, iteration) -> tuple[int, int, int]:
    """isal inflating in its own thread, hs-sampled over what it hands out (lines whole: cut at a newline)."""
    part = Sampled(rare, iteration, max(MIN_WINDOW, gz_size(path) // SAMPLES))
    buffer = bytearray(CHUNK + (1 << 20))
    offset = kept = 0
    with isal.igzip_threaded.open(path, "rb", threads=1) as log:
        while True:
            data = log.read(CHUNK)
            if not data:
                if kept:
                    buffer[kept : kept + 1] = b"\n"
                    part.scan(buffer, offset, kept + 1)
                break
            if kept + len(data) > len(buffer):
                buffer.extend(bytes(kept + len(data) - len(buffer)))
            buffer[kept : kept + len(data)] = data
            filled = kept + len(data)
            cut = buffer.rfind(b"\n", 0, filled) + 1
            part.scan(buffer, offset, cut)
            buffer[: filled - cut] = buffer[cut:filled]
            offset, kept = offset + cut, filled - cut
    return len(part.lines), len(part.samples), part.newlines


def gz_size(path: str) -> int:
    with open(path, "rb") as handle:  # gzip's trailer: the size mod 2**32
        handle.seek(-4, 2)
        return int.from_bytes(handle.read(4), "little")


def in_process(function, *args):
    """(wall s, CPU s of this process, result)."""
    before = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    result = function(*args)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_SELF)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), result


def child(command, shell: bool = False, env=None, sink: str = os.devnull):
    """(wall s, CPU s of the child and its children, exit code)."""
    start = time.perf_counter()
    with open(sink, "wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.DEVNULL, shell=shell, env=env)
        _, status, usage = os.wait4(process.pid, 0)
    return time.perf_counter() - start, usage.ru_utime + usage.ru_stime, os.waitstatus_to_exitcode(status)


def grep_lines(path: str, patterns: str, scratch: str) -> dict[int, bytes]:
    command = f"gzip -cd '{path}' | grep -n -F -a -f '{patterns}'" if path.endswith(".gz") else None
    out = os.path.join(scratch, "check.out")
    if command is None:
        child(["grep", "-n", "-F", "-a", "-f", patterns, path], env=GREP_ENV, sink=out)
    else:
        child(command, shell=True, env=GREP_ENV, sink=out)
    found = {}
    with open(out, "rb") as records:
        for record in records:
            number, _, line = record.rstrip(b"\n").partition(b":")
            found[int(number)] = line
    return found


def check(path: str, literals: list[bytes], iteration: bytes, dbs, patterns: str, scratch: str) -> str:
    expected = grep_lines(path, patterns, scratch)
    rare_expected = {n for n, line in expected.items() if any(lit in line for lit in literals if lit != iteration)}
    got = []
    for threads in (1, 2) if not path.endswith(".gz") else (1,):
        if path.endswith(".gz"):
            part = Sampled(dbs["rare"], dbs["iteration"], 1 << 20)
            found = _gz_lines(path, part)
        else:
            found = _file_lines(path, dbs["rare"], dbs["iteration"], threads)
        got.append(found == rare_expected)
    return (
        f"check: {len(expected)} lines from grep, {len(rare_expected)} with a literal other than the iteration one; "
        f"hs-sampled finds the same: {all(got)}"
    )


def _file_lines(path: str, rare, iteration, threads: int) -> set[int]:
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        bounds = [0, size] if threads == 1 else [0, size // 2 + os.pread(fd, 1 << 20, size // 2).find(b"\n") + 1, size]
        numbers, base = set(), 0
        for start, stop in zip(bounds, bounds[1:]):
            part = Sampled(rare, iteration, 1 << 20)
            buffer = bytearray(CHUNK)
            for offset, length in chunks(fd, start, stop, buffer):
                part.scan(buffer, offset, length)
            numbers |= {base + number for number, _ in part.lines}
            base += part.newlines
        return numbers
    finally:
        os.close(fd)


def _gz_lines(path: str, part: Sampled) -> set[int]:
    with isal.igzip.open(path, "rb") as log:
        data = log.read()
    buffer = bytearray(data if data.endswith(b"\n") else data + b"\n")
    for offset, length in ((o, n) for o, n in _split(buffer)):
        view = bytearray(buffer[offset : offset + length])
        part.scan(view, offset, length)
    return {number for number, _ in part.lines}


def _split(buffer: bytearray):
    offset = 0
    while offset < len(buffer):
        stop = min(len(buffer), offset + CHUNK)
        cut = buffer.rfind(b"\n", offset, stop) + 1 if stop < len(buffer) else stop
        yield offset, cut - offset
        offset = cut


GREP_ENV = {**os.environ, "LC_ALL": "C"}


def roads_for(path: str, dbs: dict, patterns: str, scratch: str, diagnose: str | None) -> dict:
    """The roads to time on one log: name -> a call giving (wall s, CPU s, what it found)."""
    gz = path.endswith(".gz")
    grep_out = os.path.join(scratch, "grep.out")  # a file, not /dev/null: grep stops at a first match there
    roads = {}
    if gz:
        roads["gzip -cd, grep -F -f"] = lambda: child(
            f"gzip -cd '{path}' | grep -F -f '{patterns}'", True, GREP_ENV, grep_out
        )
        roads["gzip (stdlib) read"] = lambda: in_process(gz_read, path, gzip.open)
        roads["isal read"] = lambda: in_process(gz_read, path, isal.igzip.open)
        roads["isal + hs-sampled"] = lambda: in_process(gz_sampled, path, dbs["rare"], dbs["iteration"])
    else:
        roads["grep -F -f"] = lambda: child(["grep", "-F", "-f", patterns, path], env=GREP_ENV, sink=grep_out)
        roads["hs-stream-all"] = lambda: in_process(hs_stream_all, path, dbs["stream"])
        roads["hs-block-all"] = lambda: in_process(hs_block_all, path, dbs["all"])
        roads["hs-sampled"] = lambda: in_process(hs_sampled, path, dbs["rare"], dbs["iteration"])
        roads["hs-sampled-x2"] = lambda: in_process(hs_sampled, path, dbs["rare"], dbs["iteration"], 2)
    if diagnose:
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
        roads["diagnose"] = lambda: child(
            [diagnose, "-m", "offloaddoctor", "diagnose", path, "--format", "json"],
            env=env,
            sink=os.path.join(scratch, "ours.json"),
        )
    return roads


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("logs", nargs="+")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--diagnose", metavar="PYTHON", help="also time `PYTHON -m offloaddoctor diagnose`")
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--roads", default="", help="comma-separated subset of the roads")
    args = parser.parse_args()
    literals, iteration = catalogue_literals()
    dbs = {
        "all": database(literals, hyperscan.HS_MODE_BLOCK),
        "stream": database(literals, hyperscan.HS_MODE_STREAM),
        "rare": database([lit for lit in literals if lit != iteration], hyperscan.HS_MODE_BLOCK),
        "iteration": database([iteration], hyperscan.HS_MODE_BLOCK, hyperscan.HS_FLAG_SINGLEMATCH),
    }
    print(f"hyperscan {hyperscan.__version__}, {len(literals)} literals; {args.runs} runs, interleaved")
    print(f"cores: {len(os.sched_getaffinity(0))}, load average at start: {os.getloadavg()[0]:.2f}\n")
    wanted = {road for road in args.roads.split(",") if road}
    with tempfile.TemporaryDirectory(prefix="hyperscan-probe-") as scratch:
        patterns = os.path.join(scratch, "patterns.txt")
        Path(patterns).write_bytes(b"\n".join(literals) + b"\n")
        for path in args.logs:
            gz = path.endswith(".gz")
            if args.check:
                print(check(path, literals, iteration, dbs, patterns, scratch), flush=True)
            roads = roads_for(path, dbs, patterns, scratch, args.diagnose)
            roads = {name: road for name, road in roads.items() if not wanted or name in wanted or "grep" in name}
            times: dict[str, list[tuple[float, float]]] = {name: [] for name in roads}
            results = {}
            for _ in range(args.runs):
                for name, road in roads.items():
                    wall, cpu, result = road()
                    times[name].append((wall, cpu))
                    results[name] = result
            reference = next(name for name in roads if "grep" in name)
            grep_wall = statistics.median(w for w, _ in times[reference])
            size = os.path.getsize(path) if not gz else gz_size(path)
            print(f"{os.path.basename(path)} ({size / 1e6:.0f} MB)\n")
            if args.diagnose:
                same = Path(scratch, "ours.json").read_bytes() == Path(scratch, "finder.json").read_bytes()
                print(f"the hyperscan finder's report is diagnose's, byte for byte: {same}\n")
            print("| road | wall (s) | runs | CPU (s) | vs grep | found |\n|---|---:|---|---:|---:|---|")
            for name, runs in times.items():
                wall = statistics.median(w for w, _ in runs)
                cpu = statistics.median(c for _, c in runs)
                listed = ", ".join(f"{w:.2f}" for w, _ in runs)
                print(f"| {name} | {wall:.2f} | {listed} | {cpu:.2f} | {wall / grep_wall:.2f}x | {results[name]} |")
            print(flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
