"""`estimate` on a config `check` refuses says so: the memory verdict is for a run that would stop before or at its
first step (n76's launch: 'fits' on its H100, then HybridDeviceOptimizer's KeyError at the first step, twice)."""

from __future__ import annotations

import pytest

from tests.conftest import FIXTURES, estimate_run

REFUSED = FIXTURES / "memory-calibration" / "refused"


@pytest.mark.parametrize(
    "log, signature",
    [
        ("n76-gpt1b-f050-precision-aware-off.log.gz", "optimizer-offload-requires-distributed-optimizer"),
        ("n117-gpt1b-fp16-f050.log.gz", "precision-aware-fp16-gradients"),
        ("e30-moe8-ep4-top2-mbs92-tp2-h200.log.gz", "moe-tp-requires-sequence-parallel"),
    ],
)
def test_a_refused_run_is_estimated_as_refused(log, signature):
    report = estimate_run([str(REFUSED / log)])
    assert [found for found, _ in report.refused_by] == [signature]


@pytest.mark.parametrize(
    "log",
    [
        "memory-calibration/n77-gpt1b-f050-precision-aware-off-distopt.log.gz",  # the same run with the distributed optimizer
        "memory-calibration/n136-llama5b-f075-host-advised.log.gz",
        "offload-sweep/g1-f010-gc.log.gz",
    ],
)
def test_a_run_that_trained_is_not(log):
    assert estimate_run([str(FIXTURES / log)]).refused_by == []
