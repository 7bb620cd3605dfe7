"""The block reader must hand out exactly the lines a line-by-line read would, with the same numbers."""

from __future__ import annotations

import gzip
import sys
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from offloaddoctor.errors import UserError
from offloaddoctor.logs import candidates, grep_prefilter
from offloaddoctor.logs.candidates import CandidateReader
from offloaddoctor.logs.literal_trie import literal_trie
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


class StreamRoad(CandidateReader):
    """The block reader's stream road, which a small regular file otherwise skips (one read of the whole)."""

    def _read_small(self):
        return None


class TrieRoad(CandidateReader):
    """A small file read whole, with the literals' trie pattern (LinePass gives it past many files)."""

    def __init__(self, source, literals, *args, **kwargs):
        super().__init__(source, literals, *args, **kwargs)
        self.finder = literal_trie(tuple(self.literals))


class TrieStreamRoad(TrieRoad):
    """The block reader's stream road with the finder (a large block read in Python: standard input, a .gz)."""

    def _read_small(self):
        return None


ROADS = (CandidateReader, StreamRoad, TrieRoad, TrieStreamRoad)


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


@settings(max_examples=150, deadline=None)
@given(
    st.lists(line_text, max_size=60),
    st.booleans(),
    st.integers(MAX_LINE_BYTES + 1, MAX_LINE_BYTES + 300),
    st.sampled_from([b"Error", b"CUDA out of memory", b"\xc3\xa9", b"absent"]),
)
def test_a_sampled_literal_searched_first_finds_the_same_lines(tmp_path_factory, lines, final_newline, block, sampled):
    """The reader looks for the sampled literal (iteration lines) first and for the others only in the lines
    left: the candidates are still exactly the lines holding any literal."""
    source = write(tmp_path_factory.mktemp("c"), lines, final_newline)
    expected = [(n, text) for n, text in iter_raw_lines(source, []) if any(lit in text for lit in LITERALS)]
    for road in ROADS:
        reader = road(source, LITERALS, [], block_bytes=block)
        reader.sampled = (sampled, lambda m: None)  # as LinePass sets it; `keep` is the grep road's, unused here
        assert list(reader) == expected


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
        if road in (StreamRoad, TrieStreamRoad):
            assert not reader.no_controls  # checked only for a file read whole
        elif Path(source.path).stat().st_size:
            assert reader.no_controls == clean  # and found when there is nothing to strip


def test_every_line_mode_gives_every_line_across_blocks(tmp_path):
    lines = [f"line {i} " + ("x" * (i * 997 % 5000)) + (" Error" if i % 50 == 0 else "") for i in range(400)]
    source = write(tmp_path, lines, final_newline=False)
    reader = CandidateReader(source, LITERALS, [], block_bytes=MAX_LINE_BYTES + 1)
    seen = []
    for number, _text in reader:
        seen.append(number)
        reader.every_line = number % 100 == 0  # after every 100th line, read the next ones one by one
    every = {n + 1 for n in range(0, 400, 100) if n}
    expected = sorted({n for n in range(1, 401) if (n - 1) % 50 == 0} | every)
    assert all(n in seen for n in expected)
    assert seen == sorted(seen) and reader.lines_read == 400


def test_long_line_is_cut_with_a_warning_and_numbering_goes_on(tmp_path):
    path = tmp_path / "long.log"
    path.write_bytes(b"Error first\n" + b"Error" + b"x" * (3 * MAX_LINE_BYTES) + b"\nError last\n")
    warnings: list[str] = []
    got = list(CandidateReader(LogSource(str(path)), LITERALS, warnings, block_bytes=MAX_LINE_BYTES + 10))
    assert [n for n, _ in got] == [1, 2, 3]
    assert len(got[1][1]) == MAX_LINE_BYTES and got[2][1] == "Error last"
    assert any("line longer than" in w for w in warnings)


