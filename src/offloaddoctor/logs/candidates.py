"""Read a log and hand out the lines its handlers want, with their numbers.

What the handlers want is given as a `Wants`: their literals (a line holding none is not handed out), maybe an
even sample of one frequent literal's lines (iteration lines: `sample`, asked a run at a time), a question
asked of a candidate line before it is decoded (`skip`), and `every_line` while an open block (arguments, a
traceback) needs every line. The reader only reads `wants`; the line pass (logs/line_pass.py) sets them.

Every source is read the same way, in blocks: a small file is one block read whole; a large one, a `.gz`
(inflated by isal where installed) and standard input BLOCK_BYTES at a time. In a block one search finds the
lines holding a literal: hyperscan where it is installed (a dependency on Linux x86_64 and aarch64), which also
lets the sample's lines be counted in C and only the kept ones looked at; elsewhere a `bytes.find` pass per
literal, the same lines, several times slower on a large log (docs/performance.md). Memory is one block plus
one line, whatever the file size.
"""

from __future__ import annotations

import contextlib
import functools
import gzip
import os
import stat
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from offloaddoctor.errors import UserError
from offloaddoctor.logs.normalize import CONTROL_BYTES
from offloaddoctor.logs.sources import (
    GZIP_MAGIC,
    MAX_LINE_BYTES,
    LogSource,
    describe_read_error,
    is_utf16,
    leading_nul_bytes,
    not_text_error,
    not_text_reason,
    nul_note,
    open_binary,
    open_log,
    read_errors,
    stream_over,
)

BLOCK_BYTES = 8 << 20
GZIP_PIECE = 1 << 20
WHOLE_BYTES = 1 << 20  # a regular file smaller than this is read in one os.read
USE_HYPERSCAN = True  # tests hold the hyperscan road to the plain one by switching it off


@dataclass
class Wants:
    """What the handlers want of a reader. `skip(number, raw bytes)`: True for a candidate line nobody will use
    (asked only while `every_line` is off). `sample`: (literal, keep), the lines holding the literal are
    sampled evenly; keep(m) answers for the next m of them at once, as `skip` would one by one: the index of
    the next one kept (counting up to it), or None (counting all m)."""

    literals: Sequence[bytes]
    skip: Callable[[int, bytes], bool | None] | None = None
    sample: tuple[bytes, Callable[[int], int | None]] | None = None
    every_line: bool = False


def prefilter_literals(literals: Iterable[str]) -> tuple[bytes, ...]:
    """The byte strings to search for. A literal that contains another adds nothing: every line it finds,
    the shorter one finds too. (Cached: a pool's every run of files starts a pass; the same tuple each time.)"""
    return _prefilter(frozenset(literals))


@functools.lru_cache(maxsize=8)
def _prefilter(literals: frozenset[str]) -> tuple[bytes, ...]:
    kept: list[bytes] = []
    for literal in sorted({lit.encode("utf-8") for lit in literals if lit}, key=lambda lit: (len(lit), lit)):
        if not any(shorter in literal for shorter in kept):
            kept.append(literal)
    return tuple(sorted(kept))


