"""Many files on several cores give exactly what one core gives."""

from __future__ import annotations

import shutil

from offloaddoctor.scanning import parallel
from offloaddoctor.scanning.scanner import Scanner, build_matchers
from offloaddoctor.logs.sources import resolve_sources

from tests.conftest import EVERY_LOG, FIXTURES, RUNNER, builtin_catalog, every_log_report

MATCHERS = build_matchers(builtin_catalog())


def summary(result):
    return (
        [(a.matcher_id, a.facts, a.count, sorted(a.ranks), a.evidence) for a in result.aggregates],
        result.lines_read,
        sorted(result.ranks_seen),
        result.warnings,
        result.exceptions,
        result.last_error_line,
        {k: [r.iteration for r in v] for k, v in result.iterations.items()},
        [c.values for c in result.collectors],
        result.parameters,
    )


def test_parallel_scan_equals_serial_scan(tmp_path, monkeypatch):
    for case in (
        "oom-fragmentation-multirank",
        "pp-cpu-offload",
        "clean-baseline",
        "nccl-ub-expandable-segments",
        "unmatched-failure",
    ):
        shutil.copy(FIXTURES / case / "job.log", tmp_path / f"{case}.log")
    sources = resolve_sources([str(tmp_path)])
    serial = parallel.scan_sources(MATCHERS, sources, workers=1)
    monkeypatch.setattr(parallel, "PARALLEL_MIN_BYTES", 0)
    assert summary(parallel.scan_sources(MATCHERS, sources, workers=2)) == summary(serial)


def test_errors_in_a_worker_are_the_usual_one_line_error(tmp_path, monkeypatch):
    (tmp_path / "a.log").write_text("fine\n")
    (tmp_path / "b.log").write_bytes(b"\x00\x01\x02" * 5000)
    monkeypatch.setattr(parallel, "PARALLEL_MIN_BYTES", 0)
    import pytest

    from offloaddoctor.errors import UserError

    named = [str(tmp_path / "a.log"), str(tmp_path / "b.log")]  # named: a binary file is an error (listed: a note)
    with pytest.raises(UserError, match="binary"):
        parallel.scan_sources(MATCHERS, resolve_sources(named), workers=2)


def test_progress_reports_every_byte_once(tmp_path):
    from offloaddoctor.api import diagnose

    for case in ("pp-cpu-offload", "clean-baseline"):
        shutil.copy(FIXTURES / case / "job.log", tmp_path / f"{case}.log")
    calls: list[tuple[int, int]] = []
    diagnose([str(tmp_path)], progress=lambda done, total: calls.append((done, total)))
    total = sum(p.stat().st_size for p in tmp_path.iterdir())
    assert calls and calls[-1] == (total, total)
    assert [done for done, _ in calls] == sorted(done for done, _ in calls)


def test_no_progress_output_when_not_a_terminal():
    from offloaddoctor.cli import app

    result = RUNNER.invoke(app, ["diagnose", str(FIXTURES / "pp-cpu-offload" / "job.log"), "-f", "json"])
    assert "\x1b" not in result.stderr and "scanning" not in result.stderr


def test_recursive_globs_and_file_lists(tmp_path):
    from offloaddoctor.api import diagnose
    from offloaddoctor.errors import UserError

    import pytest

    for node in ("node0", "node1"):
        (tmp_path / "job" / node).mkdir(parents=True)
        shutil.copy(FIXTURES / "pp-cpu-offload" / "job.log", tmp_path / "job" / node / "rank0.log")
    with pytest.raises(UserError, match="--recursive"):
        diagnose([str(tmp_path / "job")])
    report = diagnose([str(tmp_path / "job")], recursive=True)
    finding = report.findings[0]
    assert finding.files == sorted(str(p) for p in (tmp_path / "job").rglob("rank0.log"))
    from_glob = diagnose([str(tmp_path / "job" / "*" / "rank*.log"), str(tmp_path / "job" / "node0" / "rank0.log")])
    assert len(from_glob.sources) == 2  # each file once, however it was named
    with pytest.raises(UserError, match="matches no file"):
        diagnose([str(tmp_path / "nothing-*.log")])


def test_long_logs_sample_iteration_lines_without_moving_the_median():
    from offloaddoctor.scanning.scanner import MAX_ITERATION_RECORDS, Scanner

    lines = [
        f" iteration {i:8d}/ 100000 | elapsed time per iteration (ms): {100.0 + (i % 7):.1f} |"
        for i in range(1, 30_001)
    ]
    result = Scanner(MATCHERS).scan_lines("long.log", lines)
    records = result.iterations[("long.log", 0)]
    assert len(records) <= MAX_ITERATION_RECORDS and records[0].iteration == 1
    from offloaddoctor.scanning.run_facts import compute_run_facts

    assert compute_run_facts(result).values["median_iteration_ms"] == 103.0