def test_truncated_gzip_keeps_what_came_before(tmp_path):
    lines = [f"step {i} Error" for i in range(20000)]
    path = tmp_path / "job.log.gz"
    data = gzip.compress("\n".join(lines).encode())
    path.write_bytes(data[: len(data) // 2])
    warnings: list[str] = []
    got = list(CandidateReader(LogSource(str(path)), LITERALS, warnings))
    assert got and got[0] == (1, "step 0 Error") and len(got) < 20000
    assert [n for n, _ in got] == list(range(1, len(got) + 1))
    assert any("gzip" in w for w in warnings)


# The GNU grep prefilter (large plain files) must agree with the block reader line for line.
needs_grep = __import__("pytest").mark.skipif(grep_prefilter.gnu_grep() is None, reason="needs GNU grep")


# What the tests below patch, as shipped: a patch lasts one example (one test body), never the module.
SHIPPED = {
    (candidates, "GREP_MIN_BYTES"): candidates.GREP_MIN_BYTES,
    (grep_prefilter, "GREP_MEMORY_BYTES"): grep_prefilter.GREP_MEMORY_BYTES,
    (grep_prefilter, "SPLIT_MIN_BYTES"): grep_prefilter.SPLIT_MIN_BYTES,
    (grep_prefilter, "_cores"): grep_prefilter._cores,
}


@contextmanager
def grep_for_small_files() -> Iterator[pytest.MonkeyPatch]:
    """Small test files take the grep road for as long as the `with` lasts: inside a hypothesis test, one
    example (a function-scoped fixture would be shared by all of a test's examples)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(candidates, "GREP_MIN_BYTES", 0)
        yield patch


def read_with_toggles(source, use_grep, toggle_every=7):
    reader = CandidateReader(source, LITERALS, [], use_grep=use_grep)
    seen = []
    for number, text in reader:
        seen.append((number, text))
        reader.every_line = number % toggle_every == 0
    return seen, reader.lines_read, reader.warnings


@needs_grep
@settings(max_examples=60, deadline=None)
@given(st.lists(line_text, max_size=60), st.booleans(), st.integers(2, 9))
def test_grep_prefilter_agrees_with_the_block_reader(tmp_path_factory, lines, final_newline, toggle):
    source = write(tmp_path_factory.mktemp("g"), lines, final_newline)
    with grep_for_small_files():
        assert read_with_toggles(source, True, toggle) == read_with_toggles(source, False, toggle)


@needs_grep
def test_grep_that_runs_out_of_memory_hands_over_to_the_block_reader(tmp_path, monkeypatch):
    monkeypatch.setattr(candidates, "GREP_MIN_BYTES", 0)
    monkeypatch.setattr(grep_prefilter, "GREP_MEMORY_BYTES", 64 * 2**20)
    path = tmp_path / "giant.log"
    with path.open("wb") as handle:
        handle.write(
            b"Error one\nfine\n" + b"Error " + b"y" * (200 * 2**20) + b"\nError three\nlast CUDA out of memory\n"
        )
    via_grep = read_with_toggles(LogSource(str(path)), True)
    assert via_grep == read_with_toggles(LogSource(str(path)), False)
    assert [n for n, _ in via_grep[0]] == [1, 3, 4, 5]


@needs_grep
@settings(max_examples=40, deadline=None)
@given(st.lists(line_text, max_size=80), st.booleans(), st.integers(2, 9))
def test_a_file_split_between_two_greps_reads_like_one_pass(tmp_path_factory, lines, final_newline, toggle):
    source = write(tmp_path_factory.mktemp("s"), lines, final_newline)
    with grep_for_small_files() as patch:
        patch.setattr(grep_prefilter, "SPLIT_MIN_BYTES", 0)
        patch.setattr(grep_prefilter, "_cores", lambda: 2)
        assert read_with_toggles(source, True, toggle) == read_with_toggles(source, False, toggle)
    assert all(getattr(module, name) is shipped for (module, name), shipped in SHIPPED.items())


def test_no_patch_outlives_its_test():
    """Runs after the grep tests above (pytest keeps a file's order): what they patched is back as shipped."""
    assert {f"{module.__name__}.{name}": getattr(module, name) for module, name in SHIPPED} == {
        f"{module.__name__}.{name}": shipped for (module, name), shipped in SHIPPED.items()
    }


def _fake_grep(directory, real_grep: str, fail_when: str) -> str:
    script = directory / "grep"
    script.write_text(f'#!/bin/sh\n{real_grep} "$@"\nstatus=$?\n{fail_when} && exit 2\nexit $status\n')
    script.chmod(0o755)
    return str(script)


@needs_grep
def test_a_grep_failing_on_either_half_hands_over_to_the_block_reader(tmp_path, monkeypatch):
    monkeypatch.setattr(candidates, "GREP_MIN_BYTES", 0)
    monkeypatch.setattr(grep_prefilter, "SPLIT_MIN_BYTES", 0)
    monkeypatch.setattr(grep_prefilter, "_cores", lambda: 2)
    lines = [f"line {i}" + (" Error" if i % 3 == 0 else "") for i in range(200)]
    source = write(tmp_path, lines, final_newline=True)
    expected = read_with_toggles(source, False)
    real_grep = grep_prefilter.gnu_grep()
    # `[ -f /dev/stdin ]`: the second half is read from the file itself, the first through a pipe
    for case, fail_when in enumerate(("[ -f /dev/stdin ]", "[ ! -f /dev/stdin ]", "true")):
        directory = tmp_path / f"case{case}"  # a new script each time: sh reads a script as it runs it
        directory.mkdir()
        fake = _fake_grep(directory, real_grep, fail_when)
        monkeypatch.setattr(grep_prefilter, "gnu_grep", lambda fake=fake: fake)
        assert read_with_toggles(source, True) == expected, fail_when


def test_skipped_candidates_are_not_handed_out_by_either_reader(tmp_path, monkeypatch):
    monkeypatch.setattr(candidates, "GREP_MIN_BYTES", 0)
    lines = [f"step {i} Error" if i % 2 else f"step {i} CUDA out of memory" for i in range(50)]
    source = write(tmp_path, lines, final_newline=True)
    results = []
    for use_grep in (False, True):
        reader = CandidateReader(source, LITERALS, [], use_grep=use_grep)
        reader.skip = lambda number, raw: b"Error" in raw
        results.append(list(reader))
    assert results[0] == results[1] == [(n, lines[n - 1]) for n in range(1, 51) if n % 2]


@needs_grep
def test_a_large_file_hands_out_only_lines_holding_a_literal(tmp_path, monkeypatch):
    """A large file is searched for the literals themselves: the cover of shared words (`optimizer` for the
    first two here) that stood in for them from 8 MiB on was dropped, as it did not pay (docs/performance.md,
    sixth round), and with it the lines it found beyond the literals' ("the optimizer is adam")."""
    monkeypatch.setattr(candidates, "GREP_MIN_BYTES", 0)
    literals = [
        "optimizer cpu offload must be used",
        "offload_optimizer_states",
        "use-precision-aware-optimizer only",
        "CUDA out of memory",
    ]
    hits = ["the optimizer is adam"] + [
        "offload_optimizer_states=True",
        "optimizer cpu offload must be used x",
        "a CUDA out of memory",
    ] * 5
    filler = ["iteration chatter, nothing a reader wants"] * 110_000  # 4.6 MiB a side: past the cover's 8 MiB
    lines = filler + hits + filler
    source = write(tmp_path, lines, final_newline=True)
    expected = [(n, t) for n, t in enumerate(lines, 1) if any(lit in t for lit in literals)]
    for use_grep in (False, True):
        reader = CandidateReader(source, literals, [], use_grep=use_grep)
        assert list(reader) == expected
        assert all(reader.exact_candidate(n) for n, _ in expected)


def test_a_small_log_still_being_written_is_read_to_its_end(tmp_path, monkeypatch):
    """The whole-file read asks for the size `fstat` gave plus one byte, then reads on to the end: a log that
    grew after the `fstat` (a job still writing) is not cut there."""
    import os as real_os

    lines = [f"line {i} Error" for i in range(1000)]
    source = write(tmp_path, lines, final_newline=True)
    stale = real_os.stat_result((real_os.stat(source.path).st_mode, *[0] * 5, 100, 0, 0, 0))  # 100 bytes then
    monkeypatch.setattr(candidates.os, "fstat", lambda fd: stale)
    reader = CandidateReader(source, LITERALS, [])
    assert [n for n, _ in reader] == list(range(1, 1001))
    assert reader.lines_read == 1000 and not reader.warnings


def test_a_small_log_handed_out_in_short_reads_is_read_whole(tmp_path, monkeypatch):
    """A filesystem may return fewer bytes than asked before the end: the whole-file read goes on until it has
    the bytes `fstat` gave (and stops there: no read that only confirms the end)."""
    import os as real_os

    monkeypatch.setattr(candidates, "GREP_MIN_BYTES", 8 << 20)  # read in Python, whatever the shipped threshold
    lines = [f"line {i} Error" for i in range(50)]
    source = write(tmp_path, lines, final_newline=True)
    calls = []
    read = real_os.read

    def short_read(fd, count):
        calls.append(count)
        return read(fd, min(count, 7))

    monkeypatch.setattr(candidates.os, "read", short_read)
    reader = CandidateReader(source, LITERALS, [])
    assert [n for n, _ in reader] == list(range(1, 51))
    size = real_os.path.getsize(source.path)
    assert len(calls) == -(-size // 7)  # every byte, and not one read more


def test_a_large_block_read_in_python_takes_the_finder_and_finds_the_same_lines(tmp_path, monkeypatch):
    monkeypatch.setattr(candidates, "GREP_MIN_BYTES", 8 << 20)  # read in Python, whatever the shipped threshold
    lines = [f"step {i} " + ("Error" if i % 7 == 0 else "ok") + (" é" if i % 5 == 0 else "") for i in range(300)]
    source = write(tmp_path, lines, final_newline=False)
    without = StreamRoad(source, LITERALS, [])
    expected = list(without)
    assert without.finder is None  # a small block: the test per literal
    monkeypatch.setattr(candidates, "FINDER_MIN_BLOCK", 0)
    with_finder = StreamRoad(source, LITERALS, [])
    assert list(with_finder) == expected and with_finder.finder is not None


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300).map(lambda b: b.replace(b"\r", b"\n")), st.integers(1, 40))
def test_a_newline_in_every_window_rules_out_a_long_run(data, length):
    longest = max(map(len, data.split(b"\n")))
    if not grep_prefilter.may_hold_a_run(data, length):
        assert longest < length


class _Chunks:
    def __init__(self, data: bytes, sizes: list[int]):
        self.data, self.sizes = data, sizes

    def read(self, _size: int) -> bytes:
        size = self.sizes.pop(0) if self.sizes else len(self.data)
        chunk, self.data = self.data[:size], self.data[size:]
        return chunk


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from([b"", b"a", b"ab:1", b"x" * 7, b"y" * 20]), max_size=30),
    st.booleans(),
    st.lists(st.integers(1, 25), max_size=40),
    st.integers(4, 12),
)
@example(records=[b"x" * 7], final_newline=True, sizes=[5], cap=6)  # a block's first record, begun in the last
def test_grep_output_blocks_give_every_record_cut_at_the_cap(records, final_newline, sizes, cap):
    data = b"\n".join(records) + (b"\n" if final_newline and records else b"")
    got = [record for block in grep_prefilter._record_blocks(_Chunks(data, list(sizes)), cap) for record in block]
    expected = data.split(b"\n")
    if expected[-1] == b"":
        expected.pop()
    assert got == [record[:cap] for record in expected]
