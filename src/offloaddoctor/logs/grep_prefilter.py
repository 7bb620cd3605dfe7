"""GNU grep as the candidate finder for large plain log files.

`grep -F -f` finds every line holding one of the reader's patterns in one pass in C, where the block reader
needs one `bytes.find` pass per pattern. Same contract as CandidateReader: (line number, text) for candidate
lines, and every line while the caller sets `every_line` (read from the file itself, from the byte offset
grep reports). A file of SPLIT_MIN_BYTES or more is split in two, one grep per core. Used only for a plain
regular file of at least candidates.GREP_MIN_BYTES when GNU grep is on PATH, and for a large .gz, which gzip(1)
decompresses into a temporary file first (gunzip_into); standard input, a small .gz and small files go through
the block reader.

The file is never opened by its name here: the reader's descriptor, pread and sendfile at offsets, and
logs/sources.py reopen() for handles with their own offset (grep's standard input among them), so a log rotated
by name while it is read is still the one file read, and its line numbers are its own.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterator
from itertools import repeat
from typing import BinaryIO, NamedTuple

from offloaddoctor.logs.sources import MAX_LINE_BYTES, reopen

GREP_MEMORY_BYTES = 256 * 1024 * 1024  # address-space limit for grep: a giant line makes it stop, not swell
SPLIT_MIN_BYTES = 64 * 1024 * 1024  # from here on a file is split in two parts, one grep per core
# The first part is read as its grep finds lines; the second is spooled and read once the first is done.
# Measured on a 500 MB log: halves beat 40/60 and 60/40 (reading the spool afterwards takes ~0.15 s).
SPLIT_AT = 0.5
_SPLIT_WINDOW = 1 << 20
_FEED_BYTES = 1 << 20
_COUNT_BLOCK = 1 << 22
_RECORDS_BYTES = 1 << 20
_PIPE_BYTES = 1 << 20
PROGRESS_SECONDS = 0.25  # how often a progress bar hears how far gzip has got


@functools.lru_cache(maxsize=1)
def gnu_grep() -> str | None:
    path = shutil.which("grep")
    if path is None:
        return None
    try:
        version = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=5, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return path if "GNU grep" in version else None


def grep_lines(reader, fd: int) -> Iterator[tuple[int, str]]:
    """`reader` is the CandidateReader whose literals, every_line, skip, warnings and counters this serves;
    `fd` the log's open descriptor (kept open until this ends)."""
    size = os.fstat(fd).st_size
    jobs = _Jobs()
    position = _Position()
    try:
        streams = _start_greps(jobs, reader.literals, fd, size)
        with _again(fd) as log:
            yield from _deliver(reader, streams, log, position)
            if position.failed:
                # grep holds a whole line in memory; on a giant line it hits its limit and stops. Go on
                # from the last line handed out with the block reader, which cuts long lines.
                jobs.stop()
                log.seek(position.offset)
                if position.line:
                    _skip_line(log)
                yield from reader._lines(log, position.line)
                return
    finally:
        jobs.stop()
    reader.lines_read = _count_lines(fd, size, position)
    if reader.on_bytes is not None:
        reader.on_bytes(os.fstat(fd).st_size - reader.bytes_reported)


def _again(fd: int) -> BinaryIO:
    """A handle of its own on the file at `fd` (CandidateReader takes this road only where reopen() works)."""
    handle = reopen(fd)
    if handle is None:
        raise OSError(f"cannot open descriptor {fd} again: no /proc/self/fd")
    return handle


def _start_greps(jobs: _Jobs, patterns: list[bytes], fd: int, size: int) -> list:
    """The greps over the file: functions that each give one grep's output stream, in the file's order."""
    import tempfile

    middle = split_point(fd, size) if _cores() > 1 and size >= SPLIT_MIN_BYTES and hasattr(os, "sendfile") else None
    listed = jobs.keep(_patterns_file(patterns))
    if middle is None:
        with _again(fd) as log:  # grep's standard input: the file itself, not what its name leads to now
            whole = jobs.grep(listed.name, log)
        streams = [lambda position: _Stream(whole, whole.output)]
    else:
        # Both cores: one grep reads the first half from a pipe this process fills with sendfile (no
        # copy through user space), the other the second half from its offset into a spool file, so
        # that it never waits for this reader to catch up.
        first, write_end = jobs.grep_from_pipe(listed.name)
        try:
            spool = jobs.keep(tempfile.TemporaryFile(prefix="offloaddoctor-grep-"))
            with _again(fd) as tail:
                tail.seek(middle)
                second = jobs.grep(listed.name, tail, stdout=spool)
        except BaseException:
            os.close(write_end)
            raise
        # Started last: forking (for the greps' memory limit) while another thread runs is unsafe.
        first.feeder = jobs.feed(fd, write_end, middle)

        def second_half(position: _Position) -> _Stream:
            if second.wait() not in (0, 1):
                raise _GrepFailed
            spool.seek(0)
            return _Stream(second, spool, _lines_before(fd, middle, position), middle)

        streams = [lambda position: _Stream(first, first.output), second_half]
    return streams


