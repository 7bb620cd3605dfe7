"""Issue 27 point 8: what a log makes us keep grew with the log (200 MB of repeated `NCCL_…=` lines kept 5 GB,
an arguments block that never ends 1.77 GB). What one log can make us keep is now bounded: the first values,
the rest counted in a note. These tests feed generated large inputs and measure the kept structures."""

from __future__ import annotations

from offloaddoctor.scanning.scanner import MAX_EVIDENCE, Scanner, build_matchers
from offloaddoctor.config.from_log import MAX_ARGUMENTS_PER_BLOCK, MAX_VALUES_PER_LOG, LogConfigCollector
from offloaddoctor.logs.sources import LogSource


def test_repeated_environment_lines_keep_one_value_per_key():
    warnings: list[str] = []
    collector = LogConfigCollector("job.log", warnings=warnings)
    for line in range(1, 200_001):
        assert collector.feed("NCCL_IB_HCA=mlx5_0", line)
    collector.finish()
    assert [(v.key, v.value, v.source.line) for v in collector.values] == [("env.NCCL_IB_HCA", "mlx5_0", 1)]
    assert collector.not_kept == 199_999
    assert any("199,999 config lines" in w for w in warnings)


def test_distinct_environment_keys_stop_at_the_per_log_bound():
    collector = LogConfigCollector("job.log", warnings=[])
    for line in range(1, 3 * MAX_VALUES_PER_LOG):
        collector.feed(f"NCCL_KEY_{line}=1", line)
    assert len(collector.values) == MAX_VALUES_PER_LOG
    assert collector.not_kept == 2 * MAX_VALUES_PER_LOG - 1


def test_an_arguments_block_that_never_ends_is_cut_with_a_note():
    warnings: list[str] = []
    collector = LogConfigCollector("job.log", warnings=warnings)
    collector.feed("------------------------ arguments ------------------------", 1)
    for line in range(2, 100_000):
        collector.feed(f"  argument_{line} ........................ {line}", line)
    assert len(collector.values) == MAX_ARGUMENTS_PER_BLOCK
    assert not collector.in_arguments  # the lines after it are no longer all read as config
    [note] = [w for w in warnings if "arguments block" in w]
    assert f"job.log:{MAX_ARGUMENTS_PER_BLOCK + 2}:" in note


def test_a_scan_of_a_generated_large_log_keeps_bounded_structures(tmp_path, catalog):
    path = tmp_path / "job.log"
    with path.open("w") as log:
        log.write("------------------------ arguments ------------------------\n")
        for i in range(20_000):  # never ends
            log.write(f"  argument_{i} ........................ {i}\n")
        for i in range(20_000):
            log.write(f"NCCL_SOCKET_IFNAME=eth{i % 2}\nNCCL_DEBUG_{i}=INFO\n")
            log.write(
                f"[rank{i % 8}]:[E ProcessGroupNCCL.cpp:563] [Rank {i % 8}] Watchdog caught collective operation "
                f"timeout: WorkNCCL(SeqNum={i}, OpType=ALLREDUCE) ran for 600001 milliseconds before timing out.\n"
            )
    result = Scanner(build_matchers(catalog)).scan([LogSource(str(path))])
    [collector] = result.collectors
    assert len(collector.values) <= MAX_VALUES_PER_LOG
    assert all(len(aggregate.evidence) <= MAX_EVIDENCE for aggregate in result.aggregates)
    assert any("counted, not kept" in w for w in result.warnings)
    assert any("arguments block of more than" in w for w in result.warnings)
