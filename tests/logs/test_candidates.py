"""The block reader must hand out exactly the lines a line-by-line read would, with the same numbers."""

from __future__ import annotations

import gzip
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from offloaddoctor.errors import UserError
from offloaddoctor.logs import candidates
from offloaddoctor.logs.candidates import CandidateReader, Wants, prefilter_literals
from offloaddoctor.logs.line_pass import _skip_of
from offloaddoctor.logs.normalize import strip_terminal_codes
from offloaddoctor.logs.sources import (
    MAX_LINE_BYTES,
    LogSource,
    describe_read_error,
    not_text_error,
    not_text_reason,
    open_binary,
)

LITERALS = ["Error", "CUDA out of memory", "é"]
line_text = st.lists(
    st.sampled_from(list("ab \t:[]é\r") + ["Error", "CUDA out of memory", "Err", "CUDA"]), max_size=12
).map("".join)


# The reference reader the candidate readers are checked against: every line, one `readline` at a time.
def iter_raw_lines(source: LogSource, warnings: list[str]) -> Iterator[tuple[int, str]]:
    """Yield (line number, decoded line) for one source, one readline at a time. Problems that still leave
    readable text become `warnings`; a source with nothing readable is a UserError."""
    stream = open_binary(source)
    line_number = 0
    try:
        while True:
            try:
                chunk = stream.readline(MAX_LINE_BYTES)
            except (EOFError, gzip.BadGzipFile, zlib.error, OSError) as exc:
                if line_number == 0:
                    raise UserError(f"{source.name}: cannot read: {describe_read_error(exc)}") from None
                warnings.append(f"{source.name}: stopped after line {line_number}: {describe_read_error(exc)}")
                return
            if not chunk:
                return
            reason = not_text_reason(chunk[:8192]) if line_number == 0 else None
            if reason:
                raise not_text_error(source, reason)
            if len(chunk) == MAX_LINE_BYTES and not chunk.endswith(b"\n"):
                _skip_rest_of_line(stream)
                warnings.append(f"{source.name}:{line_number + 1}: line longer than {MAX_LINE_BYTES} bytes was cut")
            line_number += 1
            yield line_number, chunk.decode("utf-8", errors="replace").rstrip("\n")
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()


def _skip_rest_of_line(stream) -> None:
    while True:
        rest = stream.readline(MAX_LINE_BYTES)
        if not rest or rest.endswith(b"\n"):
            return


def reader_of(literals=LITERALS, fast=None, stream=False, **kwargs):
    """A road: `fast` hyperscan (where installed) or the plain finder; a small file read whole, or as a stream."""

    def make(source, wants_or_literals=literals, warnings=None, **more):
        wants = wants_or_literals
        if not isinstance(wants, Wants):
            wants = Wants(prefilter_literals(wants))
        reader = CandidateReader(source, wants, [] if warnings is None else warnings, fast=fast, **kwargs, **more)
        if stream:
            reader._read_small = lambda fd: None
        return reader

    return make


HAS_HYPERSCAN = candidates._finder((b"x",), None) is not None
ROADS = [reader_of(fast=fast, stream=stream) for fast in (False, True) for stream in (False, True)]
STREAM_ROADS = ROADS[1::2]
needs_hyperscan = pytest.mark.skipif(not HAS_HYPERSCAN, reason="needs hyperscan")


def write(tmp_path, lines: list[str], final_newline: bool, name: str = "job.log"):
    path = tmp_path / name
    data = "\n".join(lines) + ("\n" if final_newline and lines else "")
    path.write_bytes(data.encode())
    return LogSource(str(path))


@settings(max_examples=150, deadline=None)
@given(st.lists(line_text, max_size=60), st.booleans(), st.integers(MAX_LINE_BYTES + 1, MAX_LINE_BYTES + 300))
def test_candidates_are_exactly_the_lines_with_a_literal(tmp_path_factory, lines, final_newline, block):
    source = write(tmp_path_factory.mktemp("c"), lines, final_newline)
    expected = [(n, text) for n, text in iter_raw_lines(source, []) if any(lit in text for lit in LITERALS)]
    for road in ROADS:
        reader = road(source, LITERALS, [], block_bytes=block)
        assert list(reader) == expected
        assert reader.lines_read == len(list(iter_raw_lines(source, [])))