def gunzip_into(
    gunzip: str, packed: BinaryIO, spool: int, limit: int, on_written: Callable[[int], None] | None = None
) -> bool:
    """Decompress the .gz open as `packed` (from its start: gzip(1)'s standard input) with `gunzip` into the
    open file `spool`, at most `limit` bytes; whether the spool holds the whole log (gzip exited cleanly: a
    damaged file is read by Python from its start, with its warnings). `on_written(bytes)`: told the spool's
    size every PROGRESS_SECONDS while gzip runs (a progress bar)."""
    jobs = _Jobs()
    try:
        decompress = jobs.run([gunzip, "-c", "-d"], packed, spool, preexec=functools.partial(_limit, None, limit))
        return _wait(decompress, spool, on_written) == 0
    except OSError:
        return False
    finally:
        jobs.stop()


def _wait(process: subprocess.Popen, spool: int, on_written: Callable[[int], None] | None) -> int:
    """`process.wait()`, telling `on_written` the size of the file it writes to meanwhile."""
    while on_written is not None:
        try:
            return process.wait(timeout=PROGRESS_SECONDS)
        except subprocess.TimeoutExpired:
            on_written(os.fstat(spool).st_size)
    return process.wait()


def _patterns_file(patterns: list[bytes]):
    import tempfile

    listed = tempfile.NamedTemporaryFile("wb", prefix="offloaddoctor-literals-")
    listed.write(b"\n".join(patterns) + b"\n")
    listed.flush()
    return listed


def split_point(fd: int, size: int) -> int | None:
    """The start of the first line after SPLIT_AT of the file; None when no line starts near there."""
    at = int(size * SPLIT_AT)
    window = os.pread(fd, _SPLIT_WINDOW, at)
    newline = window.find(b"\n")
    if newline == -1 or at + newline + 1 >= size:
        return None
    return at + newline + 1


def _large_pipe() -> tuple[int, int]:
    """A pipe of _PIPE_BYTES where Linux allows it: with the default 64 KiB, grep and this reader take turns
    every few dozen lines (a `--log-interval 1` log: ~10,000 reads for 200 MB of grep's output)."""
    read_end, write_end = os.pipe()
    try:
        import fcntl

        fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, _PIPE_BYTES)
    except (ImportError, AttributeError, OSError):  # not Linux, or above /proc/sys/fs/pipe-max-size
        pass
    return read_end, write_end


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


class _Jobs:
    """The child processes and temporary files of one grep pass; `stop` ends and removes them all."""

    def __init__(self):
        self.processes: list[subprocess.Popen] = []
        self.feeders: list[_Feeder] = []
        self.files = []

    def keep(self, handle):
        self.files.append(handle)
        return handle

    def grep(self, patterns: str, stdin, stdout=None) -> subprocess.Popen:
        """grep over its standard input (never a path: see the module's docstring)."""
        command = [gnu_grep(), "-F", "-a", "-n", "-b", "-f", patterns]
        limits = functools.partial(_limit, GREP_MEMORY_BYTES, None)
        return self.run(command, stdin, stdout, limits, {**os.environ, "LC_ALL": "C"})

    def grep_from_pipe(self, patterns: str, stdout=None) -> tuple[subprocess.Popen, int]:
        """A grep reading a new pipe, and the pipe's write end for the caller to fill (a feeder, started after
        the last fork) and close."""
        read_end, write_end = _large_pipe()
        try:
            return self.grep(patterns, read_end, stdout), write_end
        except BaseException:
            os.close(write_end)
            raise
        finally:
            os.close(read_end)

    def run(self, command: list[str], stdin, stdout=None, preexec=None, env=None) -> subprocess.Popen:
        """The command's output goes to `stdout`, or to a pipe of _PIPE_BYTES read as `process.output`."""
        read_end = None
        if stdout is None:
            read_end, stdout = _large_pipe()
        try:
            process = subprocess.Popen(
                command, stdin=stdin, stdout=stdout, stderr=subprocess.DEVNULL, env=env, preexec_fn=preexec
            )
        except BaseException:
            if read_end is not None:
                os.close(read_end)
            raise
        finally:
            if read_end is not None:
                os.close(stdout)
        process.output = open(read_end, "rb") if read_end is not None else None
        self.processes.append(process)
        process.feeder = None  # what fills its input, when not a file: a failure there is this grep's failure
        return process

    def feed(self, fd: int, pipe: int, end: int) -> _Feeder:
        feeder = _Feeder(fd, pipe, end)
        self.feeders.append(feeder)
        return feeder

    def stop(self) -> None:
        for process in self.processes:
            if process.output is not None:
                process.output.close()
            process.kill()
            process.wait()
        for feeder in self.feeders:  # its grep is gone: a blocked write ends with a broken pipe
            feeder.join()
        for handle in self.files:
            handle.close()


