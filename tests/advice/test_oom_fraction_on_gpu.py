"""The offload fraction `diagnose` says would free an OOM, held to real runs of the same model: for the run as it
collects its garbage, and with Megatron's manual garbage collection (which frees the optimizer's first build)."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from offloaddoctor.api import diagnose

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def _rows(tsv: Path, column: int) -> dict[str, str]:
    return {r.split("\t")[0]: r.split("\t")[column] for r in tsv.read_text().splitlines()[1:]}


SWEEP = FIXTURES / "offload-sweep"
SWEEP_OUTCOME = _rows(SWEEP / "runs.tsv", 1)
SWEEP_COMMAND = _rows(SWEEP / "runs.tsv", 8)
CALIBRATION = FIXTURES / "memory-calibration"


def _ran_at(run: str, fraction: float, manual_gc: bool) -> bool:
    if run in SWEEP_OUTCOME:
        outcome, command = SWEEP_OUTCOME[run], SWEEP_COMMAND[run]
    else:
        with gzip.open(CALIBRATION / f"{run}.log.gz", "rt") as log:
            outcome = "ran" if "(after 3 iterations) memory (MB)" in log.read() else "oom"
        command = _rows(CALIBRATION / "runs.tsv", 4)[run]
    return (
        outcome == "ran"
        and f"--optimizer-offload-fraction {fraction:g} " in command + " "
        and ("--manual-gc" in command) == manual_gc
    )


@pytest.mark.parametrize(
    ("failed", "as_it_collects", "ran_so", "with_gc", "ran_with_gc"),
    [
        # 3.35B GPT on one H100 at 0.1: 0.0-0.1 ran out of memory without --manual-gc, 0.2 and 0.3 ran; with it 0.1 ran
        (SWEEP / "g1-f010.log.gz", 0.3, "g1-f030", 0.1, "g1-f010-gc"),
        # 80 experts on two H200, no offloading: the state alone asked 0.55; the model's 0.5 ran without
        # --manual-gc (e63), its 0.15 with it (e49)
        (
            CALIBRATION / "out-of-memory" / "e46-moe80-ep1-h200.log.gz",
            0.5,
            "e63-moe80-ep1-offload050-nogc-h200",
            0.15,
            "e49-moe80-ep1-offload015-advised-h200",
        ),
        # 4B Llama at 0.5: the numbers alone said offloading could not free enough (1.12); 0.9 ran
        (SWEEP / "a-llama4b-gqa-f050-0.log.gz", 0.9, None, None, "a-llama4b-gqa-f050-2"),
    ],
)
def test_the_fraction_diagnose_gives_ran_on_the_gpu(failed, as_it_collects, ran_so, with_gc, ran_with_gc):
    finding = next(f for f in diagnose([str(failed)]).findings if "offload_fraction_needed" in f.facts)
    assert finding.facts["offload_fraction_needed"] == as_it_collects
    assert finding.facts.get("offload_fraction_needed_with_manual_gc") == with_gc
    if ran_so:
        assert _ran_at(ran_so, as_it_collects, manual_gc=False)
    assert _ran_at(ran_with_gc, with_gc or as_it_collects, manual_gc=True)


def test_a_tight_verdicts_shortfall_is_said_to_be_its_worst_case():
    """e19 (EP 2 on two H200) is TIGHT: the balanced peak fits, the worst case is 21.96 GiB short. The shortfall was
    printed as a flat fact beside a verdict saying the best case fits."""
    path = CALIBRATION / "out-of-memory" / "e19-moe8-ep2-top2-mbs94-h200.log.gz"
    facts = next(f for f in diagnose([str(path)]).findings if "fit_verdict" in f.facts).facts
    assert facts["fit_verdict"].startswith("TIGHT")
    assert "whole_step_shortfall_bytes" not in facts
    assert round(facts["whole_step_shortfall_at_most_bytes"] / 2**30, 2) == 21.96
    e46 = CALIBRATION / "out-of-memory" / "e46-moe80-ep1-h200.log.gz"
    assert "whole_step_shortfall_bytes" in diagnose([str(e46)]).findings[0].facts  # does not fit: no bound


def test_on_one_gpu_the_too_large_fraction_does_not_advise_more_parallelism():
    e11 = CALIBRATION / "out-of-memory" / "e11-moe8-top4-mbs14.log.gz"  # one H100
    sentence = next(f for f in diagnose([str(e11)]).findings if "offload_fraction_needed" in f.facts).facts[
        "offload_fraction_needed"
    ]
    assert sentence.startswith("1.0 at the most, and TIGHT there") and "pipeline/tensor parallelism or" not in sentence
    assert "add recompute, a smaller micro-batch" in sentence
    e19 = CALIBRATION / "out-of-memory" / "e19-moe8-ep2-top2-mbs94-h200.log.gz"  # two GPUs: PP 2 fits them
    assert "add pipeline/tensor parallelism" in diagnose([str(e19)]).findings[0].facts["offload_fraction_needed"]


def test_what_a_capped_request_missed_is_counted_within_the_cap():
    """e77 (two H200 capped at 75.37 GiB a process): 6.84 GiB asked with 65.97 GiB free on the card but 6.05 GiB
    left under the cap; 0.79 GiB was missing, not the 0 bytes the card's free figure gives."""
    log = CALIBRATION / "out-of-memory" / "e77-moe8-ep2-top2-mbs56-expandable-cap.log.gz"
    finding = next(f for f in diagnose([str(log)]).findings if "shortfall_bytes" in f.facts)
    assert finding.facts["free_bytes"] > finding.facts["requested_bytes"]
    assert 0.78 * 2**30 < finding.facts["shortfall_bytes"] < 0.80 * 2**30