def test_many_small_files_go_to_the_pool_by_count(tmp_path, monkeypatch):
    for rank in range(12):
        (tmp_path / f"rank{rank:02d}.log").write_text(
            f"[rank{rank}]: hello\n"
            + ("[rank5]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n" if rank == 5 else "")
        )
    sources = resolve_sources([str(tmp_path)])
    serial = parallel.scan_sources(MATCHERS, sources, workers=1)
    runs = []
    real = parallel._runs
    monkeypatch.setattr(parallel, "_runs", lambda *args: runs.append(real(*args)) or runs[-1])
    monkeypatch.setattr(parallel, "PARALLEL_MIN_FILES", 10)  # 12 files of a few bytes: under the byte bar
    assert summary(parallel.scan_sources(MATCHERS, sources, workers=2)) == summary(serial)
    assert runs and [s for start, stop, _ in runs[0] for s in sources[start:stop]] == sources  # contiguous, in order
    assert parallel._SOURCES == []  # the parent's list for the workers is let go


def test_runs_are_contiguous_and_balanced_by_bytes():
    from offloaddoctor.logs.sources import LogSource

    sources = [LogSource(f"{i}.log") for i in range(10)]
    sizes = [10 << 20] + [1] * 9
    runs = parallel._runs(sizes, 4)
    assert [s for start, stop, _ in runs for s in sources[start:stop]] == sources
    assert runs[0] == (0, 1, 10 << 20) and sum(b for _, _, b in runs) == sum(sizes)


def test_rank_logs_without_steady_state_keep_shared_stand_ins_with_the_same_facts(tmp_path, monkeypatch):
    """200,000 rank logs (docs/performance.md): a log whose iteration records can never be cited keeps, per
    record, a stand-in shared by every log at that iteration; run facts and findings are unchanged."""
    line = (
        "[rank{r}]:  iteration        {i}/ 1000 | consumed samples: 32 | elapsed time per iteration (ms): "
        "{ms} | throughput per GPU (TFLOP/s/GPU): 200.0 | lm loss: 8.1E+00 |\n"
    )
    for rank in range(600):
        text = line.format(r=rank, i=1, ms=400.0) + line.format(r=rank, i=2, ms=401.0)
        if rank == 599:  # the last log has a steady state: its records are real and cited
            text += "".join(line.format(r=rank, i=i, ms=300.0 + i) for i in range(3, 9))
        (tmp_path / f"rank{rank:04d}.log").write_text(text)
    sources = resolve_sources([str(tmp_path)])
    serial = parallel.scan_sources(MATCHERS, sources, workers=1)
    records = [serial.iterations[(s.path, 0)] for s in sources]
    assert records[0][0] is records[1][0] and records[0][1] is records[598][1]  # shared, one per iteration number
    assert [r.iteration for r in records[0]] == [1, 2]
    assert records[599][-1].text and records[599][-1].path == sources[599].path  # real, citable
    from offloaddoctor.scanning.run_facts import compute_run_facts

    facts = compute_run_facts(serial)
    assert facts.values["iterations_logged"] == 599 * 2 + 8
    assert facts.values["median_iteration_ms"] == 306.0
    monkeypatch.setattr(parallel, "PARALLEL_MIN_BYTES", 0)
    assert summary(parallel.scan_sources(MATCHERS, sources, workers=2)) == summary(serial)


@EVERY_LOG
def test_steady_records_of_logs_that_cannot_be_cited_become_stand_ins_and_no_report_changes(
    tmp_path, monkeypatch, catalog
):
    """Of steady-state records run_facts cites only the last log's of each run, and runs are told apart by the
    config their logs print: the records of logs that print none become stand-ins, but the last, one log
    late; the report over every fixture, and over rank logs with steady states, is what it is without (two
    held-out FlagScale logs, one run, lost the first one's median iteration time when only config that
    said whether the optimizer was offloaded kept records)."""
    from offloaddoctor.scanning.scanner import Scanner
    from offloaddoctor.api import diagnose
    from offloaddoctor.render.json_report import render_json

    line = (
        "[rank{r}]:  iteration        {i}/ 1000 | consumed samples: 32 | elapsed time per iteration (ms): "
        "{ms} | throughput per GPU (TFLOP/s/GPU): 200.0 | lm loss: 8.1E+00 |\n"
    )
    for rank in range(40):
        (tmp_path / f"rank{rank:04d}.log").write_text(
            "".join(line.format(r=rank, i=i, ms=300 + rank + i) for i in range(1, 9))
        )
    stripped = parallel.scan_sources(MATCHERS, resolve_sources([str(tmp_path)]), workers=1)
    assert stripped.iterations[(str(tmp_path / "rank0000.log"), 0)][-1].path == ""  # a stand-in
    assert stripped.iterations[(str(tmp_path / "rank0039.log"), 0)][-1].text  # the last log's: real
    ranks_with_stripping = render_json(diagnose([str(tmp_path)], catalog=catalog))
    every_log_with_stripping = every_log_report()
    monkeypatch.setattr(Scanner, "_uncitable_unless_offload_known", lambda self, path, collector: None)
    assert render_json(diagnose([str(tmp_path)], catalog=catalog)) == ranks_with_stripping
    logs = sorted(str(p) for p in FIXTURES.rglob("*.log") if p.stat().st_size > 0)
    assert render_json(diagnose(logs, catalog=catalog)) == every_log_with_stripping


