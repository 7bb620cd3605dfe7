"""A large log takes another road (GNU grep on two halves, iteration lines skipped before
decoding); every fixture must give the same report on it as on the small-file road."""

from __future__ import annotations

import pytest

from offloaddoctor.api import diagnose
from offloaddoctor.logs import candidates, grep_prefilter
from offloaddoctor.render.json_report import report_to_dict

from tests.conftest import FIXTURES

LOGS = sorted(p for p in FIXTURES.rglob("*.log") if p.stat().st_size > 0)


def _report(path, catalog) -> dict:
    report = report_to_dict(diagnose([str(path)], catalog=catalog))
    report.pop("tool", None)
    return report


@pytest.mark.skipif(grep_prefilter.gnu_grep() is None, reason="needs GNU grep")
@pytest.mark.parametrize("log", LOGS, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_the_large_file_road_gives_the_same_report(log, catalog, monkeypatch):
    small = _report(log, catalog)
    monkeypatch.setattr(candidates, "GREP_MIN_BYTES", 0)
    monkeypatch.setattr(grep_prefilter, "SPLIT_MIN_BYTES", 0)
    monkeypatch.setattr(grep_prefilter, "_cores", lambda: 2)
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


@pytest.mark.skipif(grep_prefilter.gnu_grep() is None, reason="needs GNU grep")
@pytest.mark.parametrize("split", [False, True])
def test_iteration_lines_thinned_in_bulk_give_the_streamed_sample(tmp_path, catalog, monkeypatch, split):
    from offloaddoctor.scanning.scanner import Scanner, build_matchers
    from offloaddoctor.logs.sources import LogSource

    path = _mixed_log(tmp_path, 9000)

    def scan():
        result = Scanner(build_matchers(catalog)).scan([LogSource(str(path))])
        return (
            {k: [(r.line, r.iteration, r.elapsed_ms) for r in v] for k, v in result.iterations.items()},
            result.lines_read,
            [(a.matcher_id, a.count, a.evidence) for a in result.aggregates],
            result.exceptions,
        )

    block_road = scan()
    monkeypatch.setattr(candidates, "GREP_MIN_BYTES", 0)
    if split:
        monkeypatch.setattr(grep_prefilter, "SPLIT_MIN_BYTES", 0)
        monkeypatch.setattr(grep_prefilter, "_cores", lambda: 2)
    monkeypatch.setattr(grep_prefilter, "_RECORDS_BYTES", 4096)  # many blocks, runs cut at their edges
    assert scan() == block_road
    assert len(block_road[0]) == 2 and all(len(v) > 100 for v in block_road[0].values())


@pytest.mark.skipif(
    grep_prefilter.gnu_grep() is None or __import__("shutil").which("gzip") is None, reason="needs GNU grep and gzip"
)
@pytest.mark.parametrize(
    "log", LOGS[:6] + [FIXTURES / "oom-fragmentation-multirank" / "job.log"], ids=lambda p: str(p.relative_to(FIXTURES))
)
def test_a_large_gz_decompressed_by_gzip_gives_the_same_report(log, catalog, monkeypatch, tmp_path):
    import gzip
    import tempfile

    packed = tmp_path / (log.parent.name + ".log.gz")
    packed.write_bytes(gzip.compress(log.read_bytes()))
    in_python = _report(packed, catalog)
    monkeypatch.setattr(candidates, "GZ_SPOOL_MIN_BYTES", 0)
    monkeypatch.setattr(candidates, "GREP_MIN_BYTES", 0)
    spools = set(__import__("pathlib").Path(tempfile.gettempdir()).glob("offloaddoctor-gunzip-*"))
    assert _report(packed, catalog) == in_python
    assert set(__import__("pathlib").Path(tempfile.gettempdir()).glob("offloaddoctor-gunzip-*")) == spools  # removed


def test_a_damaged_gz_keeps_the_python_readers_warning(tmp_path, catalog, monkeypatch):
    import gzip

    data = gzip.compress((FIXTURES / "pp-cpu-offload" / "job.log").read_bytes())
    packed = tmp_path / "job.log.gz"
    packed.write_bytes(data[: len(data) * 3 // 4])
    in_python = _report(packed, catalog)
    monkeypatch.setattr(candidates, "GZ_SPOOL_MIN_BYTES", 0)
    assert _report(packed, catalog) == in_python
    assert any("gzip" in note for note in in_python["notes"])


def _script(path, text: str) -> str:
    path.write_text("#!/bin/sh\n" + text)
    path.chmod(0o755)
    return str(path)


def _gzipped(tmp_path, data: bytes, name: str = "job.log.gz"):
    import gzip

    packed = tmp_path / name
    packed.write_bytes(gzip.compress(data))
    return packed


def _gzip_piped_through(tmp_path, monkeypatch, tail: str) -> None:
    """gzip(1) for the .gz road becomes the real one piped into the shell command `tail`."""
    import shutil

    real_gzip, real_which = shutil.which("gzip"), shutil.which
    fake = _script(tmp_path / "gzip", f'"{real_gzip}" -c -d | {tail}\n')  # the .gz comes on standard input
    monkeypatch.setattr(shutil, "which", lambda name: fake if name == "gzip" else real_which(name))


def _gz_roads_taken(monkeypatch) -> list[bool]:
    """Whether gzip(1) decompressed the whole log, for each gunzip_into call from here on."""
    taken = []
    real_road = grep_prefilter.gunzip_into

    def road(*args):
        whole = real_road(*args)
        taken.append(whole)
        return whole

    monkeypatch.setattr(grep_prefilter, "gunzip_into", road)
    return taken


needs_gzip_and_grep = pytest.mark.skipif(
    grep_prefilter.gnu_grep() is None
    or __import__("shutil").which("gzip") is None
    or __import__("shutil").which("dd") is None,
    reason="needs GNU grep, gzip and dd",
)


@needs_gzip_and_grep
@pytest.mark.parametrize("pause", ["0", "0.3"])
def test_a_gz_is_read_once_gzip_has_written_all_of_it(tmp_path, catalog, monkeypatch, pause):
    """A gzip that stops for a while after its first bytes: the decompressed log is read once gzip has
    ended (no grep follows it as it is written any more: that did not pay, docs/performance.md, sixth round),
    every line once."""
    packed = _gzipped(tmp_path, (FIXTURES / "oom-fragmentation-multirank" / "job.log").read_bytes())
    in_python = _report(packed, catalog)
    _gzip_piped_through(
        tmp_path, monkeypatch, f"{{ dd bs=4096 count=1 iflag=fullblock 2>/dev/null; sleep {pause}; cat; }}"
    )
    monkeypatch.setattr(candidates, "GZ_SPOOL_MIN_BYTES", 0)
    taken = _gz_roads_taken(monkeypatch)
    assert _report(packed, catalog) == in_python
    assert taken == [True]


@needs_gzip_and_grep
@pytest.mark.parametrize("fails", ["grep", "gzip"])
def test_a_failing_gzip_or_grep_on_the_gz_road_changes_no_report(tmp_path, catalog, monkeypatch, fails):
    """grep failing on the decompressed log: the grep road reads on in Python from where grep stopped; gzip
    failing after writing a part: nothing of that part was handed out, Python reads it all."""
    packed = _gzipped(tmp_path, (FIXTURES / "pp-cpu-offload" / "job.log").read_bytes())
    in_python = _report(packed, catalog)
    monkeypatch.setattr(candidates, "GZ_SPOOL_MIN_BYTES", 0)
    if fails == "grep":
        failing = _script(tmp_path / "grep", f'"{grep_prefilter.gnu_grep()}" "$@" >/dev/null\nexit 2\n')
        monkeypatch.setattr(grep_prefilter, "gnu_grep", lambda: failing)
    else:
        _gzip_piped_through(tmp_path, monkeypatch, "head -c 5000\nexit 1")
    assert _report(packed, catalog) == in_python


@needs_gzip_and_grep
def test_a_gz_whose_log_is_past_the_spools_limit_is_read_in_python(tmp_path, catalog, monkeypatch):
    """gzip(1) may write at most GZ_SPOOL_MAX_BYTES (and half the free space): past it, gzip stops and the
    .gz is read by Python, with the same report."""
    log = FIXTURES / "oom-fragmentation-multirank" / "job.log"
    text = "".join(line + "\n" for line in log.read_text().splitlines() if "Watchdog caught" in line) * 50
    packed = _gzipped(tmp_path, text.encode(), "timeouts.log.gz")
    in_python = _report(packed, catalog)
    monkeypatch.setattr(candidates, "GZ_SPOOL_MIN_BYTES", 0)
    monkeypatch.setattr(candidates, "GZ_SPOOL_MAX_BYTES", len(text.encode()) - 1)
    taken = _gz_roads_taken(monkeypatch)
    assert _report(packed, catalog) == in_python
    assert taken == [False]


@needs_gzip_and_grep
def test_an_interrupt_while_gzip_runs_leaves_no_temporary_file(tmp_path, catalog, monkeypatch):
    import tempfile
    from pathlib import Path

    packed = _gzipped(tmp_path, (FIXTURES / "pp-cpu-offload" / "job.log").read_bytes())
    monkeypatch.setattr(candidates, "GZ_SPOOL_MIN_BYTES", 0)

    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(grep_prefilter, "gunzip_into", interrupted)
    spools = set(Path(tempfile.gettempdir()).glob("offloaddoctor-gunzip-*"))
    with pytest.raises(KeyboardInterrupt):
        _report(packed, catalog)
    assert set(Path(tempfile.gettempdir()).glob("offloaddoctor-gunzip-*")) == spools