def test_the_slowdown_fix_says_what_its_lower_fraction_costs_the_gpu():
    """p38 trained at 0.65 (68,712 MiB on an H100) and `estimate` found no smaller share that fits: the guide's 0.25,
    which the slowdown fix pastes, needs ~30 GiB more by the memory model, and the fix says to check before."""
    log = CALIBRATION / "host-memory" / "p38-gpt7b-f065-gc-eval2-cyclic-w0-host-advised.log.gz"
    [slow] = [f for f in diagnose([str(log)]).findings if f.id == "optimizer-offload-slowdown"]
    assert ("optimizer.optimizer_offload_fraction", 0.25) in slow.changes
    assert "30,720 MiB over this run's 68,414 at 0.65" in slow.facts["peak_allocated_at_the_fix_fraction"]
    assert slow.fix_note.startswith("Check the GPU before lowering the fraction")
    # Run so (n137, one H100, planned before it ran): out of memory at the first optimizer step, and diagnose's fix
    # for that OOM is the fraction p38 trained at.
    oom_log = CALIBRATION / "out-of-memory" / "n137-gpt7b-f025-gc-slowdown-fix.log.gz"
    assert b"torch.OutOfMemoryError" in gzip.decompress(oom_log.read_bytes())
    [oom] = diagnose([str(oom_log)]).findings
    assert ("optimizer.optimizer_offload_fraction", 0.65) in oom.changes


def test_an_oom_without_the_gpus_size_says_its_lines_are_not_sized():
    """e76 (NCCL's "Failed to CUDA calloc async 4 bytes" on two H100): the usual capacity lines, and what the memory
    model says the peak is made of, with the command that sizes a change."""
    log = CALIBRATION / "out-of-memory" / "e76-moe8-ep2-top2-mbs56-does-not-fit.log.gz"
    [oom] = [f for f in diagnose([str(log)]).findings if f.id == "oom-capacity"]
    assert "not sized for this run" in oom.fix_note and "--gpu NAME" in oom.fix_note
    assert "largest component: activations (60,846 MiB)" in oom.fix_note


def _without_its_arguments_block(log: Path) -> str:
    lines = gzip.decompress(log.read_bytes()).decode().splitlines()
    start = lines.index("------------------------ arguments ------------------------")
    end = lines.index("-------------------- end of arguments ---------------------")
    return "\n".join(lines[:start] + lines[end + 1 :])


