"""The unfused attention's score tensors and the allocator's fragmentation without expandable segments
(memory/calibration.py FRAGMENTED_SCORE_TENSORS), against the runs recorded for it on one H100 (n80-n81, n88-n93:
planned in benchmarks/moe_plan.json before they ran)."""

from __future__ import annotations


import pytest

from offloaddoctor.memory.calibration import FRAGMENTED_SCORE_TENSORS
from offloaddoctor.memory.fit import FITS, TIGHT, fragmentation_allowance
from tests.conftest import estimate_run
from tests.memory.recorded import CALIBRATION, LAUNCHES, trained

EXPANDABLE = "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"


def _on_an_h100(run: str):
    folder = CALIBRATION / "out-of-memory" if run.startswith("n80") else CALIBRATION
    return estimate_run([str(folder / f"{run}.log.gz")], gpu="H100-80GB")


# Without expandable segments, each run's verdict on an H100 and what it did there.
RECORDED = {
    "n88-gpt-s12k-h20-l3-fits": FITS,  # 5,760 MiB score tensors, 1,001 MiB to spare: ran
    "n90-gpt-s8k-h32-l5-fits": FITS,  # 4,096 MiB, 266 MiB to spare: ran
    "n91-gpt-s18k-h12-l2-fits": FITS,  # 7,776 MiB, 2,300 MiB to spare: ran
    "n92-gpt-s14k-h20-l2-tight": TIGHT,  # 7,840 MiB: ran all the same (the allowance is above what it needed)
    "n98-gpt-s16k-h1024-mbs1-fits": FITS,  # n80's pattern at hidden 1,024, 8,192 MiB, 358 MiB to spare: ran
    "n99-gpt-s16k-mbs1-again": TIGHT,  # n80 again as it was: trained this time
}


@pytest.mark.parametrize(("run", "status"), sorted(RECORDED.items()))
def test_each_run_planned_near_an_h100s_limit_got_the_verdict_it_was_planned_with_andtrained(run, status):
    report = _on_an_h100(run)
    assert report.verdict.status == status
    assert fragmentation_allowance(report.estimate.shape) == pytest.approx(
        FRAGMENTED_SCORE_TENSORS * 2 * report.estimate.shape.num_attention_heads * report.estimate.shape.seq_length**2
    )
    assert EXPANDABLE not in LAUNCHES[run] and trained(run)


def test_the_run_that_ran_out_of_memory_where_the_slack_alone_said_fits_is_tight_and_is_told_the_setting_it_ran_with():
    """n80: 8,192 MiB score tensors, out of memory with 14.41 GiB reserved but unallocated. The x 1.06 slack alone
    left 5,093 MiB to spare; the allowance makes it tight (the same run again, n99, trained: a chance, not a
    certainty), its first change is expandable segments alone, and with them (n81, its launch as printed) it
    trained."""
    report = _on_an_h100("n80-gpt-s16k-mbs1-advised")
    assert report.verdict.status == TIGHT
    assert report.verdict.fragmentation_bytes == FRAGMENTED_SCORE_TENSORS * 8192 * 2**20
    assert "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True makes it fit" in report.verdict.sentence()
    first = report.suggestions[0]
    assert (first.overrides, first.fits) == (("env.PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",), True)
    assert LAUNCHES["n81-gpt-s16k-mbs1-expandable-advised"] == f"{EXPANDABLE} {LAUNCHES['n80-gpt-s16k-mbs1-advised']}"
    assert trained("n81-gpt-s16k-mbs1-expandable-advised")
    assert LAUNCHES["n99-gpt-s16k-mbs1-again"] == LAUNCHES["n80-gpt-s16k-mbs1-advised"]


def test_a_tight_run_is_told_expandable_segments_first_which_ran_as_printed():
    report = _on_an_h100("n92-gpt-s14k-h20-l2-tight")
    assert report.suggestions[0].overrides == ("env.PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",)
    advised = "n93-gpt-s14k-h20-l2-expandable-advised"
    assert LAUNCHES[advised] == f"{EXPANDABLE} {LAUNCHES['n92-gpt-s14k-h20-l2-tight']}" and trained(advised)


def test_where_the_setting_alone_makes_the_run_fit_no_other_change_carries_it():
    """n80's other changes (recompute, Transformer Engine) are offered as they are: the setting comes first, alone.
    Where a change fits only with it (n79's micro-batch 16 -> 1: tests/hostile/test_real_pastes.py), it carries it."""
    first, *others = _on_an_h100("n80-gpt-s16k-mbs1-advised").suggestions
    assert first.overrides == ("env.PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",) and others
    assert all("env.PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" not in s.overrides for s in others)


def test_a_verdict_that_turns_on_the_setting_says_when_the_inputs_do_not_show_it():
    """A log does not print the job's environment: n93 ran with expandable segments, its log alone reads as
    without them (tight, with a note saying so), and told them it fits."""
    log = str(CALIBRATION / "n93-gpt-s14k-h20-l2-expandable-advised.log.gz")
    unknown = estimate_run([log], gpu="H100-80GB")
    assert unknown.verdict.status == TIGHT
    assert any(note.startswith("PYTORCH_CUDA_ALLOC_CONF is not in the inputs") for note in unknown.notes)
    told = estimate_run([log], gpu="H100-80GB", overrides=["env.PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"])
    assert told.verdict.status == FITS and not any("PYTORCH_CUDA_ALLOC_CONF" in note for note in told.notes)
    assert not any("PYTORCH_CUDA_ALLOC_CONF" in note for note in _on_an_h100("n88-gpt-s12k-h20-l3-fits").notes)
