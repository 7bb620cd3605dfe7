"""Issue 27 point 9: a log rotated by name while it is read. The grep road opened the file by its name again
(grep's argument, the line count, the second half), so a log moved away crashed with FileNotFoundError
(exit 3) and a log moved away and recreated was read in part from the new file, with wrong line numbers.
Every road now reads the one file it opened."""

from __future__ import annotations

import gzip
import os
import shutil

import pytest

from offloaddoctor.logs import candidates, grep_prefilter
from offloaddoctor.logs.candidates import CandidateReader
from offloaddoctor.logs.sources import LogSource, reopen

LITERALS = ["Error"]
ROADS = ["block", "grep", "grep-split", "gz-python", "gz-spool"]


def needs(road: str) -> None:
    if road.startswith("grep") and grep_prefilter.gnu_grep() is None:
        pytest.skip("needs GNU grep")
    if road == "gz-spool" and (grep_prefilter.gnu_grep() is None or shutil.which("gzip") is None):
        pytest.skip("needs GNU grep and gzip")


def take_road(road: str, monkeypatch) -> dict:
    """Thresholds lowered so that a small file takes the road; the reader's own arguments for it."""
    monkeypatch.setattr(candidates, "GREP_MIN_BYTES", 0 if road.startswith("grep") or road == "gz-spool" else 1 << 40)
    monkeypatch.setattr(candidates, "GZ_SPOOL_MIN_BYTES", 0 if road == "gz-spool" else 1 << 40)
    if road == "grep-split":
        monkeypatch.setattr(grep_prefilter, "SPLIT_MIN_BYTES", 0)
        monkeypatch.setattr(grep_prefilter, "_cores", lambda: 2)
    monkeypatch.setattr(grep_prefilter, "_RECORDS_BYTES", 512)  # many blocks of grep's output
    return {"block_bytes": 1 << 17, "use_grep": road != "block"}


def original_lines() -> list[str]:
    # The last line is no candidate: counted after.
    return [f"step {i} " + ("Error here" if i % 50 == 0 else "fine " * 8) for i in range(1, 6024)]


@pytest.mark.parametrize("recreated", [False, True], ids=["moved-away", "moved-and-recreated"])
@pytest.mark.parametrize("road", ROADS)
def test_a_log_rotated_while_it_is_read_is_read_whole_from_the_file_opened(tmp_path, monkeypatch, road, recreated):
    needs(road)
    arguments = take_road(road, monkeypatch)
    lines = original_lines()
    data = ("\n".join(lines) + "\n").encode()
    path = tmp_path / ("job.log.gz" if road.startswith("gz") else "job.log")
    path.write_bytes(gzip.compress(data) if road.startswith("gz") else data)
    expected = [(n, text) for n, text in enumerate(lines, start=1) if "Error" in text]
    assert len(data) > 2 * arguments["block_bytes"]  # the block road reads it in several blocks

    reader = CandidateReader(LogSource(str(path)), LITERALS, warnings := [], **arguments)
    got = []
    for number, text in reader:
        if not got:  # the logger rotates: the file moves away (and a new one starts under the old name)
            os.rename(path, tmp_path / "job.log.1")
            if recreated:
                path.write_bytes(b"Error in a new file\n" * 3)
        got.append((number, text))
    assert got == expected
    assert reader.lines_read == len(lines)
    assert not warnings


def test_reopen_reaches_the_file_opened_after_its_name_is_gone(tmp_path):
    path = tmp_path / "job.log"
    path.write_bytes(b"first\n")
    fd = os.open(path, os.O_RDONLY)
    try:
        path.unlink()
        path.write_bytes(b"second\n")
        again = reopen(fd)
        if again is None:
            pytest.skip("no /proc/self/fd here")
        with again:
            assert again.read() == b"first\n"
    finally:
        os.close(fd)
