"""Read a log in large blocks and hand out the lines that contain one of a set of literals.

Most of a training log (iteration chatter, NCCL info, warnings) can never match a signature. Finding the
few candidate lines with `bytes.find` over a whole block runs at memory speed; splitting, decoding and
normalising happen only for candidates. The caller can ask for *every* line for a while (inside an
arguments block or a traceback) by setting `every_line`. Memory is one block plus one line, whatever
the file size.
"""

from __future__ import annotations

import contextlib
import functools
import gzip
import io
import os
import re
import stat
import sys
import zlib
from collections.abc import Callable, Iterable, Iterator
from bisect import bisect_left, bisect_right

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
    reopen,
    stream_over,
)

BLOCK_BYTES = 1 << 20
# A block this large read in Python (standard input, a small .gz, no GNU grep) pays for compiling the
# literals' finder: on NCCL INFO chatter 12 ms a MiB against 21 for a test per literal.
FINDER_MIN_BLOCK = 256 << 10
GREP_MIN_BYTES = 8 << 20  # a plain file this large goes through GNU grep (logs/grep_prefilter.py) when there is one
GZ_SPOOL_MIN_BYTES = 1 << 20  # a .gz this large (compressed) is decompressed by gzip(1) into a temporary file
GZ_SPOOL_MAX_BYTES = 16 << 30  # ... of at most this (and half the free space there), or read in Python


def prefilter_literals(literals: Iterable[str]) -> list[bytes]:
    """The byte strings to search for. A literal that contains another adds nothing: every line it finds,
    the shorter one finds too. Sorted by length first, so each is compared only with shorter ones kept.
    (Once a process for one set of literals, ~1.4 ms: a pool's every run of files starts a pass. The list is
    shared: not to be changed.)"""
    return _prefilter(frozenset(literals))


@functools.lru_cache(maxsize=8)
def _prefilter(literals: frozenset[str]) -> list[bytes]:
    kept: list[bytes] = []
    for literal in sorted({lit.encode("utf-8") for lit in literals if lit}, key=lambda lit: (len(lit), lit)):
        if not any(shorter in literal for shorter in kept):
            kept.append(literal)
    return sorted(kept)


def _file_size(stream) -> int | None:
    """The size of the regular file under the stream (a gzip one's compressed size), or None."""
    try:
        status = os.fstat(stream.fileno())
    except (OSError, AttributeError, ValueError, io.UnsupportedOperation):
        return None
    return status.st_size if stat.S_ISREG(status.st_mode) else None


