"""A large log takes the stream road (blocks, hyperscan finding the lines where installed, iteration lines
counted in bulk), a large .gz is inflated by isal where installed: every fixture must give the same report
on each as on the small-file road."""

from __future__ import annotations

import functools
import gzip

import pytest

from offloaddoctor.api import diagnose
from offloaddoctor.logs import candidates, sources
from offloaddoctor.render.json_report import report_to_dict

from tests.conftest import FIXTURES, builtin_catalog

LOGS = sorted(p for p in FIXTURES.rglob("*.log") if p.stat().st_size > 0)


def _report(path, catalog) -> dict:
    report = report_to_dict(diagnose([str(path)], catalog=catalog))
    report.pop("tool", None)
    return report


@functools.cache
def _small_file_report(path) -> dict:
    """The small-file road's report, once per log for both roads compared with it (read, never changed)."""
    return _report(path, builtin_catalog())


@pytest.mark.parametrize("fast", [False, True], ids=["plain", "hyperscan"])
@pytest.mark.parametrize("log", LOGS, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_the_large_file_road_gives_the_same_report(log, catalog, monkeypatch, fast):
    small = _small_file_report(log)
    monkeypatch.setattr(candidates, "WHOLE_BYTES", 0)  # read as a stream ...
    monkeypatch.setattr(candidates, "BLOCK_BYTES", 0)  # ... in blocks of MAX_LINE_BYTES + 1
    monkeypatch.setattr(candidates, "USE_HYPERSCAN", fast)
    assert _report(log, catalog) == small


def _mixed_log(tmp_path, iterations: int):
    """Thousands of iteration lines (the sampler thins them), a restart with new arguments (a segment), a
    traceback from another rank in the middle (every line read for a while), other candidates sprinkled."""
    from tests.metrics.test_metrics import mlm_line

    start = FIXTURES / "clean-baseline" / "job.log"
    head = start.read_text().splitlines()[:80]
    lines = list(head)
    for i in range(1, iterations + 1):
        lines.append(f"[rank7]: {mlm_line(i, 400.0 + i % 17)}")
        if i % 997 == 0:
            lines.append(f"[rank{i % 8}]: WARNING: NCCL_DEBUG is set; ERROR counters {i}")
        if i % 1499 == 0:  # an iteration line that holds another literal too: two grep records, one line
            lines[-1] += " | note: RuntimeError: retried |"
        if i == iterations // 3:
            lines += [
                "[rank2]: Traceback (most recent call last):",
                '[rank2]:   File "train.py", line 9, in <module>',
                *[f"[rank7]: {mlm_line(i, 999.0 + k)}" for k in range(60)],
                "[rank2]: ValueError: not a real failure",
            ]
        if i == iterations // 2:
            lines += head  # the job restarted in the same log: a second arguments block
    lines.append(
        "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total "
        "capacity of 79.11 GiB of which 1.06 GiB is free."
    )
    path = tmp_path / "mixed.log"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("block", [1 << 16, 1 << 23])
def test_iteration_lines_counted_in_bulk_give_the_sample_asked_line_by_line(tmp_path, catalog, monkeypatch, block):
    from offloaddoctor.scanning.scanner import Scanner, build_matchers
    from offloaddoctor.logs.sources import LogSource

    path = _mixed_log(tmp_path, 9000)
    monkeypatch.setattr(candidates, "WHOLE_BYTES", 0)
    monkeypatch.setattr(candidates, "BLOCK_BYTES", block)

    def scan():
        result = Scanner(build_matchers(catalog)).scan([LogSource(str(path))])
        return (
            {k: [(r.line, r.iteration, r.elapsed_ms) for r in v] for k, v in result.iterations.items()},
            result.lines_read,
            [(a.matcher_id, a.count, a.evidence) for a in result.aggregates],
            result.exceptions,
        )

    monkeypatch.setattr(candidates, "USE_HYPERSCAN", False)
    one_by_one = scan()
    monkeypatch.setattr(candidates, "USE_HYPERSCAN", True)
    assert scan() == one_by_one
    assert len(one_by_one[0]) == 2 and all(len(v) > 100 for v in one_by_one[0].values())


@pytest.mark.parametrize(
    "log", LOGS[:6] + [FIXTURES / "oom-fragmentation-multirank" / "job.log"], ids=lambda p: str(p.relative_to(FIXTURES))
)
def test_a_large_gz_inflated_by_isal_gives_the_same_report(log, catalog, monkeypatch, tmp_path):
    packed = tmp_path / (log.parent.name + ".log.gz")
    packed.write_bytes(gzip.compress(log.read_bytes()))
    by_zlib = _report(packed, catalog)
    monkeypatch.setattr(sources, "ISAL_MIN_BYTES", 0)
    assert _report(packed, catalog) == by_zlib


def test_a_damaged_large_gz_is_read_up_to_near_the_damage_with_a_warning(tmp_path, monkeypatch):
    """isal hands out what it inflated a chunk at a time: a truncated .gz is read as far as its last whole
    chunk (zlib's reader gets a little further), then the warning."""
    import random

    from offloaddoctor.logs.candidates import CandidateReader, Wants
    from offloaddoctor.logs.sources import LogSource

    rng = random.Random(7)
    lines = [f"step {i} " + ("Error " if i % 9 == 0 else "") + "%x" % rng.getrandbits(400) for i in range(60_000)]
    data = gzip.compress(("\n".join(lines) + "\n").encode())
    packed = tmp_path / "job.log.gz"
    packed.write_bytes(data[: len(data) * 3 // 4])

    def read() -> tuple[list, list[str]]:
        warnings: list[str] = []
        return list(CandidateReader(LogSource(str(packed)), Wants([b"Error"]), warnings)), warnings

    by_zlib, zlib_warnings = read()
    monkeypatch.setattr(sources, "ISAL_MIN_BYTES", 0)
    by_isal, isal_warnings = read()
    assert len(by_isal) > len(by_zlib) // 2 and by_isal == by_zlib[: len(by_isal)]
    assert (
        [w.split(":")[1] for w in isal_warnings]
        == [w.split(":")[1] for w in zlib_warnings]
        == [" stopped early, the rest is unreadable"]
    )