class CandidateReader:
    """Iterate for (line number, text); afterwards `lines_read` is the source's line count."""

    def __init__(
        self,
        source: LogSource,
        wants: Wants,
        warnings: list[str],
        block_bytes: int = BLOCK_BYTES,
        on_bytes: Callable[[int], None] | None = None,
        fast: bool | None = None,
    ):
        """`fast`: hyperscan where installed (default: USE_HYPERSCAN); False: the plain road."""
        self.source, self.wants, self.warnings, self.on_bytes = source, wants, warnings, on_bytes
        self.block_bytes = max(block_bytes, MAX_LINE_BYTES + 1)
        self.lines_read = 0
        self.last_cut = 0  # the number of the last line cut short (its literal may have been in the cut part)
        self.no_controls = False  # True: no line handed out holds normalize.CONTROL_BYTES (a file read whole)
        self._failed = False
        self._find, self._bulk = _road(wants, USE_HYPERSCAN if fast is None else fast)

    def __iter__(self) -> Iterator[tuple[int, str]]:
        if self.source.path == "-":
            yield from self._stream(open_binary(self.source))  # standard input, or one line if it is closed
            return
        # Opened once (logs/sources.py open_log): a log rotated or replaced by name while it is read stays the
        # file read.
        fd = open_log(self.source)
        try:
            whole = self._read_small(fd)
        except BaseException:
            os.close(fd)
            raise
        if whole is None:
            yield from self._stream(stream_over(fd))  # closes the descriptor
            return
        os.close(fd)
        data, size_at_open = whole
        read = len(data)  # the file's bytes, before decoding or skipping any
        data = self._whole_text(data)
        # (here, not in a generator of its own: one generator less for every line of 20,000 rank logs)
        self.lines_read = (yield from self._block_lines(data, len(data), 0)) if data else 0
        if read < size_at_open:
            self._note_shrunk(size_at_open, read)

    def _read_small(self, fd: int) -> tuple[bytes, int] | None:
        """A small regular text file in one read (20,000 rank logs: no buffered stream, one fstat): (its bytes,
        its size when opened); None for anything else, which the stream road reads."""
        limit = min(self.block_bytes, WHOLE_BYTES)
        try:
            status = os.fstat(fd)
            if not stat.S_ISREG(status.st_mode) or status.st_size >= limit:
                return None
            data = os.read(fd, status.st_size + 1)
            # To the end: a short read, or a log still being written, reads on; all the bytes fstat gave and
            # no more is the end (no second read for 20,000 rank logs).
            while len(data) < limit and len(data) != status.st_size:
                more = os.read(fd, limit - len(data))
                if not more:
                    break
                data += more
            if data[:2] == GZIP_MAGIC or len(data) >= limit:
                os.lseek(fd, 0, os.SEEK_SET)  # the stream road reads it from the start
                return None
        except OSError:
            with contextlib.suppress(OSError):
                os.lseek(fd, 0, os.SEEK_SET)
            return None  # the stream road reads it and says why it cannot
        return data, status.st_size

    def _whole_text(self, data: bytes) -> bytes:
        """A file read whole as the block of UTF-8 lines to read, each ending in a newline (b"" for none)."""
        read = len(data)
        if is_utf16(data):  # (it looks at the first 4,098 bytes; the stream road decodes it too: stream_over)
            data = data.decode("utf-16", "replace").encode("utf-8", "replace")
        nuls = leading_nul_bytes(data)
        if nuls:
            self.warnings.append(nul_note(self.source.name, nuls))
            data = data[nuls:]
        reason = not_text_reason(data if len(data) <= 8192 else data[:8192]) if data else None
        if reason:
            raise not_text_error(self.source, reason)
        if self.on_bytes is not None and read:
            self.on_bytes(read)
        if data and not data.endswith(b"\n"):
            data += b"\n"  # the last line has no newline: counted like the rest, as the block reader does
        # One pass over the file instead of a test per line (an iteration line's isprintable was ~10k instructions).
        self.no_controls = len(data.translate(None, CONTROL_BYTES)) == len(data)
        return data

    def _stream(self, stream) -> Iterator[tuple[int, str]]:
        size_at_open = _file_size(stream)
        try:
            yield from self._lines(stream)
            size_now = _file_size(stream)
            if size_at_open is not None and size_now is not None and size_now < size_at_open:
                self._note_shrunk(size_at_open, size_now)
        finally:
            if stream is not sys.stdin.buffer:
                stream.close()

    def _note_shrunk(self, size_at_open: int, size_now: int) -> None:
        """A log cut shorter while it was read (a rotating logger truncating it in place, `copytruncate`)."""
        self.warnings.append(
            f"{self.source.name}: shrank from {size_at_open:,} to {size_now:,} bytes while it was read "
            "(a rotating logger truncating it?); lines past the cut were not read"
        )

    def _lines(self, stream) -> Iterator[tuple[int, str]]:
        leftover = b""
        line_number = 0
        first = True
        nuls = 0
        while True:
            data, at_end = self._read(stream, line_number)
            if first and data[:1] == b"\x00":  # a zeroed start: skipped, however many blocks it takes
                skipped = leading_nul_bytes(data)
                nuls, data = nuls + skipped, data[skipped:]
                if not data and not at_end:
                    continue
            if first and nuls:
                self.warnings.append(nul_note(self.source.name, nuls))
            reason = not_text_reason(data[:8192]) if first and data else None
            if reason:
                raise not_text_error(self.source, reason)
            first = False
            block = leftover + data if leftover else data
            if at_end and block and not block.endswith(b"\n"):
                block += b"\n"  # the last line has no newline: give it one so it is counted like the rest
            end = block.rfind(b"\n") + 1
            if end == 0 and not at_end:
                if len(block) > MAX_LINE_BYTES:  # one very long line: keep its head, drop the rest
                    line_number += 1
                    self._cut(line_number)
                    yield line_number, block[:MAX_LINE_BYTES].decode("utf-8", errors="replace")
                    at_end, leftover = self._drop_to_newline(stream, line_number)
                    if at_end:
                        break
                    continue
                leftover = block
                continue
            if end:  # not the empty read that ends a file
                line_number = yield from self._block_lines(block, end, line_number)
            leftover = block[end:]
            if at_end:
                break
        self.lines_read = line_number

    def _block_lines(self, block: bytes, end: int, number: int):
        """The wanted lines of block[:end] (whole lines), numbered on from `number`; returns the last number."""
        wants, count, find = self.wants, block.count, block.find
        hits = self._find(block, end)  # starts of the lines to look at one by one, in order
        bulk, keep = self._bulk or b"", None
        if self._bulk is not None and wants.sample is not None:
            keep = wants.sample[1]
        next_hit, at, pos = 0, 0, 0
        left = -1  # the sampled lines known to lie in [pos, next hit) (-1: not counted yet)
        while pos < end:
            asked = False
            if wants.every_line:
                start, left = pos, -1
            else:
                while next_hit < len(hits) and hits[next_hit] < pos:
                    next_hit += 1
                limit = hits[next_hit] if next_hit < len(hits) else end
                start = limit
                if keep is not None and pos < limit:
                    # The sampled lines before the next hit, counted in C (an occurrence each: see
                    # line_pass._skip_of); only the one kept is found.
                    if left < 0:
                        left = count(bulk, pos, limit)
                    kept = keep(left) if left else None
                    if kept is None:
                        left = 0
                    else:
                        at = find(bulk, pos, limit) if kept == 0 else _nth(block, bulk, pos, limit, kept, left)
                        start, asked = block.rfind(b"\n", 0, at) + 1, True
                        # The line's later occurrences are counted too, as a line read alone counts them.
                        more = count(bulk, at + len(bulk), find(b"\n", at, limit))
                        if more:
                            keep(more)
                        left -= kept + 1 + more
                if start == end:
                    return number + count(b"\n", pos, end)
                if not asked:
                    left = -1  # past a hit: the next run is counted afresh
            number += count(b"\n", pos, start)
            stop = find(b"\n", start, end)
            stop = end if stop == -1 else stop
            number += 1
            if stop - start > MAX_LINE_BYTES:
                self._cut(number)
                line = block[start : start + MAX_LINE_BYTES]
            else:
                line = block[start:stop]
            pos = stop + 1
            skip = wants.skip
            if not asked and skip is not None and not wants.every_line and skip(number, line):
                continue
            yield number, line.decode("utf-8", errors="replace")
        return number

    def _read(self, stream, line_number: int) -> tuple[bytes, bool]:
        """Up to one block; (data, at_end). A read error keeps what came before it (a truncated .gz is
        read as far as it goes) and ends the source with a warning."""
        if self._failed:
            return b"", True
        read = getattr(stream, "read1", stream.read)  # read1: gzip hands out what it decoded before an error
        # ... a MiB at a time: isal asked for a whole block inflates all of it first, or nothing on damage.
        piece = GZIP_PIECE if isinstance(stream, gzip.GzipFile) else self.block_bytes
        chunks, size = [], 0
        try:
            while size < self.block_bytes:
                data = read(min(piece, self.block_bytes - size))
                if not data:
                    break
                chunks.append(data)
                size += len(data)
        except read_errors() as exc:
            if line_number == 0 and not chunks:
                raise UserError(f"{self.source.name}: cannot read: {describe_read_error(exc)}") from None
            self._failed = True
            self.warnings.append(
                f"{self.source.name}: stopped early, the rest is unreadable: {describe_read_error(exc)}"
            )
        data = b"".join(chunks) if len(chunks) != 1 else chunks[0]
        if self.on_bytes is not None and data:
            self.on_bytes(len(data))
        return data, not data

    def _drop_to_newline(self, stream, line_number: int) -> tuple[bool, bytes]:
        """Skip the rest of an over-long line: (True, b"") when the file ended first, else what follows it."""
        while True:
            data, at_end = self._read(stream, line_number)
            if at_end:
                return True, b""
            newline = data.find(b"\n")
            if newline != -1:
                return False, data[newline + 1 :]

    def _cut(self, line_number: int) -> None:
        self.last_cut = line_number
        self.warnings.append(f"{self.source.name}:{line_number}: line longer than {MAX_LINE_BYTES} bytes was cut")