class _Feeder(threading.Thread):
    """Copies bytes [0, end) of the open file `fd` into a pipe with sendfile (at offsets: the descriptor's own
    is left alone), then closes the pipe."""

    def __init__(self, fd: int, pipe: int, end: int):
        super().__init__(daemon=True)
        self.fd, self.pipe, self.end, self.failed = fd, pipe, end, False
        self.start()

    def run(self) -> None:
        try:
            self._copy(self.fd, 0, self.end)
        except OSError:  # a read error, or grep gone (broken pipe)
            self.failed = True
        finally:
            os.close(self.pipe)

    def _copy(self, file: int, offset: int, end: int) -> int:
        while offset < end:
            sent = os.sendfile(self.pipe, file, offset, min(_FEED_BYTES, end - offset))
            if sent == 0:  # the file shrank under us
                self.failed = True
                break
            offset += sent
        return offset


class _Position:
    """The last line handed out: its number and the byte offset where it starts; `failed` when a grep
    ended in error, so that the caller must read on by itself from there."""

    line = 0
    offset = 0
    failed = False


class _Stream(NamedTuple):
    """One grep's `-n -b` output; its numbers count from `base_line` lines and `base_offset` bytes."""

    process: subprocess.Popen
    output: BinaryIO
    base_line: int = 0
    base_offset: int = 0


class _GrepFailed(Exception):
    pass


def _limit(memory: int | None, file_size: int | None) -> None:
    """Runs in a child before exec: past `memory` of address space it fails to allocate (a giant line makes grep
    stop, not swell), past `file_size` its write to a file fails."""
    import resource

    if memory is not None:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    if file_size is not None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_size, file_size))


def _lines_before(fd: int, middle: int, position: _Position) -> int:
    """Lines before byte `middle` (a line start), counted from the nearest line whose number is known."""
    if position.line == 0:
        return _newlines(fd, 0, middle)
    if position.offset <= middle:
        return position.line - 1 + _newlines(fd, position.offset, middle)
    return position.line - 1 - _newlines(fd, middle, position.offset)


def _newlines(fd: int, start: int, stop: int) -> int:
    count = 0
    while start < stop:
        block = os.pread(fd, min(_COUNT_BLOCK, stop - start), start)
        if not block:
            break
        count += block.count(b"\n")
        start += len(block)
    return count


def _deliver(reader, streams, log, position: _Position) -> Iterator[tuple[int, str]]:
    """Candidate lines from the streams in turn, and every line while the reader asks for it. grep's output is
    read a large block at a time and split in C. A record the reader skips costs a split, an int and the skip
    question; with a sampler (`reader.sampled`, an iteration-line sample), runs of its lines are thinned by
    arithmetic and only the kept ones are looked at: a `--log-interval 1` log has a million of them."""
    last = 0  # the last line number handed out
    skip, sampled = reader.skip, reader.sampled
    cap = MAX_LINE_BYTES + 64
    every_line = reader.every_line
    try:
        for open_stream in streams:
            stream = open_stream(position)
            base_line, base_offset = stream.base_line, stream.base_offset
            skipped = None  # the last record seen after the last one handed out
            try:
                for records in _record_blocks(stream.output, cap):
                    count, index = len(records), 0
                    runs = None  # the ends of runs of sampled records, while thinning them in bulk
                    # In bulk only past the last line read one by one: grep's records of lines read while
                    # `every_line` was on must not be counted by the sampler (streaming never asked about them).
                    if (
                        sampled is not None
                        and not every_line
                        and records
                        and int(records[0].partition(b":")[0]) + base_line > last
                    ):
                        runs = iter(_misses(records, sampled[0]) + [count])
                        run_end = next(runs)
                    while index < count:
                        asked = False  # already counted by the sampler: not asked again
                        if runs is not None and index < run_end:
                            kept = sampled[1](run_end - index)
                            if kept is None:
                                skipped, index = records[run_end - 1], run_end
                                continue
                            record, index, asked = records[index + kept], index + kept + 1, True
                        else:
                            record, index = records[index], index + 1
                            if runs is not None and index > run_end:
                                run_end = next(runs)
                        number_text, _, rest = record.partition(b":")
                        number = int(number_text) + base_line
                        if number <= last:  # already read line by line while `every_line` was on
                            continue
                        cut = len(record) >= cap
                        if cut:
                            reader.cut(number)
                        if not asked and skip is not None and not every_line and skip(number, rest):
                            skipped = record
                            continue
                        skipped = None
                        offset_text, _, content = rest.partition(b":")
                        offset = int(offset_text) + base_offset
                        if cut:
                            content = content[:MAX_LINE_BYTES]
                        last = position.line = number
                        position.offset = offset
                        if reader.on_bytes is not None and offset > reader.bytes_reported:
                            reader.on_bytes(offset - reader.bytes_reported)
                            reader.bytes_reported = offset
                        yield number, content.decode("utf-8", errors="replace")
                        every_line = reader.every_line
                        if every_line:
                            last = yield from _every_line(reader, log, position, offset, last)
                            every_line = reader.every_line
                            runs = None  # the rest of this block one by one: some of it was read already
                _check_exit(stream.process)
            finally:
                if skipped is not None:  # the position is the last line seen, handed out or not
                    number_text, _, rest = skipped.partition(b":")
                    last = position.line = int(number_text) + base_line
                    position.offset = int(rest.partition(b":")[0]) + base_offset
    except _GrepFailed:
        position.failed = True