class Thinning:
    """keep(m) as IterationSampler's: every `stride`-th line holding the literal, the stride doubling each
    `every` lines kept."""

    def __init__(self, every: int):
        self.seen, self.stride, self.kept, self.every = 0, 1, 0, every

    def keep(self, m: int) -> int | None:
        first = -self.seen % self.stride
        if first >= m:
            self.seen += m
            return None
        self.seen, self.kept = self.seen + first + 1, self.kept + 1
        if self.kept % self.every == 0:
            self.stride *= 2
        return first


sampled_text = st.lists(
    st.sampled_from(["ab", " ", "Error", "é", "elapsed time per iteration", "elapsed", "\r"]), max_size=6
).map("".join)


def read_sampled(source, fast, every, toggle, block):
    thinning = Thinning(every)
    literal = b"elapsed time per iteration"
    wants = Wants(prefilter_literals([*LITERALS, literal.decode()]), _skip_of(literal, thinning.keep))
    wants.sample = (literal, thinning.keep)
    reader = CandidateReader(source, wants, [], block_bytes=block, fast=fast)
    seen = []
    for number, text in reader:
        seen.append((number, text))
        wants.every_line = toggle and number % toggle == 0
    return seen, reader.lines_read, thinning.seen


@needs_hyperscan
@settings(max_examples=150, deadline=None)
@given(
    st.lists(sampled_text, max_size=80),
    st.booleans(),
    st.integers(1, 6),
    st.integers(0, 9),
    st.integers(MAX_LINE_BYTES + 1, MAX_LINE_BYTES + 300),
)
def test_sampled_lines_counted_in_bulk_are_the_lines_asked_one_by_one(
    tmp_path_factory, lines, final, every, toggle, block
):
    """The hyperscan road counts a sampled literal's lines in C and finds only the kept ones; the plain road
    asks about each line alone. Same lines handed out, same count seen by the sampler (a line holding the
    literal twice counts twice on both), whatever `every_line` does meanwhile."""
    source = write(tmp_path_factory.mktemp("s"), lines, final)
    assert read_sampled(source, True, every, toggle, block) == read_sampled(source, False, every, toggle, block)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.lists(
            st.sampled_from(["Error", "ab", " ", "\t", "\r", "\x1b[1m", "\x07", "\x7f", "é", "\u0085"]), max_size=8
        ).map("".join),
        max_size=30,
    ),
    st.booleans(),
)
def test_a_file_said_to_hold_no_control_bytes_gives_lines_normalising_leaves_alone(tmp_path_factory, lines, final):
    """The whole-file road checks a file for normalize.CONTROL_BYTES once, and the line pass then skips
    strip_terminal_codes: while the reader says so, that must change no line it hands out."""
    source = write(tmp_path_factory.mktemp("c"), lines, final)
    clean = not any(ch in "\r\x1b\x07\x7f" for line in lines for ch in line)
    for road in ROADS:
        reader = road(source, LITERALS, [])
        for _number, text in reader:
            if reader.no_controls:
                assert strip_terminal_codes(text) == text
        if road in STREAM_ROADS:
            assert not reader.no_controls  # checked only for a file read whole
        elif Path(source.path).stat().st_size:
            assert reader.no_controls == clean  # and found when there is nothing to strip


def test_every_line_mode_gives_every_line_across_blocks(tmp_path):
    lines = [f"line {i} " + ("x" * (i * 997 % 5000)) + (" Error" if i % 50 == 0 else "") for i in range(400)]
    source = write(tmp_path, lines, final_newline=False)
    reader = reader_of()(source, block_bytes=MAX_LINE_BYTES + 1)
    seen = []
    for number, _text in reader:
        seen.append(number)
        reader.wants.every_line = number % 100 == 0  # after every 100th line, read the next ones one by one
    every = {n + 1 for n in range(0, 400, 100) if n}
    expected = sorted({n for n in range(1, 401) if (n - 1) % 50 == 0} | every)
    assert all(n in seen for n in expected)
    assert seen == sorted(seen) and reader.lines_read == 400


def test_long_line_is_cut_with_a_warning_and_numbering_goes_on(tmp_path):
    path = tmp_path / "long.log"
    path.write_bytes(b"Error first\n" + b"Error" + b"x" * (3 * MAX_LINE_BYTES) + b"\nError last\n")
    warnings: list[str] = []
    got = list(reader_of()(LogSource(str(path)), LITERALS, warnings, block_bytes=MAX_LINE_BYTES + 10))
    assert [n for n, _ in got] == [1, 2, 3]
    assert len(got[1][1]) == MAX_LINE_BYTES and got[2][1] == "Error last"
    assert any("line longer than" in w for w in warnings)