def _road(wants: Wants, fast: bool) -> tuple[Callable[[bytes, int], list[int]], bytes | None]:
    """The search for the wanted literals, and the sampled literal it leaves out to be counted in bulk (None: every
    literal's lines are found)."""
    literals = tuple(wants.literals)
    sampled = wants.sample[0] if wants.sample is not None and wants.sample[0] in literals else None
    find = _finder(literals, sampled) if fast else None
    if find is None:  # the plain road: every literal's lines asked one by one
        return functools.partial(_plain_hits, literals), None
    return find, sampled


def _file_size(stream) -> int | None:
    """The size of the regular file under the stream (a gzip one's compressed size), or None."""
    try:
        status = os.fstat(stream.fileno())
    except (OSError, AttributeError, ValueError):
        return None
    return status.st_size if stat.S_ISREG(status.st_mode) else None


def _nth(block: bytes, literal: bytes, pos: int, limit: int, n: int, total: int) -> int:
    """Where the `n`-th (from 0) of the `total` occurrences of `literal` in block[pos:limit] is (`pos`: a line
    start). Iteration lines come at about even distances: a guess in proportion, the occurrences before it
    counted in C, then a step or two to the one wanted (a `find` a line: ~1 s for a million)."""
    guess = block.rfind(b"\n", pos, pos + (limit - pos) * n // total) + 1 or pos  # a line start
    before = block.count(literal, pos, guess)
    if before <= n:
        at = block.find(literal, guess, limit)
        for _ in range(n - before):
            at = block.find(literal, at + len(literal), limit)
    else:
        at = guess
        for _ in range(before - n):
            at = block.rfind(literal, pos, at)
    return at


def _plain_hits(literals: tuple[bytes, ...], block: bytes, end: int) -> list[int]:
    """The starts of the lines of block[:end] holding a literal: a `find` pass per literal the block holds."""
    starts: set[int] = set()
    for literal in [literal for literal in literals if literal in block]:
        found = block.find(literal, 0, end)
        while found != -1:
            starts.add(block.rfind(b"\n", 0, found) + 1)
            newline = block.find(b"\n", found, end)
            if newline == -1:
                break
            found = block.find(literal, newline + 1, end)
    return sorted(starts)


@functools.lru_cache(maxsize=8)
def _finder(literals: tuple[bytes, ...], sampled: bytes | None) -> Callable[[bytes, int], list[int]] | None:
    """hyperscan's search for the literals but `sampled` (compiled once a process, ~15 ms), or None where it is
    not installed."""
    try:
        import hyperscan
    except ImportError:
        return None

    patterns = [literal for literal in literals if literal != sampled]
    if not patterns:
        return lambda block, end: []
    database = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    database.compile(expressions=patterns, ids=list(range(len(patterns))), elements=len(patterns), literal=True)
    scratch = hyperscan.Scratch(database)

    ends: list[int] = []  # one scan at a time: the scratch is shared too
    add = ends.append

    def on_match(ident, start, stop, flags, context):
        add(stop)

    def hits(block: bytes, end: int) -> list[int]:
        # on_match is held by the closure for the whole scan: hyperscan 0.9.1 crashed on a bare lambda (issue 28)
        ends.clear()
        database.scan(memoryview(block)[:end], match_event_handler=on_match, scratch=scratch)  # type: ignore[type-var, unused-ignore]
        rfind = block.rfind
        starts = sorted({rfind(b"\n", 0, stop) + 1 for stop in ends})
        ends.clear()
        return starts

    return hits
