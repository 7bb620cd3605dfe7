"""GNU grep as the candidate finder for large plain log files.

`grep -F -f` finds every line holding one of the literals in one Aho–Corasick pass in C, where the block
reader needs one `bytes.find` pass per literal. Same contract as CandidateReader: (line number, text) for
candidate lines, and every line while the caller sets `every_line` (read from the file itself, from the
byte offset grep reports). Used only for a plain regular file of at least GREP_MIN_BYTES when GNU grep is on
PATH; gzip, standard input and small files go through the block reader.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator

from offloaddoctor.logs.sources import MAX_LINE_BYTES

GREP_MIN_BYTES = 8 * 1024 * 1024
GREP_MEMORY_BYTES = 256 * 1024 * 1024  # address-space limit for grep: a giant line makes it stop, not swell
_COUNT_BLOCK = 1 << 22


@functools.lru_cache(maxsize=1)
def gnu_grep() -> str | None:
    path = shutil.which("grep")
    if path is None:
        return None
    try:
        version = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=5).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return path if "GNU grep" in version else None


def grep_lines(reader, path: str) -> Iterator[tuple[int, str]]:
    """`reader` is the CandidateReader whose literals, every_line, warnings and counters this serves."""
    grep = gnu_grep()
    with tempfile.NamedTemporaryFile("wb", prefix="offloaddoctor-literals-") as patterns:
        patterns.write(b"\n".join(reader.literals) + b"\n")
        patterns.flush()
        process = subprocess.Popen(
            [grep, "-F", "-a", "-n", "-b", "-f", patterns.name, "--", path],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env={**os.environ, "LC_ALL": "C"},
            preexec_fn=_limit_memory,
        )
        position = _Position()
        counter = _start_line_count(path)  # `wc -l` on the other core while grep runs
        done = False
        try:
            with open(path, "rb") as log:
                yield from _merge(reader, process.stdout, log, position)
                failed = process.wait() not in (0, 1)
                if failed:
                    # grep holds a whole line in memory; on a giant line it hits its limit and stops. Go on
                    # from the last line it delivered with the block reader, which cuts long lines.
                    log.seek(position.offset)
                    if position.line:
                        _skip_line(log)
                    yield from reader._lines(log, position.line)
                    return
            done = True
        finally:
            process.stdout.close()
            process.kill()
            process.wait()
            if counter is not None and not done:
                counter.kill()
                counter.wait()
    reader.lines_read = _count_lines(path, counter)
    if reader.on_bytes is not None:
        reader.on_bytes(os.path.getsize(path) - reader.bytes_reported)


class _Position:
    """The last line handed out: its number and the byte offset where it starts."""

    line = 0
    offset = 0


def _limit_memory() -> None:  # runs in the grep child before exec
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (GREP_MEMORY_BYTES, GREP_MEMORY_BYTES))


def _merge(reader, output, log, position: _Position) -> Iterator[tuple[int, str]]:
    last = 0  # the last line number handed out
    while True:
        record = output.readline(MAX_LINE_BYTES + 64)
        if not record:
            return
        number_text, _, rest = record.partition(b":")
        offset_text, _, content = rest.partition(b":")
        if len(record) == MAX_LINE_BYTES + 64 and not record.endswith(b"\n"):  # over the cap: keep its head
            _skip_line(output)
            content = content[:MAX_LINE_BYTES]
            reader.cut(int(number_text))
        number, offset = int(number_text), int(offset_text)
        if number <= last:
            continue
        _report(reader, offset)
        last = position.line = number
        position.offset = offset
        yield number, content.rstrip(b"\n").decode("utf-8", errors="replace")
        if reader.every_line:
            log.seek(offset)
            _skip_line(log)
            while reader.every_line:
                start = log.tell()
                line = log.readline(MAX_LINE_BYTES)
                if not line:
                    return
                last = position.line = last + 1
                position.offset = start
                if len(line) == MAX_LINE_BYTES and not line.endswith(b"\n"):
                    _skip_line(log)
                    reader.cut(last)
                yield last, line.rstrip(b"\n").decode("utf-8", errors="replace")


def _skip_line(stream) -> None:
    while True:
        chunk = stream.readline(MAX_LINE_BYTES)
        if not chunk or chunk.endswith(b"\n"):
            return


def _report(reader, offset: int) -> None:
    if reader.on_bytes is not None and offset > reader.bytes_reported:
        reader.on_bytes(offset - reader.bytes_reported)
        reader.bytes_reported = offset


def _start_line_count(path: str) -> subprocess.Popen | None:
    wc = shutil.which("wc")
    if wc is None:
        return None
    try:
        return subprocess.Popen([wc, "-l", "--", path], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                env={**os.environ, "LC_ALL": "C"})
    except OSError:
        return None


def _count_lines(path: str, counter: subprocess.Popen | None) -> int:
    """Newlines, plus one for a last line without one (as a line reader counts)."""
    with open(path, "rb") as log:
        log.seek(0, os.SEEK_END)
        size = log.tell()
        if size == 0:
            return 0
        log.seek(size - 1)
        unterminated = log.read(1) != b"\n"
        if counter is not None:
            output, _ = counter.communicate()
            if counter.returncode == 0 and output.split()[:1] and output.split()[0].isdigit():
                return int(output.split()[0]) + unterminated
        log.seek(0)
        count = 0
        while block := log.read(_COUNT_BLOCK):
            count += block.count(b"\n")
        return count + unterminated
