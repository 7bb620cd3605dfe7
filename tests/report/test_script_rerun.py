"""A training script run again in a spawned child (runpy.run_path into its top level, on into Megatron's training
code): a missing `if __name__ == "__main__":` guard, whose NCCL errors are no collective's failure (held-out
megatron-bridge-pcie-nccl-error-missing-main-guard, Megatron-Bridge#926)."""

from __future__ import annotations

from offloaddoctor.api import diagnose, diagnose_text
from tests.conftest import FIXTURES

CALIBRATION = FIXTURES / "memory-calibration"

NCCL = (
    "torch.distributed.DistBackendError: NCCL error in: /opt/pytorch/pytorch/torch/csrc/distributed/c10d/"
    "NCCLUtils.cpp:77, remote process exited or there was a network error, NCCL version 2.27.3"
)
SCRIPT = '  File "/work/pretrain_qwen3.py", line 29, in <module>\n    pretrain(cfg, forward_step)'
PRETRAIN = (
    '  File "/opt/Megatron-Bridge/src/megatron/bridge/training/pretrain.py", line 95, in _pretrain\n'
    "    setup_output = setup(state, dataset_provider)"
)


def _log(*frames: str, exception: str = "EOFError") -> str:
    lines = ["Traceback (most recent call last):", *"\n".join(frames).splitlines(), exception, NCCL]
    return "\n".join(f"[rank1]: {line}" for line in lines)


RUN_PATH = '  File "<frozen runpy>", line 286, in run_path\n  File "<frozen runpy>", line 88, in _run_code'
AS_MAIN = '  File "<frozen runpy>", line 198, in _run_module_as_main\n  File "<frozen runpy>", line 88, in _run_code'


def test_the_held_out_paste_claims_no_collective_failure_and_names_the_missing_guard():
    report = diagnose([str(FIXTURES / "held-out" / "megatron-bridge-pcie-nccl-error-missing-main-guard" / "job.log")])
    assert report.findings == []
    [note] = [n for n in report.notes if "runpy.run_path" in n]
    assert 'if __name__ == "__main__":' in note and "pretrain_Qwen3_8B.py" in note


def test_run_path_into_the_script_and_on_into_training_is_a_rerun():
    report = diagnose_text(_log(RUN_PATH, SCRIPT, PRETRAIN))
    assert report.findings == [] and any("runpy.run_path" in n for n in report.notes)


def test_python_dash_m_runs_the_script_through_runpy_too_and_is_no_rerun():
    report = diagnose_text(_log(AS_MAIN, SCRIPT, PRETRAIN))
    assert [f.id for f in report.findings] == ["nccl-collective-failure"]
    assert not any("runpy.run_path" in n for n in report.notes)


def test_a_child_that_fails_at_the_scripts_imports_never_reached_training_and_is_no_rerun():
    imports = '  File "/work/pretrain_qwen3.py", line 3, in <module>\n    import datasets'
    report = diagnose_text(_log(RUN_PATH, imports, exception="ModuleNotFoundError: No module named 'datasets'"))
    assert [f.id for f in report.findings] == ["nccl-collective-failure"]
    assert not any("runpy.run_path" in n for n in report.notes)


def test_a_real_unguarded_script_under_the_persistent_checkpoint_worker_is_read_so_and_the_guarded_one_is_not():
    """b64 (an H200, megatron-core 0.19.0, planned in benchmarks/build_oom_plan.json): the training script without a
    main guard, saving asynchronously with the persistent worker. The worker's child ran the script again and stopped
    at multiprocessing's own bootstrapping error; the parent hung until it was killed. b65, the same flags from the
    guarded script, trained and saved."""
    rerun = diagnose([str(CALIBRATION / "refused" / "b64-tiny-async-save-no-main-guard.log.gz")])
    assert rerun.findings == []
    [note] = [n for n in rerun.notes if "runpy.run_path" in n]
    assert "pretrain_gpt_without_main_guard.py" in note
    guarded = diagnose([str(CALIBRATION / "b65-tiny-async-save.log.gz")])
    assert not any("runpy.run_path" in n for n in guarded.notes)
