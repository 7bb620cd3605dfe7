"""Issue 27 point 9: a log rotated by name while it is read. The grep road opened the file by its name again
(grep's argument, the line count, the second half), so a log moved away crashed with FileNotFoundError
(exit 3) and a log moved away and recreated was read in part from the new file, with wrong line numbers.
Every road now reads the one file it opened."""

from __future__ import annotations

import gzip
import os

import pytest

from offloaddoctor.logs import candidates, sources
from offloaddoctor.logs.candidates import CandidateReader, Wants
from offloaddoctor.logs.sources import LogSource

ROADS = ["hyperscan", "plain", "gz-zlib", "gz-isal"]


def take_road(road: str, monkeypatch) -> dict:
    """A small file read as a stream, in several blocks; the reader's own arguments for it."""
    monkeypatch.setattr(candidates, "WHOLE_BYTES", 0)
    monkeypatch.setattr(sources, "ISAL_MIN_BYTES", 0 if road == "gz-isal" else 1 << 40)
    return {"block_bytes": 1 << 17, "fast": road != "plain"}


def original_lines() -> list[str]:
    # The last line is no candidate: counted after.
    return [f"step {i} " + ("Error here" if i % 50 == 0 else "fine " * 8) for i in range(1, 6024)]


@pytest.mark.parametrize("recreated", [False, True], ids=["moved-away", "moved-and-recreated"])
@pytest.mark.parametrize("road", ROADS)
def test_a_log_rotated_while_it_is_read_is_read_whole_from_the_file_opened(tmp_path, monkeypatch, road, recreated):
    arguments = take_road(road, monkeypatch)
    lines = original_lines()
    data = ("\n".join(lines) + "\n").encode()
    path = tmp_path / ("job.log.gz" if road.startswith("gz") else "job.log")
    path.write_bytes(gzip.compress(data) if road.startswith("gz") else data)
    expected = [(n, text) for n, text in enumerate(lines, start=1) if "Error" in text]
    assert len(data) > 2 * arguments["block_bytes"]  # the block road reads it in several blocks

    reader = CandidateReader(LogSource(str(path)), Wants([b"Error"]), warnings := [], **arguments)
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
