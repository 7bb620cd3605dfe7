"""An error line the run logged iterations after did not stop it: it is not shown as the failure line (a held-out
FlagScale run that trained its 5 iterations had a start-up Triton ERROR as its "most likely failure line")."""

from __future__ import annotations

import pytest

from offloaddoctor.api import diagnose

ERROR = "ERROR 05-30 17:29:04 [config.py:32] Failed to import Triton kernels. Error: No module named 'triton.x'"
ARGUMENTS = [
    "------------------------ arguments ------------------------",
    "  micro_batch_size ................................ 1",
    "-------------------- end of arguments ---------------------",
]


def iteration(number: int) -> str:
    return (
        f" [2026-05-30 17:29:25] iteration {number:>8}/       5 | consumed samples: {8 * number:>12} | "
        "elapsed time per iteration (ms): 3941.9 | learning rate: 1.000000E-04 | global batch size:     8 | "
        "lm loss: 1.257415E+01 | loss scale: 1.0 | grad norm: 5.244 | number of skipped iterations:   0 | "
        "number of nan iterations:   0 |"
    )


def report_of(tmp_path, lines):
    log = tmp_path / "job.log"
    log.write_text("\n".join(lines) + "\n")
    return diagnose([str(log)])


def test_an_error_line_two_iterations_were_logged_after_is_a_note_not_the_failure(tmp_path):
    # (past warm-up: the lines of a log without a steady state are kept only as their count)
    report = report_of(tmp_path, [*ARGUMENTS, ERROR, *map(iteration, range(1, 7))])
    assert report.unmatched is None and not report.findings
    [note] = [n for n in report.notes if "reads like an error" in n]
    assert note.startswith(f"{tmp_path / 'job.log'}:4: `ERROR 05-30")
    assert "logged 6 more iterations after it (up to iteration 6, line 10): it did not stop the run" in note


@pytest.mark.parametrize(
    "lines",
    [
        # a dying rank's traceback, and the iteration it was in logged after it by another rank
        [*ARGUMENTS, *map(iteration, range(1, 6)), ERROR, iteration(6)],
        # the job restarted (a second arguments block) and trained: the error stopped the first attempt
        [*ARGUMENTS, ERROR, *ARGUMENTS, *map(iteration, range(1, 7))],
    ],
    ids=["one iteration after it", "iterations of a restart"],
)
def test_an_error_line_the_run_did_not_go_on_past_is_still_the_failure_line(tmp_path, lines):
    report = report_of(tmp_path, lines)
    assert report.unmatched is not None and report.unmatched.text == ERROR
    assert not any("reads like an error" in note for note in report.notes)


def test_an_error_line_before_the_training_loops_end_is_a_note_not_the_failure(tmp_path):
    """Held-out megatron-core 0.7.0 run (batch 6): a UCX ERROR, then `[after training is done]`, no iteration line
    (its log interval was longer than the run)."""
    ucx = "[1724682542.404473] [host:88700:f]        vfs_fuse.c:281  UCX  ERROR inotify_add_watch(/tmp) failed"
    done = "[after training is done] datetime: 2024-08-26 14:32:36 "
    report = report_of(tmp_path, [*ARGUMENTS, ucx, "training ...", done])
    assert report.unmatched is None
    assert any("ended its training after it (`[after training is done]`, line 6)" in note for note in report.notes)
    assert report_of(tmp_path, [*ARGUMENTS, done, ucx]).unmatched.text == ucx  # after the end: still the failure


SEQUENCE_PARALLEL_ON_LOCAL = [
    "------------------------ arguments ------------------------",
    "  transformer_impl ................................ local",
    "  sequence_parallel ............................... True",
    "  tensor_model_parallel_size ...................... 2",
    "-------------------- end of arguments ---------------------",
]


def test_a_constraint_the_config_breaks_but_the_run_trained_past_is_a_note_not_a_finding(tmp_path):
    """megatron-core 0.7.0 took the local implementation with sequence parallelism (held-out batch 6), which 0.16.1
    refuses at model build: a config-only finding there was called this healthy run's failure."""
    trained = report_of(tmp_path, [*SEQUENCE_PARALLEL_ON_LOCAL, *map(iteration, range(1, 7))])
    assert not trained.findings
    [note] = [n for n in trained.notes if n.startswith("local-impl-sequence-parallel: the config breaks")]
    assert "the log shows the run training past where megatron-core refuses it" in note
    untrained = report_of(tmp_path, SEQUENCE_PARALLEL_ON_LOCAL)
    assert [f.id for f in untrained.findings] == ["local-impl-sequence-parallel"]


def test_an_error_line_before_a_saved_checkpoint_did_not_stop_the_run(tmp_path):
    """Held-out checkpoint conversion (batch 6): RCCL's `NCCL WARN MSCCL++: Cannot enable MSCCL++`, then Megatron's
    `successfully saved checkpoint`: the job did what it was run for."""
    warn = "host:2824929:2829259 [0] /src/rccl/init.cc:2065 NCCL WARN MSCCL++: Cannot enable MSCCL++"
    saved = "  successfully saved checkpoint from iteration   88000 to /mnt/ckpt [ t 1/1, p 1/1 ]"
    report = report_of(tmp_path, [*ARGUMENTS, warn, saved])
    assert report.unmatched is None
    assert any("saved a checkpoint after it (`successfully saved checkpoint`, line 5)" in note for note in report.notes)
