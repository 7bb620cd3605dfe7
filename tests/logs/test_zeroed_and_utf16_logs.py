"""Issue 27 point 15: a log whose start was zeroed (NUL bytes, as a crash leaves it on some filesystems) was
refused as binary and its findings lost; a UTF-16 log (with its byte-order mark) was refused too. The NUL run
is skipped with a note, UTF-16 is decoded; both on every road a file can take."""

from __future__ import annotations

import gzip
import json

import pytest

from offloaddoctor.cli import app
from offloaddoctor.logs import candidates
from offloaddoctor.logs.candidates import CandidateReader, Wants
from offloaddoctor.logs.sources import LogSource

from tests.conftest import FIXTURES, RUNNER

OOM_LOG = FIXTURES / "oom-partial-optimizer-offload-bridge" / "job.log"


def diagnosed(path) -> dict:
    result = RUNNER.invoke(app, ["diagnose", str(path), "--format", "json"])
    assert result.exit_code == 1, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize("zeroed", [4096, 3 << 20], ids=["4KB", "3MB"])
@pytest.mark.parametrize("road", ["whole", "stream", "gz"])
def test_a_log_with_a_zeroed_start_is_diagnosed_with_a_note(tmp_path, monkeypatch, zeroed, road):
    data = b"\x00" * zeroed + OOM_LOG.read_bytes()
    path = tmp_path / ("job.log.gz" if road == "gz" else "job.log")
    path.write_bytes(gzip.compress(data) if road == "gz" else data)
    if road == "stream":
        monkeypatch.setattr(candidates, "WHOLE_BYTES", 0)  # not read whole
    report = diagnosed(path)
    assert [f["id"] for f in report["findings"]] == ["oom-partial-optimizer-offload"]
    assert any(f"starts with {zeroed:,} NUL bytes" in note for note in report["notes"])
    evidence = report["findings"][0]["evidence"][0]
    assert evidence["line"] == OOM_LOG.read_text().count("\n")  # the same line numbers as the log itself


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be-with-bom"])
@pytest.mark.parametrize("road", ["whole", "stream"])
def test_a_utf16_log_is_decoded(tmp_path, monkeypatch, encoding, road):
    text = OOM_LOG.read_text()
    data = text.encode("utf-16") if encoding == "utf-16" else b"\xfe\xff" + text.encode("utf-16-be")
    path = tmp_path / "job.log"
    path.write_bytes(data)
    if road == "stream":
        monkeypatch.setattr(candidates, "WHOLE_BYTES", 0)  # not read whole
    report = diagnosed(path)
    assert [f["id"] for f in report["findings"]] == ["oom-partial-optimizer-offload"]
    assert report["findings"][0]["evidence"][0]["line"] == text.count("\n")
    assert not report["notes"] or not any("binary" in note or "shrank" in note for note in report["notes"])


def test_a_log_of_nothing_but_nul_bytes_reads_as_empty_with_the_note(tmp_path):
    path = tmp_path / "job.log"
    path.write_bytes(b"\x00" * 10_000)
    warnings: list[str] = []
    assert list(CandidateReader(LogSource(str(path)), Wants([b"Error"]), warnings)) == []
    assert any("starts with 10,000 NUL bytes" in w for w in warnings)


def test_random_bytes_after_a_nul_run_are_still_binary(tmp_path):
    import os

    path = tmp_path / "core.log"
    path.write_bytes(b"\x00" * 4096 + os.urandom(8192))
    result = RUNNER.invoke(app, ["diagnose", str(path)])
    assert result.exit_code == 2 and "binary" in result.stderr