def test_an_oom_before_any_iteration_line_sizes_its_fraction_for_adams_moments_as_the_gpu_showed():
    """b81-b85 (one H100 under a 39,500 MiB limit, planned in benchmarks/build_oom_plan.json): n16's GPT ran out of
    memory in iteration 1's forward/backward, 598.81 MiB short, before the optimizer's first step allocates Adam's
    moments. From the message's figures alone (the log without its arguments block) the fraction was 0.1; offloading
    alone at 0.1 ran out of memory in iteration 1 (b82), and at the 0.75 that allows for the moments it trained
    iteration 1 and ran out of memory in iteration 2, once they existed (b83): "at least" is the word. The fixes
    printed, without the arguments block (b84) and with it (b85), trained."""
    from offloaddoctor.api import diagnose_text
    from tests.memory.recorded import LAUNCHES, trained

    stopped = CALIBRATION / "out-of-memory"
    b81 = stopped / "b81-gpt1b-cap39500-first-step-oom.log.gz"
    [figures] = diagnose_text(_without_its_arguments_block(b81)).findings
    assert "forward_backward_no_pipelining" in figures.facts["before_any_iteration_line"]
    assert figures.facts["offload_fraction_needed"] == 0.75
    assert figures.facts["offload_fraction_needed_is"].startswith(
        "the least the step needs: if this was the first step"
    )
    assert figures.overrides == [
        "--optimizer-cpu-offload",
        "--optimizer-offload-fraction 0.75",
        "--use-precision-aware-optimizer",
        "--recompute-granularity selective",
    ]
    for run, fraction, iterations_before in (
        ("b82-gpt1b-cap39500-offload-010", 0.1, 0),
        ("b83-gpt1b-cap39500-offload-075", 0.75, 1),
    ):
        log = gzip.decompress((stopped / f"{run}.log.gz").read_bytes()).decode()
        assert f"--optimizer-offload-fraction {fraction:g}" in LAUNCHES[run] and "--recompute" not in LAUNCHES[run]
        assert log.count("torch.OutOfMemoryError") == 1 and log.count("iteration        1/") == iterations_before
    printed = "b84-gpt1b-cap39500-figures-fix-advised"
    assert trained(printed, 14) and all(line in LAUNCHES[printed] for line in figures.overrides)
    [modelled] = diagnose([str(b81)]).findings  # the arguments block: the memory model sizes the whole step
    assert modelled.overrides == ["--micro-batch-size 2"] and "peak 30,738 MiB" in modelled.fix_note
    assert modelled.facts["offload_fraction_needed"].startswith("1.0 at the most, and TIGHT there")
    assert (
        trained("b85-gpt1b-cap39500-mbs2-advised", 14)
        and "--micro-batch-size 2 " in LAUNCHES["b85-gpt1b-cap39500-mbs2-advised"]
    )


def test_an_oom_after_an_iteration_line_in_any_of_the_runs_logs_is_not_read_as_before_the_first_step(tmp_path):
    """b83 trained iteration 1 and ran out of memory in iteration 2; Megatron prints iteration lines on the last rank
    only, so another rank's log with one is a step done as well."""
    from offloaddoctor.api import diagnose_text

    b83 = CALIBRATION / "out-of-memory" / "b83-gpt1b-cap39500-offload-075.log.gz"
    [after] = diagnose([str(b83)]).findings
    assert "before_any_iteration_line" not in after.facts
    b81 = _without_its_arguments_block(CALIBRATION / "out-of-memory" / "b81-gpt1b-cap39500-first-step-oom.log.gz")
    assert "before_any_iteration_line" in diagnose_text(b81).findings[0].facts
    (tmp_path / "rank0.log").write_text(b81)
    iteration = next(
        line for line in gzip.decompress(b83.read_bytes()).decode().splitlines() if "iteration        1/" in line
    )
    (tmp_path / "rank1.log").write_text(iteration + "\n")
    [oom] = diagnose([str(tmp_path / "rank0.log"), str(tmp_path / "rank1.log")]).findings
    assert "before_any_iteration_line" not in oom.facts
    # a resumed run: the optimizer's state came with the checkpoint (Megatron-LM's checkpointing.py print)
    loaded = "  successfully loaded checkpoint from /ckpt [ t 1/1, p 1/1 ] at iteration 200\n"
    assert "before_any_iteration_line" not in diagnose_text(loaded + b81).findings[0].facts