class CandidateReader:
    def __init__(
        self,
        source: LogSource,
        literals: Iterable[str],
        warnings: list[str],
        block_bytes: int = BLOCK_BYTES,
        on_bytes: Callable[[int], None] | None = None,
        use_grep: bool = True,
        prefiltered: list[bytes] | None = None,
        finder: re.Pattern[bytes] | None = None,
    ):
        self.source = source
        # `prefiltered`: prefilter_literals() of the literals, computed once for many sources.
        self.literals = prefiltered if prefiltered is not None else prefilter_literals(literals)
        # literal_trie(literals): one search a hit line instead of a test per literal (a pass past many small
        # files gives it; a large block read here makes it).
        self.finder = finder
        self.warnings = warnings
        self.block_bytes = max(block_bytes, MAX_LINE_BYTES + 1)
        self.every_line = False
        # Set by the consumer: skip(line number, line bytes) is True for a candidate line it would discard
        # unread, e.g. an iteration line past the sample it keeps. Asked only while every_line is off;
        # skipping saves decoding it.
        self.skip: Callable[[int, bytes], bool] | None = None
        self.sampled = None  # set by the consumer with `skip`: see logs/line_pass.py LineHandler.sampled
        self.use_grep = use_grep
        self.bytes_reported = 0
        self.expanded_reported = 0  # a .gz's decompressed bytes counted by progress (the spool road)
        self.on_bytes = on_bytes  # progress: called with the bytes of each block read
        self._failed = False
        self.lines_read = 0  # after iteration: the number of lines in the source
        self.last_cut = 0  # the number of the last line cut short (its literal may have been in the cut part)
        # True while the lines handed out hold none of normalize.CONTROL_BYTES (checked for a file read whole).
        self.no_controls = False
        # The file, opened once (logs/sources.py open_log): every road reads this descriptor, or a reopen() of
        # it, never the path again: a log rotated or replaced by name while it is read stays the file read.
        self._fd = -1

    def __iter__(self) -> Iterator[tuple[int, str]]:
        if self.source.path == "-":
            yield from self._stream_roads(open_binary(self.source))  # standard input, or one line if it is closed
            return
        self._fd = open_log(self.source)
        try:
            whole = self._read_small()
        except BaseException:
            os.close(self._fd)
            raise
        if whole is not None:
            os.close(self._fd)
            yield from self._whole(*whole)
            return
        with stream_over(self._fd) as stream:  # closes the descriptor
            yield from self._stream_roads(stream)

    def _stream_roads(self, stream) -> Iterator[tuple[int, str]]:
        size_at_open = _file_size(stream)
        try:
            if isinstance(stream, gzip.GzipFile):
                spool = self._gunzip_to_spool()
                if spool is not None:  # a large .gz: decompressed by gzip(1), then read like a plain file
                    yield from self._spooled(spool)
                    return
            if size_at_open is not None and size_at_open < GREP_MIN_BYTES and type(stream) is io.BufferedReader:
                # A small regular file (20,000 rank logs): grep would not be chosen for it, so skip asking (a stat
                # or two each).
                yield from self._lines(stream)
                self._note_shrinking(stream, size_at_open)
                return
            if self._grep_suits(stream):
                from offloaddoctor.logs.grep_prefilter import grep_lines

                yield from grep_lines(self, self._fd)
            else:
                yield from self._lines(stream)
            self._note_shrinking(stream, size_at_open)
        finally:
            if stream is not sys.stdin.buffer:
                stream.close()

    def _read_small(self) -> tuple[bytes, int] | None:
        """A small regular text file in one read (20,000 rank logs: no buffered stream, no peek, one fstat):
        (its bytes, its size when opened); None for anything else, which the stream road reads."""
        limit = self._whole_limit()
        fd = self._fd
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

    def _whole_limit(self) -> int:
        """Below this a file is one block of the block reader, and grep is not chosen for it."""
        return min(self.block_bytes, GREP_MIN_BYTES)

    def _whole(self, data: bytes, size_at_open: int) -> Iterator[tuple[int, str]]:
        read = len(data)  # the file's bytes, before decoding or skipping any
        if is_utf16(data[:4098]):  # (the stream road decodes it too: logs/sources.py stream_over)
            data = data.decode("utf-16", "replace").encode("utf-8", "replace")
        nuls = leading_nul_bytes(data)
        if nuls:
            self.warnings.append(nul_note(self.source.name, nuls))
            data = data[nuls:]
        reason = not_text_reason(data[:8192]) if data else None
        if reason:
            raise not_text_error(self.source, reason)
        size = len(data)
        if self.on_bytes is not None and read:
            self.on_bytes(read)
        if size and not data.endswith(b"\n"):
            data += b"\n"  # the last line has no newline: counted like the rest, as the block reader does
        # One pass over the file instead of a test per line (an iteration line's isprintable was ~10k instructions).
        self.no_controls = len(data.translate(None, CONTROL_BYTES)) == len(data)
        self.lines_read = (yield from self._block_lines(data, len(data), 0, self.finder)) if size else 0
        if read < size_at_open:
            self._note_shrunk(size_at_open, read)

    def _gunzip_to_spool(self) -> str | None:
        """A temporary file with the log decompressed by gzip(1) (C, no Python per byte), for the grep road;
        None (read it in Python, as before) unless it is large, gzip and GNU grep are at hand, and gzip
        decompresses it cleanly: a truncated or damaged file keeps the Python reader's warnings."""
        if not self.use_grep:
            return None
        try:
            if os.fstat(self._fd).st_size < GZ_SPOOL_MIN_BYTES:
                return None
        except OSError:
            return None
        packed = reopen(self._fd)  # gzip(1)'s input: this very file, not what its name may lead to by now
        if packed is None:
            return None
        import shutil
        import tempfile

        from offloaddoctor.logs.grep_prefilter import gnu_grep, gunzip_into

        with packed:
            gunzip = shutil.which("gzip")
            if gunzip is None or gnu_grep() is None:
                return None
            handle, spool = tempfile.mkstemp(prefix="offloaddoctor-gunzip-", suffix=".log")
            try:
                limit = max(0, min(GZ_SPOOL_MAX_BYTES, shutil.disk_usage(os.path.dirname(spool)).free // 2))
                report = self._report_expanded if self.on_bytes is not None else None
                whole = gunzip_into(gunzip, packed, handle, limit, report)
            except OSError:
                whole = False
            except BaseException:  # an interrupt: the temporary file goes too
                os.unlink(spool)
                raise
            finally:
                os.close(handle)
        if not whole:
            os.unlink(spool)
            return None
        return spool

    def _spooled(self, spool: str) -> Iterator[tuple[int, str]]:
        from offloaddoctor.logs.grep_prefilter import grep_lines

        try:
            with open(spool, "rb") as plain:
                reason = not_text_reason(plain.peek(8192)[:8192])
                if reason:
                    raise not_text_error(self.source, reason)
                # Progress counted the spool as gzip wrote it (decompressed bytes); the rest when it has been read.
                progress, self.on_bytes = self.on_bytes, None
                try:
                    yield from grep_lines(self, plain.fileno())
                finally:
                    self.on_bytes = progress
                self._report_expanded(os.fstat(plain.fileno()).st_size)
        finally:
            os.unlink(spool)

    def _report_expanded(self, size: int) -> None:
        """Progress on the .gz spool: `size` is how much of the log gzip has decompressed so far."""
        if self.on_bytes is not None and size > self.expanded_reported:
            self.on_bytes(size - self.expanded_reported)
            self.expanded_reported = size

    def _note_shrinking(self, stream, size_at_open: int | None) -> None:
        """A log cut shorter while it was read (a rotating logger truncating it in place, `copytruncate`):
        what was past the cut is not read, and the report must say so."""
        size_now = _file_size(stream)
        if size_at_open is not None and size_now is not None and size_now < size_at_open:
            self._note_shrunk(size_at_open, size_now)

    def _note_shrunk(self, size_at_open: int, size_now: int) -> None:
        self.warnings.append(
            f"{self.source.name}: shrank from {size_at_open:,} to {size_now:,} bytes while it was read "
            "(a rotating logger truncating it?); lines past the cut were not read"
        )

    def _grep_suits(self, stream) -> bool:
        """A large plain file, not gzip, not binary, and GNU grep at hand: let grep find the candidates."""
        if (
            not self.use_grep
            or self.source.path == "-"
            or not isinstance(stream, io.BufferedReader)
            or not isinstance(stream.raw, io.FileIO)  # a UTF-16 log decoded as it is read
        ):
            return False
        try:
            if os.fstat(self._fd).st_size < GREP_MIN_BYTES:
                return False
        except OSError:
            return False
        again = reopen(self._fd)  # grep reads the file through such a handle, never by its name
        if again is None:
            return False
        again.close()
        from offloaddoctor.logs.grep_prefilter import gnu_grep

        if gnu_grep() is None:
            return False
        head = stream.peek(8192)[:8192]
        reason = not_text_reason(head)
        if reason:
            raise not_text_error(self.source, reason)
        return head[:1] != b"\x00"  # a zeroed start: the block reader skips it

    def cut(self, line_number: int) -> None:
        self._cut(line_number)

    def _lines(self, stream, line_number: int = 0) -> Iterator[tuple[int, str]]:
        """From the stream's position; `line_number`: lines before it (when resuming after grep)."""
        leftover = b""
        first = line_number == 0
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
            block = leftover + data
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
                finder = self.finder
                if finder is None and end >= FINDER_MIN_BLOCK:
                    from offloaddoctor.logs.literal_trie import literal_trie  # compiled once a process (~12 ms)

                    finder = self.finder = literal_trie(tuple(self.literals))
                line_number = yield from self._block_lines(block, end, line_number, finder)
            leftover = block[end:]
            if at_end:
                break
        self.lines_read = line_number

    def _block_lines(self, block: bytes, end: int, line_number: int, finder: re.Pattern[bytes] | None = None):
        hits = self._hit_line_starts(block, end, finder)
        pos = 0
        while pos < end:
            if self.every_line:
                start = pos
            else:
                index = bisect_left(hits, pos)
                if index == len(hits):
                    line_number += block.count(b"\n", pos, end)
                    break
                start = hits[index]
                line_number += block.count(b"\n", pos, start)
            stop = block.find(b"\n", start, end)
            stop = end if stop == -1 else stop
            line_number += 1
            if stop - start > MAX_LINE_BYTES:
                self._cut(line_number)
                line = block[start : start + MAX_LINE_BYTES]
            else:
                line = block[start:stop]
            pos = stop + 1
            if self.skip is not None and not self.every_line and self.skip(line_number, line):
                continue
            yield line_number, line.decode("utf-8", errors="replace")
        return line_number

    def _hit_line_starts(self, block: bytes, end: int, finder: re.Pattern[bytes] | None = None) -> list[int]:
        starts: set[int] = set()
        haystack = block
        # With the finder: where each piece of the joined rest starts in it, and in the block.
        rest_at: list[int] = []
        rest_from: list[int] = []
        sampled = self.sampled[0] if self.sampled is not None else None
        if sampled is not None and sampled in self.literals:
            # The sampled literal (iteration lines: the common candidates) first; the other literals are then
            # looked for only in the rest of the block: a line already a hit needs no second literal. (Joining
            # whole lines makes no false hit across a seam that matters: a pattern holds no newline, as the
            # line gate tests it within one line; and a false presence only costs a search of the block.)
            rest = []
            pos = joined = 0
            found = block.find(sampled, 0, end)
            while found != -1:
                start = block.rfind(b"\n", 0, found) + 1
                starts.add(start)
                rest.append(block[pos:start])
                if finder is not None:
                    rest_at.append(joined)
                    rest_from.append(pos)
                    joined += start - pos
                newline = block.find(b"\n", found, end)
                pos = end if newline == -1 else newline + 1
                found = -1 if newline == -1 else block.find(sampled, pos, end)
            if rest:
                rest.append(block[pos:end])
                rest_at.append(joined)
                rest_from.append(pos)
                haystack = b"".join(rest)
        searched = end if haystack is block else len(haystack)
        if finder is not None:
            # One search per line holding a literal (a literal holds no newline, so each such line has a match
            # of its own), mapped back from the joined lines to the block.
            pos = 0
            while (hit := finder.search(haystack, pos, searched)) is not None:
                at = hit.start()
                if haystack is not block:
                    piece = bisect_right(rest_at, at) - 1
                    at += rest_from[piece] - rest_at[piece]
                starts.add(block.rfind(b"\n", 0, at) + 1)
                newline = haystack.find(b"\n", hit.start(), searched)
                if newline == -1:
                    break
                pos = newline + 1
            return sorted(starts)
        # Which patterns occur at all, in one comprehension: most blocks of a healthy log hold none or few.
        present = [literal for literal in self.literals if literal in haystack and literal != sampled]
        for literal in present:
            found = block.find(literal, 0, end)
            while found != -1:
                starts.add(block.rfind(b"\n", 0, found) + 1)
                newline = block.find(b"\n", found, end)
                if newline == -1:
                    break
                found = block.find(literal, newline + 1, end)
        return sorted(starts)

    def _read(self, stream, line_number: int) -> tuple[bytes, bool]:
        """Up to one block; (data, at_end). A read error keeps what came before it (a truncated .gz is
        read as far as it goes) and ends the source with a warning."""
        if self._failed:
            return b"", True
        read = getattr(stream, "read1", stream.read)  # read1: gzip hands out what it decoded before an error
        chunks, size = [], 0
        try:
            while size < self.block_bytes:
                data = read(self.block_bytes - size)
                if not data:
                    break
                chunks.append(data)
                size += len(data)
        except (EOFError, gzip.BadGzipFile, zlib.error, OSError) as exc:
            if line_number == 0 and not chunks:
                raise UserError(f"{self.source.name}: cannot read: {describe_read_error(exc)}") from None
            self._failed = True
            self.warnings.append(
                f"{self.source.name}: stopped early, the rest is unreadable: {describe_read_error(exc)}"
            )
        data = b"".join(chunks)
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

    def exact_candidate(self, line_number: int) -> bool:
        """Whether a line handed out while `every_line` is off surely holds a literal: not when the line was
        cut (the literal may have been in the cut part)."""
        return line_number != self.last_cut

    def _cut(self, line_number: int) -> None:
        self.last_cut = line_number
        self.warnings.append(f"{self.source.name}:{line_number}: line longer than {MAX_LINE_BYTES} bytes was cut")
