"""Progress of a `.gz` scan, measured in the bytes it decompresses to (issue 26, point 7): a .gz of 40 MB that
expands to 629 MB scanned for seconds with a bar sized by its compressed bytes, or none at all."""

from __future__ import annotations

import gzip
import random


from offloaddoctor.api import diagnose
from offloaddoctor.logs.sources import expanded_size

from tests.conftest import FIXTURES

OOM_LOG = (FIXTURES / "oom-fragmentation-multirank" / "job.log").read_bytes()


def _noisy_log(lines: int) -> bytes:
    """Lines that compress about 2x (random hex), so a few MB of log make a .gz of over a MiB (gzip's road)."""
    rng = random.Random(26)
    body = b"".join(b"[rank0]: step %d data %032x\n" % (i, rng.getrandbits(128)) for i in range(lines))
    return body + OOM_LOG


def _progress_of(path) -> list[tuple[int, int]]:
    calls: list[tuple[int, int]] = []
    report = diagnose([str(path)], progress=lambda done, total: calls.append((done, total)))
    assert any(f.id == "oom-fragmentation" for f in report.findings)
    return calls


def test_expanded_size_reads_the_gzip_trailer(tmp_path):
    data = _noisy_log(2000)
    packed = tmp_path / "job.log.gz"
    packed.write_bytes(gzip.compress(data))
    assert expanded_size(str(packed), packed.stat().st_size) == len(data)
    plain = tmp_path / "job.log"
    plain.write_bytes(data)
    assert expanded_size(str(plain), 123) == 123
    # a trailer that wrapped at 4 GiB (ISIZE is the size modulo 2**32): never below the file's own size
    wrapped = tmp_path / "wrapped.gz"
    wrapped.write_bytes(b"\x1f\x8b" + b"\0" * 100 + (7).to_bytes(4, "little"))
    assert expanded_size(str(wrapped), 106) == (1 << 32) + 7


def test_a_small_gz_read_in_python_counts_its_decompressed_bytes(tmp_path):
    data = _noisy_log(2000)
    packed = tmp_path / "job.log.gz"
    packed.write_bytes(gzip.compress(data))
    calls = _progress_of(packed)
    assert {total for _, total in calls} == {len(data)}
    assert calls[-1][0] == len(data)


def test_a_large_gz_inflated_by_isal_counts_its_decompressed_bytes(tmp_path, monkeypatch):
    from offloaddoctor.logs import sources

    data = _noisy_log(120_000)
    packed = tmp_path / "job.log.gz"
    packed.write_bytes(gzip.compress(data, compresslevel=1))
    monkeypatch.setattr(sources, "ISAL_MIN_BYTES", 0)
    calls = _progress_of(packed)
    assert {total for _, total in calls} == {len(data)}
    dones = [done for done, _ in calls]
    assert dones == sorted(dones) and dones[-1] == len(data)