def test_b83s_fixes_from_the_figures_alone_and_from_the_model_as_the_gpu_ran_them():
    """b83 (offloading 0.75 under the 39,500 MiB limit) ran out of memory in iteration 2, 814.70 MiB short. From the
    message's figures alone diagnose prints fraction 0.85, said to be the least the step needs: run as printed (b86)
    it trained iteration 1 and ran out of memory in iteration 2. With the arguments block the memory model leads with
    selective recompute of the attention core (b87 trained, 18,580 MiB against 18,516) and says fraction 1.0 is
    TIGHT, not impossible: b88, 1.0 alone, trained at 36,369 MiB against the model's 36,365."""
    from offloaddoctor.api import diagnose_text
    from tests.memory.recorded import LAUNCHES, trained

    b83 = CALIBRATION / "out-of-memory" / "b83-gpt1b-cap39500-offload-075.log.gz"
    [figures] = diagnose_text(_without_its_arguments_block(b83)).findings
    assert figures.facts["offload_fraction_needed"] == 0.85
    assert figures.facts["offload_fraction_needed_is"].startswith("the least the step needs: it frees this request's")
    assert figures.fix_note.startswith("The offload fraction below, 0.85, is the least")
    b86 = "b86-gpt1b-cap39500-offload-085-figures-fix"
    assert all(line in LAUNCHES[b86] for line in figures.overrides)
    log = gzip.decompress((CALIBRATION / "out-of-memory" / f"{b86}.log.gz").read_bytes()).decode()
    assert log.count("iteration        1/") == 1 and log.count("torch.OutOfMemoryError") == 1
    [modelled] = diagnose([str(b83)]).findings
    assert modelled.overrides[:2] == ["--recompute-granularity selective", "--recompute-modules core_attn"]
    b87 = "b87-gpt1b-cap39500-offload-075-sel-gc-advised"
    assert trained(b87, 14) and all(line in LAUNCHES[b87] for line in modelled.overrides)
    sentence = modelled.facts["offload_fraction_needed"]
    assert sentence.startswith("1.0 at the most, and TIGHT there: the memory model puts the peak at 36,365 MiB")
    b88 = "b88-gpt1b-cap39500-offload-100"
    assert trained(b88, 14) and LAUNCHES[b88].endswith("--optimizer-offload-fraction 1.0")


def test_b86s_fragmentation_fix_first_line_alone_trained():
    """b86's OOM: free within the limit plus reserved-unallocated covered the request, so its fix leads with
    expandable segments, "zero cost". b89, b86 with that line alone under the same limit, trained at 38,245 MiB
    (the memory model: 38,242)."""
    from tests.memory.recorded import LAUNCHES, trained

    b86 = CALIBRATION / "out-of-memory" / "b86-gpt1b-cap39500-offload-085-figures-fix.log.gz"
    [finding] = diagnose([str(b86)]).findings
    assert finding.id == "oom-fragmentation"
    assert finding.overrides[0] == "export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"
    b89 = "b89-gpt1b-cap39500-offload-085-expandable"
    expandable = "ODR_CAP_MIB=39500 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
    b86_launch = LAUNCHES["b86-gpt1b-cap39500-offload-085-figures-fix"]
    assert trained(b89, 14) and LAUNCHES[b89] == b86_launch.replace("ODR_CAP_MIB=39500 ", expandable)


def test_a_pasted_traceback_beside_its_launch_line_gets_the_fix_the_whole_log_gets(tmp_path):
    """b81's traceback alone, with its launch command as --config: the memory model counts the parameters the log
    no longer prints, and the fix is the whole log's, --micro-batch-size 2 (b85 trained with it). Before, the
    signature's unsized lines (offload fraction 0.5) were printed."""
    from tests.memory.recorded import LAUNCHES

    run = "b81-gpt1b-cap39500-first-step-oom"
    lines = gzip.decompress((CALIBRATION / "out-of-memory" / f"{run}.log.gz").read_bytes()).decode().splitlines()
    start = next(i for i, line in enumerate(lines) if line.endswith("Traceback (most recent call last):"))
    pasted, launch = tmp_path / "pasted.log", tmp_path / "launch.sh"
    pasted.write_text("\n".join(lines[start : start + 80]) + "\n")
    launch.write_text(LAUNCHES[run] + "\n")
    [finding] = diagnose([str(pasted)], [str(launch)]).findings
    assert "number of parameters" not in pasted.read_text()
    assert finding.overrides == ["--micro-batch-size 2"]
    assert "875,466,752 parameters per GPU (the memory model's count for the config)" in finding.facts["estimate_basis"]