def _misses(records: list[bytes], literal: bytes) -> list[int]:
    """Indices of the records without `literal`, the test run in C (map), a Python step per miss only. `find`,
    not `contains` (see IterationSampler._make_skip): half the cost for a `--log-interval 1` log's million."""
    found = list(map(bytes.find, records, repeat(literal)))
    misses, index = [], -1
    for _ in range(found.count(-1)):
        index = found.index(-1, index + 1)
        misses.append(index)
    return misses


def _record_blocks(output, cap: int) -> Iterator[list[bytes]]:
    """grep's `-n -b` records without their newline, a block's worth per list. A record of `cap` bytes or more
    is cut to `cap` (so its length says it was cut), and the rest of it is dropped unread into memory."""
    read = getattr(output, "read1", output.read)
    pending = b""
    dropping = False  # inside an over-long record: discard up to its newline
    while True:
        chunk = read(_RECORDS_BYTES)
        if not chunk:
            if pending and not dropping:
                yield [pending[:cap]]
            return
        if dropping:
            newline = chunk.find(b"\n")
            if newline == -1:
                continue
            chunk, dropping = chunk[newline + 1 :], False
        records = chunk.split(b"\n")
        if pending:  # (not `pending + chunk`: a copy of every block)
            records[0] = pending + records[0]
        pending = records.pop()
        if len(pending) >= cap:
            records.append(pending[:cap])
            pending, dropping = b"", True
        elif not (records and len(records[0]) >= cap) and not may_hold_a_run(chunk, cap):
            yield records
            continue
        yield [record[:cap] for record in records] if records and max(map(len, records)) >= cap else records


def may_hold_a_run(data: bytes, length: int) -> bool:
    """False when `data` surely has no `length` bytes in a row without a newline: a run that long holds one of
    the windows of length // 2 that tile `data`, so a newline in every window rules it out (a few dozen `find`s
    a MiB, against `len` of every record)."""
    step = max(length // 2, 1)
    find = data.find
    return any(find(b"\n", start, start + step) < 0 for start in range(0, len(data), step))


def _every_line(reader, log, position: _Position, offset: int, last: int):
    """Lines straight from the file after the one at `offset`, while the reader wants them all."""
    log.seek(offset)
    _skip_line(log)
    while reader.every_line:
        start = log.tell()
        line = log.readline(MAX_LINE_BYTES)
        if not line:
            break
        last = position.line = last + 1
        position.offset = start
        if len(line) == MAX_LINE_BYTES and not line.endswith(b"\n"):
            _skip_line(log)
            reader.cut(last)
        yield last, line.rstrip(b"\n").decode("utf-8", errors="replace")
    return last


def _check_exit(process: subprocess.Popen) -> None:
    failed = process.wait() not in (0, 1)
    if process.feeder is not None:
        process.feeder.join()
        failed = failed or process.feeder.failed
    if failed:
        raise _GrepFailed


def _skip_line(stream) -> None:
    while True:
        chunk = stream.readline(MAX_LINE_BYTES)
        if not chunk or chunk.endswith(b"\n"):
            return


def _count_lines(fd: int, size: int, position: _Position) -> int:
    """Lines in the file, as a line reader counts them (a last line without a newline counts): the last
    line handed out has a known number, so only the newlines after it need counting."""
    if size == 0:
        return 0
    unterminated = os.pread(fd, 1, size - 1) != b"\n"
    if position.line == 0:
        return _newlines(fd, 0, size) + unterminated
    return position.line - 1 + _newlines(fd, position.offset, size) + unterminated