def test_one_directory_tells_its_files_apart_by_the_listing_and_still_reads_each_once(tmp_path):
    """A directory given alone is resolved from its listing (inode numbers, no stat per file): a hard link
    and a symbolic link to a log in it are still that log; a link to a log elsewhere is not followed (a note)."""
    import os

    for rank in range(3):
        (tmp_path / f"rank{rank}.log").write_text(f"[rank{rank}]: hello\n")
    os.link(tmp_path / "rank1.log", tmp_path / "rank1-again.log")  # sorts first: the one kept, as by stat
    os.symlink(tmp_path / "rank2.log", tmp_path / "latest.log")
    elsewhere = tmp_path.parent / f"{tmp_path.name}-other.log"
    elsewhere.write_text("other\n")
    os.symlink(elsewhere, tmp_path / "other.log")
    notes: list[str] = []
    alone = resolve_sources([str(tmp_path)], notes=notes)
    assert [os.path.basename(s.path) for s in alone] == ["latest.log", "rank0.log", "rank1-again.log"]
    assert notes == [
        f"{tmp_path / 'other.log'}: symbolic link to a file outside {tmp_path}; skipped (name it to read it)"
    ]
    # With other paths beside it, every file is told apart by a stat: the same files, the same order.
    beside = resolve_sources([str(tmp_path), str(tmp_path / "rank0.log")])
    assert [s.path for s in beside] == [s.path for s in alone]


def test_a_listing_whose_inode_numbers_are_made_up_still_reads_every_file(tmp_path, monkeypatch):
    """A filesystem may give every entry one made-up inode number (FUSE without `use_ino`): entries that share
    one are told apart by a stat, not merged."""
    from offloaddoctor.logs import sources

    for rank in range(4):
        (tmp_path / f"rank{rank}.log").write_text(f"[rank{rank}]: hello\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "rank4.log").write_text("[rank4]: hello\n")
    listed = sources._listed_logs
    monkeypatch.setattr(sources, "_listed_logs", lambda *args: [(p, (0, 1)) for p, _ in listed(*args)])
    assert len(resolve_sources([str(tmp_path)])) == 4
    assert len(resolve_sources([str(tmp_path)], recursive=True)) == 5


def _scan_with_a_fresh_handler_set_per_source(sources):
    """The scan as it was before handler sets were reused: every source gets new handlers."""
    scanner = Scanner(MATCHERS)
    for source in sources:
        scanner.result.lines_read[source.name] = scanner.line_pass.read_source(
            source, scanner.start_source(source.name)
        )
        scanner._source_done(source.name)
    return scanner.finish()


LEAKY_TAILS = {
    # Each ends with something open that must not reach the next log: a traceback, an arguments block, a
    # Bridge summary, a sampled run of iteration lines past its thinning.
    "cut-traceback.log": '[rank1]: Traceback (most recent call last):\n[rank1]:   File "train.py", line 3, in <module>\n'
    "[rank1]:     raise RuntimeError('boom')\n",
    "open-arguments.log": "------------------------ arguments ------------------------\n"
    "  optimizer_cpu_offload ........................... True\n",
    "iterations.log": "".join(
        f" [2026-11-22 10:50:42] iteration {i:8d}/ 100000 | elapsed time per iteration (ms): 400.0 |\n"
        for i in range(1, 3000)
    ),
    "indented-next.log": "    RuntimeError: an indented line that an open traceback would take\n"
    "  hidden_size ........ 4096\n",
}


def _orders_where_each_follows_each(names: list[str]) -> list[tuple[str, ...]]:
    """Orders of `names` in which every name comes right after every other at least once (what a handler left
    open reaches is the next log): greedily, the order that puts the most pairs not yet seen side by side."""
    from itertools import permutations

    unseen = {(a, b) for a in names for b in names if a != b}
    candidates = list(permutations(names))
    orders = []
    while unseen:
        orders.append(max(candidates, key=lambda order: len(unseen.intersection(zip(order, order[1:])))))
        unseen -= set(zip(orders[-1], orders[-1][1:]))
    return orders


def test_one_handler_set_reading_source_after_source_equals_a_fresh_set_each(tmp_path):
    for case in ("oom-fragmentation-multirank", "pp-cpu-offload", "optimizer-offload-slowdown-restart"):
        shutil.copy(FIXTURES / case / "job.log", tmp_path / f"{case}.log")
    for name, text in LEAKY_TAILS.items():
        (tmp_path / name).write_text(text)
    names = sorted(p.name for p in tmp_path.iterdir())
    # 11 orders for the 42 ordered pairs of 7 logs (every 126th of the 5,040 orders, 40 of them, covered the
    # same pairs, at 4 times the cost).
    for order in _orders_where_each_follows_each(names):
        sources = resolve_sources([str(tmp_path / name) for name in order])
        reused = Scanner(MATCHERS).scan(sources)
        assert summary(reused) == summary(_scan_with_a_fresh_handler_set_per_source(sources)), order