def test_a_pasted_traceback_alone_says_its_offload_fraction_is_not_sized():
    from offloaddoctor.api import diagnose_text

    traceback = (
        "Traceback (most recent call last):\n"
        '  File "/workspace/Megatron-LM/megatron/training/training.py", line 1000, in train\n'
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.08 GiB. GPU 0 has a total capacity of 79.11 "
        "GiB of which 1.98 GiB is free. Of the allocated memory 74.31 GiB is allocated by PyTorch, and 169.10 MiB is "
        "reserved by PyTorch but unallocated."
    )
    [finding] = diagnose_text(traceback).findings
    assert "--optimizer-offload-fraction 0.5" in finding.overrides
    assert finding.fix_memory.startswith("The fix's offload fraction, 0.5, is a starting point, not sized for this run")
    assert "_no_parameter_count" not in finding.facts


def test_a_resumed_runs_first_step_holds_its_moments_as_the_gpu_showed():
    """b96 saved n16's GPT at iteration 2; b97 resumed from it under a 43,000 MiB limit and ran out of memory in its
    first iteration's forward/backward with 41.59 GiB allocated, more than a fresh run's whole first step (n16:
    39,708 MiB): the optimizer's state came with the checkpoint. Its report does not say the OOM came before Adam's
    moments existed; the same log without the load line does."""
    from offloaddoctor.api import diagnose_text

    b97 = CALIBRATION / "out-of-memory" / "b97-gpt1b-no-distopt-resumed-cap43000-oom.log.gz"
    text = gzip.decompress(b97.read_bytes()).decode()
    assert "successfully loaded checkpoint from /tmp/ckpt-b96" in text and "iteration        3/" not in text
    [finding] = diagnose([str(b97)]).findings
    assert "before_any_iteration_line" not in finding.facts
    assert finding.facts["allocated_bytes"] > 39_708 * 2**20
    unloaded = "\n".join(line for line in text.splitlines() if "successfully loaded checkpoint" not in line)
    assert "before_any_iteration_line" in diagnose_text(unloaded).findings[0].facts


def test_an_fp16_runs_offloading_fix_as_printed_trains_and_stopped_without_its_fp32_gradients():
    """b98-b100 (one H100 under b81's 39,500 MiB limit, planned in benchmarks/build_oom_plan.json): n16's GPT in fp16
    ran out of memory in iteration 2. Its fix from the message's figures turns on the precision-aware optimizer, and
    its OptimizerConfig line says fp16, so the fix takes precision-aware-fp16-gradients' fp32 gradients: run as
    printed (b99) it trained 14 iterations; without that line, as printed before (b100), it stopped at its first step
    on clip_grads.py's assert, which diagnose names."""
    from offloaddoctor.api import diagnose_text
    from tests.memory.recorded import LAUNCHES, trained

    b98 = CALIBRATION / "out-of-memory" / "b98-gpt1b-fp16-cap39500-oom.log.gz"
    [figures] = diagnose_text(_without_its_arguments_block(b98)).findings
    assert figures.overrides == [
        "export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
        "--optimizer-cpu-offload",
        "--optimizer-offload-fraction 0.05",
        "--use-precision-aware-optimizer",
        "--recompute-granularity selective",
        "--accumulate-allreduce-grads-in-fp32",
    ]
    assert "`--accumulate-allreduce-grads-in-fp32` added: without it the run would stop" in figures.fix_note
    printed, before = "b99-gpt1b-fp16-cap39500-figures-fix-advised", "b100-gpt1b-fp16-cap39500-figures-fix-before"
    assert trained(printed, 14) and all(line in LAUNCHES[printed] for line in figures.overrides[1:])
    assert "--accumulate-allreduce-grads-in-fp32" not in LAUNCHES[before]
    assert all(line in LAUNCHES[before] for line in figures.overrides[1:-1])
    [stopped] = diagnose([str(CALIBRATION / "refused" / f"{before}.log.gz")]).findings
    assert stopped.id == "precision-aware-fp16-gradients" and stopped.overrides == [
        "--accumulate-allreduce-grads-in-fp32"
    ]