def test_truncated_gzip_keeps_what_came_before(tmp_path):
    lines = [f"step {i} Error" for i in range(20000)]
    path = tmp_path / "job.log.gz"
    data = gzip.compress("\n".join(lines).encode())
    path.write_bytes(data[: len(data) // 2])
    warnings: list[str] = []
    got = list(reader_of()(LogSource(str(path)), LITERALS, warnings))
    assert got and got[0] == (1, "step 0 Error") and len(got) < 20000
    assert [n for n, _ in got] == list(range(1, len(got) + 1))
    assert any("gzip" in w for w in warnings)


def test_skipped_candidates_are_not_handed_out_by_either_road(tmp_path):
    lines = [f"step {i} Error" if i % 2 else f"step {i} CUDA out of memory" for i in range(50)]
    source = write(tmp_path, lines, final_newline=True)
    results = []
    for road in ROADS:
        wants = Wants(prefilter_literals(LITERALS), skip=lambda number, raw: b"Error" in raw)
        results.append(list(road(source, wants)))
    assert all(result == [(n, lines[n - 1]) for n in range(1, 51) if n % 2] for result in results)


def test_a_small_log_still_being_written_is_read_to_its_end(tmp_path, monkeypatch):
    """The whole-file read asks for the size `fstat` gave plus one byte, then reads on to the end: a log that
    grew after the `fstat` (a job still writing) is not cut there."""
    import os as real_os

    lines = [f"line {i} Error" for i in range(1000)]
    source = write(tmp_path, lines, final_newline=True)
    stale = real_os.stat_result((real_os.stat(source.path).st_mode, *[0] * 5, 100, 0, 0, 0))  # 100 bytes then
    monkeypatch.setattr(candidates.os, "fstat", lambda fd: stale)
    reader = reader_of()(source)
    assert [n for n, _ in reader] == list(range(1, 1001))
    assert reader.lines_read == 1000 and not reader.warnings


def test_a_small_log_handed_out_in_short_reads_is_read_whole(tmp_path, monkeypatch):
    """A filesystem may return fewer bytes than asked before the end: the whole-file read goes on until it has
    the bytes `fstat` gave (and stops there: no read that only confirms the end)."""
    import os as real_os

    lines = [f"line {i} Error" for i in range(50)]
    source = write(tmp_path, lines, final_newline=True)
    calls = []
    read = real_os.read

    def short_read(fd, count):
        calls.append(count)
        return read(fd, min(count, 7))

    monkeypatch.setattr(candidates.os, "read", short_read)
    reader = reader_of()(source)
    assert [n for n, _ in reader] == list(range(1, 51))
    size = real_os.path.getsize(source.path)
    assert len(calls) == -(-size // 7)  # every byte, and not one read more


@pytest.mark.parametrize("fast", [True, False])
def test_readers_one_after_another_each_find_their_own_literals(tmp_path, fast):
    """Readers made one after another (20,000 rank logs) each search for their own literals: other literals,
    another sampled literal, a list changed in between."""
    log = tmp_path / "rank0.log"
    log.write_text("Error one\nWarn two\niteration 1/ 9 |\nError and Warn\niteration 2/ 9 |\n")
    source = LogSource(str(log))

    def read(literals, sample=None) -> list[int]:
        wants = Wants(literals, _skip_of(*sample) if sample else None, sample)  # as the line pass asks
        reader = CandidateReader(source, wants, [], fast=fast)
        assert reader._bulk == (sample[0] if sample and fast else None)  # the sampled lines counted in bulk
        return [number for number, _ in reader]

    errors, warns = prefilter_literals(["Error"]), prefilter_literals(["Warn"])
    assert read(errors) == [1, 4]
    assert read(warns) == [2, 4]
    assert read(errors) == [1, 4]
    both = prefilter_literals(["Error", "iteration"])
    assert read(both) == [1, 3, 4, 5]
    assert read(both, (b"iteration", lambda m: None)) == [1, 4]  # every iteration line counted, none kept
    assert read(both, (b"iteration", lambda m: 0)) == [1, 3, 4, 5]
    assert read(both) == [1, 3, 4, 5]
    changing = [b"Error"]
    assert read(changing) == [1, 4]
    changing[0] = b"Warn"
    assert read(changing) == [2, 4]
