"""Optimizer offloading's host memory: the memory model's lower bound (16 B a parameter offloaded), the advice that
says it, and the SIGKILL a host that cannot hold it leaves (fixtures/memory-calibration n131, n132, host-memory)."""

from __future__ import annotations

import pytest

from offloaddoctor.api import diagnose
from offloaddoctor.memory import calibration as cal
from offloaddoctor.memory import estimate
from offloaddoctor.memory.offload_split import offloaded_share

from tests.conftest import FIXTURES, estimate_run
from tests.memory.test_memory_model import BASE

OUT_OF_MEMORY = FIXTURES / "memory-calibration" / "out-of-memory"


@pytest.mark.parametrize("fraction", [0.0, 0.25, 0.5, 1.0])
def test_the_host_keeps_sixteen_bytes_for_every_parameter_it_offloads(fraction):
    shape = BASE.with_changes(
        optimizer_cpu_offload=fraction > 0, optimizer_offload_fraction=fraction, precision_aware_optimizer=True
    )
    result = estimate(shape)
    stage = result.most_loaded
    offloaded = stage.parameters.total / shape.optimizer_shards * offloaded_share(shape, stage.parameters)
    assert result.host_bytes == pytest.approx(offloaded * cal.HOST_BYTES_PER_OFFLOADED_PARAMETER, rel=1e-9)
    assert (result.host_bytes > 0) is (fraction > 0)


def test_the_change_advised_for_n131_says_the_host_memory_n132_did_not_have():
    """n131 (an 8.27B GPT offloading all of it without the precision-aware optimizer) ran out of GPU memory; the
    change printed, the precision-aware optimizer, fitted the GPU when run (n132) and was killed by its 125 GiB host:
    the advice says it keeps at least 123 GiB a rank there."""
    [finding] = diagnose([str(OUT_OF_MEMORY / "n131-gpt8b-f100-full-precision-aware-off-does-not-fit.log.gz")]).findings
    assert finding.overrides == ["--use-precision-aware-optimizer"]
    cheapest = finding.facts["cheapest_change_that_fits"]
    assert cheapest.startswith("the precision-aware optimizer") and "at least 123 GiB a rank in host memory" in cheapest
    report = estimate_run([str(OUT_OF_MEMORY / "n132-gpt8b-f100-full-precision-aware-advised.log.gz")])
    assert 123 * 2**30 < report.estimate.host_bytes < 124 * 2**30


def test_the_sigkill_of_an_offloading_run_is_its_hosts_memory_with_the_figure():
    [finding] = diagnose([str(FIXTURES / "optimizer-offload-host-memory" / "job.log")]).findings
    assert finding.id == "optimizer-offload-host-memory"
    assert 123 * 2**30 < finding.facts["host_memory_per_rank_bytes"] < 124 * 2**30


def test_a_sigkill_without_offloading_is_left_to_torchruns_summary():
    report = diagnose([str(FIXTURES / "torchrun-root-cause-signal" / "job.log")])
    assert not report.findings


def test_the_precision_aware_change_ran_where_the_host_held_it():
    """n133 (g1's 3.35B GPT offloading all of it at micro-batch 3, without the precision-aware optimizer) was planned
    "does not fit" and ran out of memory; `estimate` lists the precision-aware optimizer among the changes that fit
    (behind selective recompute and a smaller micro-batch), and that change, run as printed (n134), trained at 65,103
    MiB against the 65,139 planned, its host holding the state (at least 50 GiB by the count)."""
    failed = OUT_OF_MEMORY / "n133-gpt3b-f100-mbs3-precision-aware-off-does-not-fit.log.gz"
    report = estimate_run([str(failed)], gpu="H100-80GB")
    assert report.verdict.status == "does not fit"
    [change] = [s for s in report.suggestions if s.overrides == ("optimizer.use_precision_aware_optimizer=True",)]
    assert change.fits and 49 * 2**30 < change.estimate.host_bytes < 51 * 2**30
    ran = estimate_run([str(FIXTURES / "memory-calibration" / "n134-gpt3b-f100-mbs3-precision-aware-advised.log.gz")])
    assert abs(ran.estimate.peak_allocated_bytes / 2**20 - 65_103) < 0.01 * 65_103
    assert abs(change.estimate.peak_allocated_bytes - ran.estimate.peak_allocated_bytes) < 0.001 * 65_103 * 2**20


def test_a_smaller_share_the_host_finding_advises_ran_where_all_of_it_was_killed():
    """l1's 5.1B Llama offloading all of its optimizer was killed by its 125 GiB host (n135: SIGKILL, the finding
    says at least 76 GiB a rank); offloading 0.75 (n136: at least 58 GiB), the smaller share its fix names, trained,
    at the collected end of the model's range (51,748 MiB, as l1-f075 of the offload sweep)."""
    [killed] = diagnose([str(OUT_OF_MEMORY / "n135-llama5b-f100-host.log.gz")]).findings
    assert killed.id == "optimizer-offload-host-memory" and killed.config.verdict == "confirmed"
    assert 76 * 2**30 < killed.facts["host_memory_per_rank_bytes"] < 77 * 2**30
    assert "offload a smaller share" in killed.signature.fix.summary
    ran = estimate_run([str(FIXTURES / "memory-calibration" / "n136-llama5b-f075-host-advised.log.gz")]).estimate
    assert (
        58 * 2**30 < ran.host_bytes < 59 * 2**30
        and ran.host_bytes < 0.8 * killed.facts["host_memory_per_rank_bytes"]
    )
