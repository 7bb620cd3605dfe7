"""Issue 15, the edges: inputs that used to mislead (a wrong answer, not a crash), text from catalogues,
caches and file names, slow paths. Each test failed on the code before its fix."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from typer.testing import CliRunner

from offloaddoctor.cli import app

from .conftest import FIXTURES

RUNNER = CliRunner()
OOM_JOB = FIXTURES / "oom-fragmentation-multirank" / "job.log"
ZSTD_FRAME = b"\x28\xb5\x2f\xfd\x04\x58\x45\x00\x00\x10" + bytes(range(256)) * 8


# ---- a rank file we cannot read does not hide the others' failure ----------------------------------------


@pytest.mark.parametrize(
    ("content", "named"),
    [
        (ZSTD_FRAME, "zstd-compressed; decompress first"),
        (b"BZh91AY&SY" + bytes(range(256)) * 8, "bzip2-compressed; decompress first"),
        (b"\xfd7zXZ\x00\x00\x04" + bytes(range(256)) * 8, "xz-compressed; decompress first"),
        (os.urandom(4096) + b"\x00" * 4096, "looks like a binary file"),
    ],
)
def test_an_unreadable_rank_file_is_skipped_with_a_note_and_the_rest_diagnosed(tmp_path, content, named):
    shutil.copy(OOM_JOB, tmp_path / "rank0.log")
    (tmp_path / "rank1.log").write_bytes(content)
    result = RUNNER.invoke(app, ["diagnose", str(tmp_path), "-f", "json"])
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    assert "oom-fragmentation" in [f["id"] for f in report["findings"]]
    assert any(note.startswith(f"{tmp_path / 'rank1.log'}: {named}") and note.endswith("; skipped")
               for note in report["notes"]), report["notes"]


def test_metrics_skip_an_unreadable_rank_file_too(tmp_path):
    shutil.copy(OOM_JOB, tmp_path / "rank0.log")
    (tmp_path / "rank1.log").write_bytes(ZSTD_FRAME)
    result = RUNNER.invoke(app, ["metrics", str(tmp_path), "--format", "json"])
    assert result.exit_code == 0, result.output
    assert "zstd-compressed" in result.stdout


def test_a_directory_of_nothing_but_compressed_files_is_still_an_error(tmp_path):
    (tmp_path / "rank0.log").write_bytes(ZSTD_FRAME)
    (tmp_path / "rank1.log").write_bytes(ZSTD_FRAME)
    for command in ("diagnose", "metrics"):
        result = RUNNER.invoke(app, [command, str(tmp_path)])
        assert result.exit_code == 2, result.output
        assert result.stderr.strip() == f"offloaddoctor: error: {tmp_path / 'rank0.log'}: zstd-compressed; decompress first (zstd -d)"


def test_a_named_compressed_file_is_an_error_that_names_the_format(tmp_path):
    (tmp_path / "job.log.zst").write_bytes(ZSTD_FRAME)
    result = RUNNER.invoke(app, ["diagnose", str(tmp_path / "job.log.zst")])
    assert result.exit_code == 2 and "zstd-compressed; decompress first" in result.stderr


# ---- a log that shrinks while it is read ----------------------------------------------------------------


def test_a_log_truncated_while_it_is_read_gives_a_note(tmp_path):
    from offloaddoctor.logs.candidates import CandidateReader
    from offloaddoctor.logs.sources import LogSource

    path = tmp_path / "train.log"
    path.write_bytes(b"iteration 1 fine\n" * 40_000)  # ~680 kB: several blocks

    def rotate(_count: int) -> None:
        with open(path, "r+b") as handle:  # copytruncate: the same file, cut in place
            handle.truncate(1000)

    warnings: list[str] = []
    list(CandidateReader(LogSource(str(path)), ["iteration"], warnings, block_bytes=1 << 17, on_bytes=rotate, use_grep=False))
    assert any("shrank from 680,000 to 1,000 bytes while it was read" in w for w in warnings), warnings


def test_a_log_that_keeps_its_size_gives_no_such_note(tmp_path):
    from offloaddoctor.logs.candidates import CandidateReader
    from offloaddoctor.logs.sources import LogSource

    path = tmp_path / "train.log"
    path.write_bytes(b"iteration 1 fine\n" * 40_000)
    warnings: list[str] = []
    list(CandidateReader(LogSource(str(path)), ["iteration"], warnings, block_bytes=1 << 17, use_grep=False))
    assert warnings == []
