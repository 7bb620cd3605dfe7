"""OOM advice with numbers, the slowdown's expected range, and `diagnose --baseline`."""

from __future__ import annotations

import functools
import gzip
import re
import shlex
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from offloaddoctor.advice.slowdown import expected_slowdown
from offloaddoctor.api import diagnose, diagnose_text
from offloaddoctor.cli import app

from tests.conftest import FIXTURES, RUNNER

FAMILY = FIXTURES / "compare-family"
OOM = (
    "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
    "79.18 GiB of which 512.00 MiB is free. Including non-PyTorch memory, this process has 78.66 GiB memory in use. "
    "Of the allocated memory 77.90 GiB is allocated by PyTorch, and 200.00 MiB is reserved by PyTorch but unallocated."
)
PARAMS = " > number of parameters on (tensor, pipeline) model parallel rank (0, 0): 7000000000\n"
# 7B parameters over DP 8, a quarter of the optimizer offloaded: the partial-offload OOM the advice works on.
OFFLOAD_025_DP8 = {
    "optimizer.optimizer_cpu_offload": True,
    "optimizer.optimizer_offload_fraction": 0.25,
    "optimizer.use_distributed_optimizer": True,
    "data_parallel_size": 8,
}


def test_oom_advice_says_which_fraction_frees_enough():
    finding = diagnose_text(PARAMS + OOM, OFFLOAD_025_DP8).findings[0]
    assert finding.id == "oom-partial-optimizer-offload"
    facts = finding.facts
    state = 7_000_000_000 * 12 / 8
    assert facts["optimizer_state_estimate_bytes"] == int(state)
    assert facts["shortfall_bytes"] == 2 * 2**30 - 512 * 2**20
    # 0.25 + 1.5 GiB / 9.78 GiB = 0.41 → next 0.05 step
    assert facts["offload_fraction_needed"] == 0.45
    assert "data-parallel size 8" in facts["estimate_basis"]
    assert facts["expected_slowdown"].startswith("~1.4x (0.47B GPT, H100) to ~2.5x")


def test_oom_advice_for_a_moe_run_quotes_the_measured_moe_offloading_costs():
    """A MoE's CPU Adam grows with all its parameters, its compute with the active ones: the dense 0.47B GPT's
    curve is not quoted for it (tests/advice/test_change_costs_on_gpu.py holds the MoE curve to its runs)."""
    moe = diagnose_text(PARAMS + OOM, {**OFFLOAD_025_DP8, "model.num_moe_experts": 64}).findings[0]
    assert moe.facts["offload_fraction_needed"] == 0.45
    assert moe.facts["expected_slowdown"].startswith("~2.5x (Qwen3-30B-A3B, the CPU-offloading guide) to ~8.6x")
    assert "0.47B GPT" not in moe.facts["expected_slowdown"]


def test_oom_advice_is_honest_when_offload_cannot_be_enough():
    config = {"optimizer.optimizer_cpu_offload": True, "optimizer.optimizer_offload_fraction": 0.9}
    facts = (
        diagnose_text(
            " > number of parameters on (tensor, pipeline) model parallel rank (0, 0): 100000000\n" + OOM, config
        )
        .findings[0]
        .facts
    )
    assert str(facts["offload_fraction_needed"]).startswith("more than 1.0")
    assert "unknown: not divided" in facts["estimate_basis"]


def test_no_advice_without_a_parameter_count_and_fragmentation_keeps_its_free_fix_first():
    assert (
        "offload_fraction_needed"
        not in diagnose_text(
            OOM, {"optimizer.optimizer_cpu_offload": True, "optimizer.optimizer_offload_fraction": 0.25}
        )
        .findings[0]
        .facts
    )
    fragmented = OOM.replace("200.00 MiB is reserved", "6.00 GiB is reserved")
    # 5B parameters: their 12 B of state, 56 GiB, fit in the 77.9 GiB PyTorch had (7B's 78 GiB would not: sharded over
    # a data-parallel size the log does not give, and no fraction is sized from it)
    finding = diagnose_text(PARAMS.replace("7000000000", "5000000000") + fragmented).findings[0]
    # issue 27: expandable segments first (zero cost), then the capacity fix the numbers size
    assert finding.id == "oom-fragmentation" and "offload_fraction_needed" in finding.facts
    assert finding.overrides[0] == "export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"


@pytest.mark.parametrize(("fraction", "low", "high"), [(0.25, 1.21, 1.9), (1.0, 2.07, 4.2), (0.5, 1.42, 2.6667)])
def test_expected_slowdown_interpolates_both_measured_curves(fraction, low, high):
    numbers = [float(x) for x in re.findall(r"~(\d+\.\d)x", expected_slowdown(fraction))]
    assert numbers == [round(low, 1), round(high, 1)]


def scaled(tmp_path, factor: float):
    text = (FAMILY / "opt100.log").read_text()
    text = re.sub(
        r"(elapsed time per iteration \(ms\): )([\d.]+)",
        lambda m: f"{m.group(1)}{float(m.group(2)) * factor:.1f}",
        text,
    )
    text = re.sub(
        r"(throughput per GPU \(TFLOP/s/GPU\): )([\d.]+)",
        lambda m: f"{m.group(1)}{float(m.group(2)) / factor:.1f}",
        text,
    )
    path = tmp_path / "slow.log"
    path.write_text(text)
    return str(path)


def test_baseline_measures_the_slowdown(tmp_path):
    fine = diagnose([str(FAMILY / "opt100.log")], baseline=str(FAMILY / "baseline.log"))
    assert fine.findings == [] and fine.run_facts["slowdown_ratio"] == pytest.approx(834.9 / 402.6, abs=1e-3)
    slow = diagnose([scaled(tmp_path, 2.0)], baseline=str(FAMILY / "baseline.log"))
    finding = slow.findings[0]
    assert finding.id == "optimizer-offload-slowdown"
    assert finding.facts["slowdown_ratio"] == pytest.approx(2 * 834.9 / 402.6, abs=0.01)
    assert finding.facts["overlap_cpu_optimizer_d2h_h2d"] is False
    assert "at fraction 1" in finding.facts["expected_slowdown"]


def test_baseline_overrules_the_throughput_heuristic(tmp_path):
    slow_but_expected = scaled(tmp_path, 1.3)  # 88 TFLOP/s/GPU: the heuristic alone fires
    assert [f.id for f in diagnose([slow_but_expected]).findings] == ["optimizer-offload-slowdown"]
    assert diagnose([slow_but_expected], baseline=str(FAMILY / "baseline.log")).findings == []


def test_bad_baselines_are_one_line_errors(tmp_path):
    empty = tmp_path / "empty.log"
    empty.write_text("no iterations here\n")
    for baseline, fragment in [
        (str(tmp_path / "missing.log"), "no such file"),
        (str(empty), "no steady-state iteration time"),
    ]:
        result = RUNNER.invoke(app, ["diagnose", str(FAMILY / "opt100.log"), "--baseline", baseline])
        assert result.exit_code == 2 and fragment in result.stderr, result.stderr


def test_the_fix_uses_the_estimated_fraction():
    finding = diagnose_text(PARAMS + OOM, OFFLOAD_025_DP8).findings[0]
    assert "optimizer.optimizer_offload_fraction=0.45" in finding.overrides
    short = diagnose_text(
        " > number of parameters on (tensor, pipeline) model parallel rank (0, 0): 100000000\n" + OOM,
        {"optimizer.optimizer_cpu_offload": True, "optimizer.optimizer_offload_fraction": 0.9},
    )
    assert "optimizer.optimizer_offload_fraction=1" in short.findings[0].overrides


def test_every_computed_offload_fraction_follows_the_one_step(monkeypatch):
    """OOM advice and `estimate`'s smallest fraction round to config.derived.OFFLOAD_FRACTION_STEP (0.05), not a
    copy of it; the fix template's raise (0.25) is another number with its own name."""
    from offloaddoctor.advice.changes import smallest_offload_fraction
    from offloaddoctor.config import derived
    from offloaddoctor.memory import estimate

    from tests.memory.test_memory_model import MINIMAL, _shape

    assert diagnose_text(PARAMS + OOM, OFFLOAD_025_DP8).findings[0].facts["offload_fraction_needed"] == 0.45
    shape = _shape(*MINIMAL, "model.bf16=true", "optimizer.use_distributed_optimizer=true")
    budget = estimate(shape).peak_allocated_bytes * 0.97  # 3 % short: a fraction of the state frees it
    assert smallest_offload_fraction(shape, budget, manual_gc=True) == 0.75
    monkeypatch.setattr(derived, "OFFLOAD_FRACTION_STEP", 0.2)
    assert diagnose_text(PARAMS + OOM, OFFLOAD_025_DP8).findings[0].facts["offload_fraction_needed"] == 0.6
    assert smallest_offload_fraction(shape, budget, manual_gc=True) == 0.8
    assert derived.OFFLOAD_FRACTION_RAISE == 0.25


def test_the_fix_takes_the_needed_fraction_as_a_number_not_from_the_facts_sentence(monkeypatch):
    """The fix note read the fraction back out of the fact's English ("more than 1.0 (1.13): ..."): reworded, the
    note broke. It is computed as a number now, and both the sentence and the note are rendered from it."""
    from offloaddoctor.advice import fix_numbers

    config = {"optimizer.optimizer_cpu_offload": True, "optimizer.optimizer_offload_fraction": 0.9}
    log = " > number of parameters on (tensor, pipeline) model parallel rank (0, 0): 100000000\n" + OOM
    before = diagnose_text(log, config).findings[0]
    monkeypatch.setattr(fix_numbers, "_needed_fraction_fact", lambda *_: "offloading cannot free enough")
    after = diagnose_text(log, config).findings[0]
    assert after.facts["offload_fraction_needed"] == "offloading cannot free enough"
    assert after.fix_note == before.fix_note and re.search(r"a fraction of \d+\.\d\d\)", after.fix_note)
    assert not any(key.startswith("_") for key in after.facts)  # the number is carried, never shown
    assert fix_numbers.needed_fraction(0.41) == 0.45 and fix_numbers.needed_fraction(0.001) == 0.05
    assert fix_numbers.needed_fraction(1.234) == 1.234


@settings(max_examples=40, deadline=None)
@given(
    data_parallel=st.sampled_from([1, 2, 4, 8]),
    micro_batches=st.integers(1, 12),
    micro_batch=st.integers(2, 96),
    budget_gib=st.sampled_from([1, 30, 1000]),
)
def test_a_smaller_micro_batch_divides_the_global_batch_over_the_data_parallel_ranks(
    data_parallel, micro_batches, micro_batch, budget_gib
):
    """Megatron asserts that the global batch divides into micro-batch x DP (num_microbatches_calculator.py): e31's
    87 -> 43 at global batch 348 over DP 4 would have been refused; 29 ran (e69). Of the sizes that divide it, the
    largest that fits (the fewest extra micro-batches, the cheapest cut), else the smallest."""
    from offloaddoctor.advice.changes import _smaller_micro_batch
    from offloaddoctor.memory import estimate
    from offloaddoctor.memory.fit import fits

    base = _small_shape().with_changes(
        data_parallel=data_parallel,
        micro_batch_size=micro_batch,
        global_batch_size=micro_batch * data_parallel * micro_batches,
    )
    budget = budget_gib * 2**30
    change = _smaller_micro_batch(base, budget)
    assert change is not None
    smaller = change.shape.micro_batch_size
    assert smaller < micro_batch
    assert base.global_batch_size % (smaller * data_parallel) == 0
    assert change.overrides == (f"train.micro_batch_size={smaller}",)
    dividing = [m for m in range(smaller + 1, micro_batch) if (micro_batch * micro_batches) % m == 0]
    assert not any(fits(estimate(base.with_changes(micro_batch_size=m)), budget) for m in dividing)
    assert fits(estimate(change.shape), budget) or smaller == 1  # when none fits: the smallest


@functools.cache
def _small_shape():
    """n16's shape (a 0.87B GPT recorded on an H100): the estimate of each candidate is cheap."""
    from tests.conftest import estimate_run

    return estimate_run([str(FIXTURES / "memory-calibration" / "n16-gpt1b-base.log.gz")]).estimate.shape


def test_an_oom_without_the_allocators_figures_names_the_estimate_command_for_its_own_log(tmp_path):
    """NCCL's allocation failure gives no GPU size: the model's peak, and `estimate` on the very log (quoted so it
    pastes), or LOG where the log came on standard input."""
    recorded = FIXTURES / "memory-calibration" / "out-of-memory" / "e76-moe8-ep2-top2-mbs56-does-not-fit.log.gz"
    copy = tmp_path / "a run's log.gz"
    copy.write_bytes(recorded.read_bytes())
    [finding] = [f for f in diagnose([str(copy)]).findings if f.id == "oom-capacity"]
    assert f"`offloaddoctor estimate {shlex.quote(str(copy))} --gpu NAME`" in finding.facts["fit_verdict"]
    # no config to estimate from (NCCL's and cuBLAS's lines alone): nothing claimed
    [bare] = [
        f for f in diagnose([str(FIXTURES / "excerpt-oom-nccl-cublas" / "job.log")]).findings if f.id == "oom-capacity"
    ]
    assert "fit_verdict" not in bare.facts and "estimated_peak_allocated_bytes" not in bare.facts
    assert "not sized" not in bare.fix_note


def test_an_oom_without_figures_read_from_standard_input_names_log_in_the_estimate_command():
    recorded = FIXTURES / "memory-calibration" / "out-of-memory" / "e76-moe8-ep2-top2-mbs56-does-not-fit.log.gz"
    result = RUNNER.invoke(app, ["diagnose", "-", "--format", "json"], input=gzip.decompress(recorded.read_bytes()))
    assert "`offloaddoctor estimate LOG --gpu NAME`" in result.output


def test_a_mostly_frozen_model_gets_the_optimizer_state_of_what_trains_and_no_optimizer_fix():
    """Held-out FlagScale LoRA run (batch 5): 8.87B parameters, 38.8M in the gradient buckets. The fix offloaded
    5 % of '99.18 GiB' of optimizer state that was the frozen base's: its state is 444 MiB. With the tokenizer's
    vocabulary read from its padded-vocab line the memory model sees the whole step at 66,560 tokens: no single change
    fits it, and the fix leads with what frees the most, saying so (the repository's bisect ran 8,448 tokens)."""
    log = FIXTURES / "held-out" / "flagscale-megatron-lora-long-seq-oom-capacity" / "job.log"
    [finding] = diagnose([str(log)]).findings
    assert finding.id == "oom-capacity"
    assert finding.facts["optimizer_state_estimate_bytes"] == pytest.approx(12 * 38797312, rel=0.01)
    assert finding.facts["trained_parameters"].startswith("38,797,312 parameters in the gradient buckets, 0.44%")
    assert (
        "38,797,312 trained parameters per GPU (of 8,874,364,928, the log's count)" in finding.facts["estimate_basis"]
    )
    assert not any("optimizer" in line or "precision" in line for line in finding.overrides)
    # FlagScale's dialect (its arguments block has FlagScale's own arguments), and no recompute: FlagScale refuses it
    # in a PEFT run (flagscale-peft-recompute); what frees the most after it is activation offloading
    assert finding.overrides == ["++train.system.cpu_offloading_num_layers=31"]
    assert finding.fix_sentences[0].startswith("No single change the memory model tries makes the whole step fit")
    assert "Shorten what sizes the activations (sequence length, micro-batch)" in finding.fix_sentences[0]


FROZEN_RUNS = FIXTURES / "memory-calibration"


def test_a_recorded_oom_of_a_mostly_frozen_gpt_gets_the_recompute_that_trained_not_the_offloading_that_did_not():
    """b10-b12 (H100, fixtures/memory-calibration; planned in benchmarks/build_oom_plan.json): a 0.89B GPT at 8,192
    tokens with all but its layer norms frozen (135,168 of 888,049,664 parameters in its gradient buckets). Its OOM's
    fix is the memory model's with that share, selective recompute: b11 ran it and trained (17,123 MiB, estimated
    19,776). The optimizer lines the fix gave before, at their most (b12: the distributed optimizer, all of it
    offloaded), ran out of memory as b10 did."""
    oom = FROZEN_RUNS / "out-of-memory" / "b10-gpt1b-frozen-s8k-oom.log.gz"
    [finding] = diagnose([str(oom)]).findings
    assert finding.id == "oom-capacity"
    assert finding.facts["trained_parameters"].startswith("135,168 parameters in the gradient buckets, 0.02%")
    assert finding.overrides == ["--recompute-granularity selective", "--recompute-modules core_attn"]
    trained = (FROZEN_RUNS / "runs.tsv").read_text()
    assert "b11-gpt1b-frozen-s8k-sel-advised" in trained and "ODR_TRAIN_ONLY=layernorm" in trained
    advised = next(line for line in trained.splitlines() if line.startswith("b11-"))
    assert "--recompute-granularity selective" in advised  # selective's modules default to core_attn
    assert "--optimizer-cpu-offload" in (FROZEN_RUNS / "out-of-memory" / "runs.tsv").read_text()
    [offloaded] = diagnose([str(FROZEN_RUNS / "out-of-memory" / "b12-gpt1b-frozen-s8k-offload-all.log.gz")]).findings
    assert offloaded.id == "oom-capacity"
    assert offloaded.facts["allocated_bytes"] == finding.facts["allocated_bytes"]  # 74.97 GiB, as without it


def test_an_oom_whose_model_reads_the_tokenizers_vocabulary_gets_the_smaller_micro_batch_its_sibling_ran():
    """Held-out megatron-legacy-gpt2-mbs10 (batch 6): a 124M GPT at micro-batch 10 on a 15.77 GiB card. Its fix was
    to offload 75 % of the optimizer (a 1.7x-3.4x step); with the vocabulary read, the memory model's cheapest change
    is micro-batch 5. The same script's micro-batch 4 run, in the same repository folder, peaked at 7,161.89 MB
    (SOURCE.md); the model says 7,360 MiB for it (+2.8 %)."""
    log = FIXTURES / "held-out" / "megatron-legacy-gpt2-mbs10-oom-cross-entropy-16gb" / "job.log"
    [finding] = diagnose([str(log)]).findings
    assert finding.overrides == ["--micro-batch-size 5"]
    from offloaddoctor.api import estimate

    four = estimate([str(log)], ["train.micro_batch_size=4"], gpu_memory="15.77GiB").estimate
    assert abs(four.peak_allocated_bytes / 2**20 / 7161.89 - 1) < 0.05
    assert "max: 7161.890625 MB" in (log.parent / "SOURCE.md").read_text()


def test_the_micro_batch_fix_for_that_oom_trained_on_the_gpu_under_its_cards_budget():
    """b13-b15 (H100, PyTorch capped at the 12,805 MiB `estimate --gpu-memory 15.77GiB` gives; planned in
    benchmarks/build_oom_plan.json): the held-out run's shape on the wheel route ran out of memory at micro-batch 10
    asking the same 1.92 GiB; diagnose's fix for it, micro-batch 5, trained at 8,723 MiB (the model: 8,710)."""
    oom = FROZEN_RUNS / "out-of-memory" / "b13-gpt2s-mbs10-cap16-oom.log.gz"
    [finding] = diagnose([str(oom)]).findings
    assert finding.id == "oom-capacity" and finding.overrides == ["--micro-batch-size 5"]
    trained = next(row for row in (FROZEN_RUNS / "runs.tsv").read_text().splitlines() if row.startswith("b14-"))
    assert "ODR_CAP_MIB=12805" in trained and "--micro-batch-size 5 " in trained


def _launch_commands() -> dict[str, str]:
    """Each recorded run's launch command (the last column of runs.tsv), the runs that stopped included."""
    tables = (
        FROZEN_RUNS / "runs.tsv",
        FROZEN_RUNS / "refused" / "runs.tsv",
        FROZEN_RUNS / "out-of-memory" / "runs.tsv",
        FROZEN_RUNS / "partly-trained" / "runs.tsv",
    )
    return {row.split("\t")[0]: row.split("\t")[-1] for tsv in tables for row in tsv.read_text().splitlines()}


def _without_port(command: str) -> str:
    return re.sub(r"--master-port \d+ ", "", command)


# Megatron-LM's defaults: a command that sets one says what one without it does
_DEFAULT_SETTINGS = {"--tensor-model-parallel-size 1", "--pipeline-model-parallel-size 1"}


def _settings(command: str) -> list[str]:
    """A launch command as its flags with their values, in any order (Megatron-LM reads them so). The recorder's
    ODR_CAP_MIB is the GPU the run was given (an H100's limit on an H200), not a setting of the run: b69 was refused
    under an H100's limit and its fix trained on a whole H200 (b72)."""
    command = re.sub(r"\bODR_CAP_MIB=\d+ ", "", _without_port(command))
    return sorted(set(re.split(r" (?=--[a-z])", command)) - _DEFAULT_SETTINGS)


def _measured_peak_mib(name: str) -> float:
    with gzip.open(FROZEN_RUNS / f"{name}.log.gz", "rt") as log:
        text = log.read()
    return max(float(m) for m in re.findall(r"max allocated: ([\d.]+)", text))


def test_where_no_single_change_fits_the_one_said_to_free_the_most_did_and_none_fit():
    """b18-b22 (an H200; planned in benchmarks/build_oom_plan.json): a 0.88B GPT at 4,096 tokens capped at what a 16 GiB
    card lets PyTorch reserve ran out of memory (b18). diagnose: no single change fits, full recompute frees the most.
    Each single change the model tries (Transformer Engine aside: it does not install there), run without the cap:
    every peak was over b18's 12.74 GiB limit, and full recompute's the lowest (19,032 MiB; the model said 19,032)."""
    [finding] = diagnose([str(FROZEN_RUNS / "out-of-memory" / "b18-gpt1b-s4k-cap16-oom.log.gz")]).findings
    assert finding.id == "oom-capacity"
    assert finding.fix_sentences[0].startswith("No single change the memory model tries makes the whole step fit")
    assert finding.overrides[0] == "--recompute-granularity full"
    assert finding.facts["change_that_helps_most"].startswith(
        "full recompute (uniform, one layer per chunk): peak 19,032"
    )
    limit_mib = finding.facts["allowed_bytes"] / 2**20
    peaks = {
        change: _measured_peak_mib(name)
        for change, name in [
            ("full recompute", "b19-gpt1b-s4k-full"),
            ("selective recompute", "b20-gpt1b-s4k-selective"),
            ("optimizer offloading at fraction 1", "b21-gpt1b-s4k-offload-all"),
        ]
    }
    assert min(peaks.values()) > limit_mib
    assert min(peaks, key=peaks.get) == "full recompute"
    assert _measured_peak_mib("b22-gpt1b-s4k") > max(peaks.values())  # each change freed memory from the base


def _with_fix(command: str, lines: list[str]) -> str:
    """A Megatron-LM launch command with diagnose's printed lines applied: `--flag value` sets the flag (replacing
    its value where it is there), `remove --flag from the launch command` drops it and its value."""
    for line in lines:
        removed = re.fullmatch(r"remove (--[\w-]+) from the launch command", line)
        flag, _, value = (removed.group(1) if removed else line).partition(" ")
        present = re.search(rf" {flag}(?: (?!--)\S+)?(?= |$)", command)
        new = "" if removed else f" {flag} {value}".rstrip()
        command = command.replace(present.group(0), new) if present else command + new
    return command


def _findings_of_refusal(name: str):
    """diagnose's findings for a recorded refusal's log (refused/, or beside the runs that trained past it)."""
    log = FROZEN_RUNS / "refused" / f"{name}.log.gz"
    return diagnose([str(log if log.exists() else FROZEN_RUNS / f"{name}.log.gz")]).findings


# Each start-up refusal recorded on the GPU (or a config the run trained past), the run that took the lines printed
# for its log, and the signature that printed them.
REFUSALS_AND_THE_RUNS_OF_THEIR_FIX = [
    (
        "b23-tiny-offload-no-distopt-refused",
        "b24-tiny-offload-distopt-advised",
        "optimizer-offload-requires-distributed-optimizer",
    ),
    ("b25-tiny-moe-pad-no-factor-refused", "b26-tiny-moe-pad-factor-advised", "moe-pad-requires-capacity-factor"),
    (
        "b27-tiny-moe-factor-sinkhorn-refused",
        "b28-tiny-moe-factor-aux-loss-advised",
        "moe-capacity-factor-load-balancing",
    ),
    ("b29-gpt6l-pp2-vpp2-refused", "b30-gpt6l-pp2-advised", "vpp-layer-divisibility"),
    ("b16-moe8-ep4-on-2-gpus-refused", "b17-moe8-ep2-advised", "expert-grid-divides-world"),
    ("n125-gpt1b-fine-grained-local", "b31-gpt1b-fine-grained-removed-advised", "fine-grained-offload-requires-te"),
    (
        "b40-gpt1b-s4k-full-cpu-offload-refused",
        "b41-gpt1b-s4k-full-offload-off-cap32-advised",
        "recompute-cpu-offload",
    ),
    ("b43-tiny-cpu-offload-all-layers-refused", "b44-tiny-cpu-offload-off-advised", "cpu-offload-num-layers"),
    ("b45-gpt6l-pp2-cpu-offload-refused", "b46-gpt6l-pp2-optimizer-offload-advised", "pp-cpu-offload"),
    (
        "b47-tiny-offload-no-precision-aware-refused",
        "b48-tiny-offload-precision-aware-advised",
        "optimizer-offload-precision-aware",
    ),
    (
        "b50-tiny-cuda-graph-cpu-offload-refused",
        "b51-tiny-cuda-graph-offload-off-advised",
        "cuda-graph-cpu-offload",
    ),
    # Transformer Engine not installed, as the logs say: the fixes the run can take (fix.instead)
    ("b54-tiny-tp2-sp-local-refused", "b55-tiny-tp2-sp-off-advised", "local-impl-sequence-parallel"),
    (
        "b56-tiny-te-cuda-graph-expandable-refused",
        "b59-tiny-local-cuda-graph-expandable",
        "cuda-graph-expandable-segments",
    ),
    ("b60-tiny-moe-tp2-no-sp-refused", "b61-tiny-moe-ep2-advised", "moe-tp-requires-sequence-parallel"),
    ("b67-tiny-moe-tp2-sp-local-refused", "b61-tiny-moe-ep2-advised", "local-impl-sequence-parallel"),
    ("b62-tiny-te-cuda-graph-refused", "b63-tiny-local-cuda-graph-advised", "cuda-graph-requires-te"),
    ("b68-moe8-tp2-no-sp-mbs28-refused", "b70-moe8-ep2-mbs28-advised-cap", "moe-tp-requires-sequence-parallel"),
    ("b69-moe8-tp2-no-sp-mbs56-refused", "b72-moe8-ep2-mbs56-advised", "moe-tp-requires-sequence-parallel"),
    ("b75-moe8-ep4-on-2-gpus-mbs56-refused", "b72-moe8-ep2-mbs56-advised", "expert-grid-divides-world"),
    ("b76-moe8-tp2-sp-local-mbs56-refused", "b72-moe8-ep2-mbs56-advised", "local-impl-sequence-parallel"),
    # not refused: megatron-core trains with any fraction, and the config alone shows it
    ("b33-gpt-offload-fraction-1.5", "b49-gpt-offload-fraction-0.5-advised", "optimizer-offload-fraction-range"),
]
# Those whose printed fix raises the modelled peak: the report gives its memory figure (advice/fix_memory.py).
FIX_RAISES_THE_PEAK = {
    "b16-moe8-ep4-on-2-gpus-refused",
    "b43-tiny-cpu-offload-all-layers-refused",
    "b54-tiny-tp2-sp-local-refused",
    "b60-tiny-moe-tp2-no-sp-refused",
    "b67-tiny-moe-tp2-sp-local-refused",
    "b33-gpt-offload-fraction-1.5",
    "b68-moe8-tp2-no-sp-mbs28-refused",
    "b69-moe8-tp2-no-sp-mbs56-refused",
    "b75-moe8-ep4-on-2-gpus-mbs56-refused",
    "b76-moe8-tp2-sp-local-mbs56-refused",
}


@pytest.mark.parametrize(
    ("refused", "advised", "signature"),
    REFUSALS_AND_THE_RUNS_OF_THEIR_FIX,
)
def test_a_start_up_refusal_recorded_on_the_gpu_trained_with_the_fix_printed_for_its_log(refused, advised, signature):
    """b16-b49 (H200s and an H100, megatron-core 0.19.0; planned in benchmarks/build_oom_plan.json): each refusal's
    own log, diagnosed; every line the report prints, applied to its launch command, gives the command of a run that
    trained."""
    findings = _findings_of_refusal(refused)
    assert findings[0].id == signature and findings[0].config.verdict != "contradicted"
    commands = _launch_commands()
    fixed = _with_fix(commands[refused], [line for finding in findings for line in finding.overrides])
    assert _settings(fixed) == _settings(commands[advised])
    assert _measured_peak_mib(advised) > 0  # it trained: Megatron reported memory after its iterations


def _figure_mib(finding) -> float:
    return finding.facts["fixed_peak_allocated_bytes"] / 2**20


def test_the_memory_figure_printed_with_a_refusals_fix_held_on_the_gpu():
    """b68-b72 (two H200s, megatron-core 0.19.0, no Transformer Engine; planned in benchmarks/build_oom_plan.json): a
    MoE refused at TP 2 without sequence parallelism. Its fix, TP 1 with EP 2, puts the dense layers whole on each GPU;
    the report gives the memory model's peak for that layout and the GPUs it fits. At micro-batch 28: 40,573 MiB, fits
    an H100; the lines trained under an H100's limit (b70). At 56: 77,142 MiB, does not fit an H100, fits an H200; the
    lines ran out of memory under the H100's limit (b71) and trained on a whole H200 (b72). Two other refusals whose fix
    is that layout (b75, b76) print the same figure."""
    commands = _launch_commands()
    said = {}
    for refused in ("b68-moe8-tp2-no-sp-mbs28-refused", "b69-moe8-tp2-no-sp-mbs56-refused"):
        [finding] = diagnose([str(FROZEN_RUNS / "refused" / f"{refused}.log.gz")]).findings
        assert finding.fix_sentences[-1].startswith("The memory model puts the run with this fix at ")
        said[refused] = finding
    # b75 (EP 4 on two GPUs) and b76 (TP 2 with sequence parallelism, local): other refusals, b69's layout as the fix
    for refused in ("b75-moe8-ep4-on-2-gpus-mbs56-refused", "b76-moe8-tp2-sp-local-mbs56-refused"):
        [finding] = diagnose([str(FROZEN_RUNS / "refused" / f"{refused}.log.gz")]).findings
        b69 = said["b69-moe8-tp2-no-sp-mbs56-refused"]
        assert finding.fix_memory == b69.fix_memory.replace(
            f"{b69.facts['configured_peak_allocated_bytes'] / 2**20:,.0f}",
            f"{finding.facts['configured_peak_allocated_bytes'] / 2**20:,.0f}",
        )
    fits = said["b68-moe8-tp2-no-sp-mbs28-refused"]
    assert "H100-80GB" in fits.facts["fixed_fits_gpus"]
    assert abs(_measured_peak_mib("b70-moe8-ep2-mbs28-advised-cap") / _figure_mib(fits) - 1) < 0.02
    short = said["b69-moe8-tp2-no-sp-mbs56-refused"]
    assert "does not fit an A100-40GB, H100-80GB or A100-80GB" in short.fix_memory
    assert "H200" in short.facts["fixed_fits_gpus"] and "H100-80GB" not in short.facts["fixed_fits_gpus"]
    assert abs(_measured_peak_mib("b72-moe8-ep2-mbs56-advised") / _figure_mib(short) - 1) < 0.02
    ran_out = "ODR_CAP_MIB=77178 " + _with_fix(
        commands["b69-moe8-tp2-no-sp-mbs56-refused"].removeprefix("ODR_CAP_MIB=77178 "), short.overrides
    )
    assert _settings(commands["b71-moe8-ep2-mbs56-advised-cap"]) == _settings(ran_out)
    assert (FROZEN_RUNS / "out-of-memory" / "b71-moe8-ep2-mbs56-advised-cap.log.gz").exists()


@pytest.mark.parametrize(
    ("refused", "advised"),
    [
        (refused, advised)
        for refused, advised, _ in REFUSALS_AND_THE_RUNS_OF_THEIR_FIX
        if refused in FIX_RAISES_THE_PEAK
    ],
)
def test_every_memory_figure_printed_with_a_fix_is_near_the_peak_of_the_run_that_took_it(refused, advised):
    """Each recorded log whose printed fix raises the modelled peak, and the run that trained with those lines: the
    measured peak within 5 % of the figure (0.1-1.1 % above it; b16's 9 GiB MoE 3.6 % above)."""
    findings = _findings_of_refusal(refused)
    [weighed] = [f for f in findings if "fixed_peak_allocated_bytes" in f.facts]
    assert weighed.facts["fixed_peak_allocated_bytes"] > weighed.facts["configured_peak_allocated_bytes"]
    assert abs(_measured_peak_mib(advised) / _figure_mib(weighed) - 1) < 0.05


def test_a_fix_the_figure_calls_tight_on_a_gpu_is_not_said_to_fit_it():
    """e30 (four H200s): a MoE at TP 2 and EP 4 without sequence parallelism, refused. Its fix, TP 1, is e23's command,
    which ran out of memory on four H200s: the figure (122,382 MiB) says tight on an H200, not fits."""
    [finding] = diagnose([str(FROZEN_RUNS / "refused" / "e30-moe8-ep4-top2-mbs92-tp2-h200.log.gz")]).findings
    assert "is tight on an H200" in finding.fix_memory and "H200" not in finding.facts["fixed_fits_gpus"]
    commands = _launch_commands()
    fixed = _with_fix(commands["e30-moe8-ep4-top2-mbs92-tp2-h200"], finding.overrides)
    assert _settings(fixed.replace(" --expert-tensor-parallel-size 1", "")) == _settings(
        commands["e23-moe8-ep4-top2-mbs92-h200"]
    )
    assert (FROZEN_RUNS / "out-of-memory" / "e23-moe8-ep4-top2-mbs92-h200.log.gz").exists()


def test_a_fix_that_lowers_the_peak_or_a_log_without_the_model_gets_no_figure():
    """pp-cpu-offload's fix (optimizer offloading instead, b45) lowers the peak: no risk to the relaunch, no sentence.
    b47 stopped before Megatron printed its arguments: nothing to weigh."""
    for log in ("b45-gpt6l-pp2-cpu-offload-refused", "b47-tiny-offload-no-precision-aware-refused"):
        for finding in diagnose([str(FROZEN_RUNS / "refused" / f"{log}.log.gz")]).findings:
            assert finding.fix_memory == "" and "fixed_peak_allocated_bytes" not in finding.facts


def _steady_iteration_ms(name: str) -> float:
    with gzip.open(FROZEN_RUNS / f"{name}.log.gz", "rt") as log:
        times = [float(m) for m in re.findall(r"elapsed time per iteration \(ms\): ([\d.]+)", log.read())]
    return sorted(times[2:])[len(times[2:]) // 2]  # the median after the first two (start-up, first offload)


def test_the_slowdown_fix_printed_for_a_slow_offloading_run_made_it_faster_at_the_peak_it_said():
    """b52-b53 (two H200s, megatron-core 0.19.0): a 3.35B GPT at DP 2 offloading half its optimizer stepped in 2.5 s
    at 68 TFLOP/s/GPU. Every line diagnose printed for its log (fraction 0.25, the copies overlapped, OMP_NUM_THREADS
    at the host's 32 cores over its 2 GPUs) gave a 0.98 s step, at the peak the finding named for 0.25."""
    findings = diagnose([str(FROZEN_RUNS / "b52-gpt3b-dp2-f050-slow.log.gz")]).findings
    assert {f.id for f in findings} == {"optimizer-offload-slowdown", "optimizer-offload-one-omp-thread"}
    lines = [line for finding in findings for line in finding.overrides]
    flags = [line for line in lines if line.startswith("--")]
    assert flags == ["--optimizer-offload-fraction 0.25", "--overlap-cpu-optimizer-d2h-h2d"]
    assert "export OMP_NUM_THREADS=$(( $(nproc) / $(nvidia-smi -L | wc -l) ))" in lines
    commands = _launch_commands()
    fixed = "OMP_NUM_THREADS=16 " + _with_fix(commands["b52-gpt3b-dp2-f050-slow"], flags)
    assert _settings(fixed) == _settings(commands["b53-gpt3b-dp2-f025-overlap-advised"])
    assert (
        _steady_iteration_ms("b53-gpt3b-dp2-f025-overlap-advised") < _steady_iteration_ms("b52-gpt3b-dp2-f050-slow") / 2
    )
    [slowdown] = [f for f in findings if f.id == "optimizer-offload-slowdown"]
    said = float(re.search(r"([\d,]+) MiB at 0\.25", str(slowdown.facts)).group(1).replace(",", ""))
    assert abs(_measured_peak_mib("b53-gpt3b-dp2-f025-overlap-advised") / said - 1) < 0.02


def test_a_fix_that_would_meet_the_next_refusal_gives_way_to_the_one_that_settles_both():
    """b40-b42 (an H200 under a 32 GiB card's budget, 29,425 MiB, without Transformer Engine): full recompute with
    activation offloading was refused. Its own fix, recompute off, would still meet cpu-offload-requires-te; the report
    now prints activation offloading off for both, which keeps recompute: b41 trained at 19,032 MiB. The lines printed
    before (recompute removed, offloading off), run as printed on the same budget, ran out of memory (b42)."""
    findings = diagnose([str(FROZEN_RUNS / "refused" / "b40-gpt1b-s4k-full-cpu-offload-refused.log.gz")]).findings
    assert [f.id for f in findings] == ["recompute-cpu-offload", "cpu-offload-requires-te"]
    assert findings[0].overrides == ["--cpu-offloading-num-layers 0"] and findings[1].overrides == []
    assert "would still be refused by cpu-offload-requires-te" in findings[0].fix_sentences[0]
    assert _measured_peak_mib("b41-gpt1b-s4k-full-offload-off-cap32-advised") < 29425
    before = _with_fix(
        _launch_commands()["b40-gpt1b-s4k-full-cpu-offload-refused"],
        ["remove --recompute-granularity from the launch command", "--cpu-offloading-num-layers 0"],
    )
    ran_out = (FROZEN_RUNS / "out-of-memory" / "runs.tsv").read_text().splitlines()
    row = next(r.split("\t") for r in ran_out if r.startswith("b42-"))
    assert _without_port(row[-1]) == _without_port(before)


def test_layer_level_activation_offloading_without_te_trained_with_the_fix_printed_for_its_log():
    """fixtures/cpu-offload-requires-te (an H100, no Transformer Engine): its printed line, applied to the recorded
    command in its SOURCE.md, is b32's command, which trained."""
    case = FIXTURES / "cpu-offload-requires-te"
    [finding] = diagnose([str(case / "job.log")]).findings
    assert finding.id == "cpu-offload-requires-te" and finding.config.verdict == "confirmed"
    recorded = next(line for line in (case / "SOURCE.md").read_text().splitlines() if line.startswith("cmd: "))
    advised = next(row for row in (FROZEN_RUNS / "runs.tsv").read_text().splitlines() if row.startswith("b32-"))
    fixed = _with_fix(recorded.removeprefix("cmd: "), finding.overrides)
    assert _without_port(fixed) == _without_port(advised.split("\t")[-1])
    assert _measured_peak_mib("b32-gpt8l-cpu-offload-layers-0-advised") > 0


def test_a_27b_gpt_that_ran_out_of_memory_trained_with_what_diagnose_and_check_print(tmp_path):
    """fixtures/offload-sweep a-gpt27b-s4096 (an H100, benchmarks/advice_runs.json): its base ran out of memory; the
    line diagnose prints for that log and the one `check --gpu` prints for its launch are selective recompute, and
    that run (-1) trained."""
    from offloaddoctor.api import check

    sweep = FIXTURES / "offload-sweep"
    [finding] = diagnose([str(sweep / "a-gpt27b-s4096-0.log.gz")]).findings
    assert finding.id == "oom-capacity"
    assert finding.overrides == ["--recompute-granularity selective", "--recompute-modules core_attn"]
    rows = {r.split("\t")[0]: r.split("\t") for r in (sweep / "runs.tsv").read_text().splitlines()}
    launch = tmp_path / "run.sh"
    launch.write_text(rows["a-gpt27b-s4096-0"][-1] + "\n")
    [refused] = check([str(launch)], gpu="H100-80GB").violations
    assert refused.id == "memory-exceeds-capacity" and refused.overrides == finding.overrides
    trained = rows["a-gpt27b-s4096-1"]
    assert trained[1] == "ran" and "--recompute-granularity selective" in trained[-1]


def test_the_fix_printed_today_for_an_offloading_gpts_oom_trained():
    """b39 (an H100, planned in benchmarks/build_oom_plan.json): out-of-memory/n133 (a 3.35B GPT offloading all of its
    optimizer, micro-batch 3) gets selective recompute; n133's command with those lines trained, within 0.3 % of the
    model's peak."""
    [finding] = diagnose(
        [str(FROZEN_RUNS / "out-of-memory" / "n133-gpt3b-f100-mbs3-precision-aware-off-does-not-fit.log.gz")]
    ).findings
    assert finding.id == "oom-capacity"
    rows = _launch_commands()
    fixed = _with_fix(rows["n133-gpt3b-f100-mbs3-precision-aware-off-does-not-fit"], finding.overrides)
    assert _without_port(fixed) == _without_port(rows["b39-gpt3b-f100-mbs3-selective-advised"])
    assert _measured_peak_mib("b39-gpt3b-f100-mbs3-selective-advised") > 0


def test_a_pipelines_last_stage_out_of_memory_on_its_logits_trained_with_the_change_printed_at_the_peak_it_said():
    """b73-b74 (two H200s under an A10G's budget, 18,647 MiB; planned in benchmarks/build_oom_plan.json): a 256,000-token
    vocabulary at PP 2 ran out of memory on rank 1, the last stage, asking 7.81 GiB for its fp32 logits (held-out
    megatron-lm-pp8-a10g-last-stage-logits-oom, at PP 2). The change diagnose printed, micro-batch 4 -> 1, trained
    under the same budget, within 1 % of the peak the finding said (14,839 MiB; 14,869 measured)."""
    [finding] = diagnose([str(FROZEN_RUNS / "out-of-memory" / "b73-gpt-v256k-pp2-mbs4-a10g-oom.log.gz")]).findings
    assert (finding.id, finding.ranks, finding.overrides) == ("oom-capacity", [1], ["--micro-batch-size 1"])
    rows = _launch_commands()
    fixed = _with_fix(rows["b73-gpt-v256k-pp2-mbs4-a10g-oom"], finding.overrides)
    assert _settings(fixed) == _settings(rows["b74-gpt-v256k-pp2-mbs1-a10g-advised"])
    assert rows["b74-gpt-v256k-pp2-mbs1-a10g-advised"].startswith("ODR_CAP_MIB=18647 ")
    cheapest = finding.facts["cheapest_change_that_fits"]
    said = float(re.search(r"^micro-batch size 4 -> 1 [^:]*: peak ([\d,]+) MiB;", cheapest)[1].replace(",", ""))
    assert abs(_measured_peak_mib("b74-gpt-v256k-pp2-mbs1-a10g-advised") / said - 1) < 0.01


def test_a_state_estimate_over_what_pytorch_had_sizes_no_fraction_where_the_data_parallel_size_is_not_known():
    """Held-out batch 18's V100 pipeline OOM: 12 B x 3.8B parameters is 42.54 GiB "per GPU" on a 31.73 GiB card, with
    24.42 GiB allocated. Its DeepSpeed ZeRO shards the state over a data-parallel size the log cut; the figure is said
    to be no GPU's and no fraction is sized from it. Where the size is known, the fraction is given as before."""
    fragmented = OOM.replace("200.00 MiB is reserved", "6.00 GiB is reserved")
    [finding] = diagnose_text(PARAMS + fragmented).findings
    assert "offload_fraction_needed" not in finding.facts
    assert finding.facts["optimizer_state_estimate_note"].startswith("more than PyTorch had allocated (77.90 GiB)")
    known = {"optimizer.use_distributed_optimizer": True, "data_parallel_size": 8}
    assert "offload_fraction_needed" in diagnose_text(PARAMS + fragmented, known).findings[0].facts


def test_offloading_with_adams_l2_weight_decay_was_refused_and_the_printed_setting_trained():
    """b101-b102 (an H100, megatron-core 0.19.0; planned in benchmarks/build_oom_plan.json): b24's launch, which
    trained, with OptimizerConfig.decoupled_weight_decay off (Megatron-LM has no flag for it: ODR_DECOUPLED_WEIGHT_DECAY
    stands in for a script that sets it) was refused at the optimizer's build; the setting printed for its log,
    confirmed from the OptimizerConfig line the log prints, trained."""
    [finding] = _findings_of_refusal("b101-tiny-offload-l2-weight-decay-refused")
    assert finding.id == "optimizer-offload-decoupled-weight-decay" and finding.config.verdict == "confirmed"
    assert finding.overrides == [
        "set decoupled_weight_decay=True where the script builds OptimizerConfig (Megatron-LM has no flag for it)"
    ]
    commands = _launch_commands()
    refused = commands["b101-tiny-offload-l2-weight-decay-refused"]
    advised = commands["b102-tiny-offload-decoupled-weight-decay-advised"]
    assert refused.startswith("ODR_DECOUPLED_WEIGHT_DECAY=0 ") and advised.startswith("ODR_DECOUPLED_WEIGHT_DECAY=1 ")
    assert _settings(refused.split(" ", 1)[1]) == _settings(advised.split(" ", 1)[1])
    assert _settings(advised.split(" ", 1)[1]) == _settings(commands["b24-tiny-offload-distopt-advised"])
    assert _measured_peak_mib("b102-tiny-offload-decoupled-weight-decay-advised") > 0


def _losses(path: Path) -> list[str]:
    with gzip.open(path, "rt") as log:
        return re.findall(r"lm loss: (\S+) \|", log.read())


def test_an_fp32_model_offloaded_below_one_on_a_core_that_builds_it_is_found_though_it_trained():
    """b103-b105 (an H100 and an H200, megatron-core 0.19.0 with NVIDIA/Megatron-LM#6982 applied; planned in
    benchmarks/build_oom_plan.json): an fp32 model offloading half its optimizer trained, but its loss left that of the
    same launch without offloading (n112, same seed and data) at iteration 2, because the fp32 parameters kept on the
    GPU never stepped. Offloading all of it (b104), or half with the gradients as .grad (b105), matched n112's losses
    to every printed digit. Only the partly trained run's log gets the finding."""
    partly = FROZEN_RUNS / "partly-trained" / "b103-gpt1b-fp32-f050-pr6982.log.gz"
    without = _losses(FROZEN_RUNS / "n112-gpt1b-fp32-mbs4.log.gz")
    assert _losses(partly)[0] == without[0] and _losses(partly)[1:3] != without[1:3]
    for name in ("b104-gpt1b-fp32-f100-pr6982", "b105-gpt1b-fp32-f050-pr6982-precision-aware-off"):
        assert _losses(FROZEN_RUNS / f"{name}.log.gz") == without
        assert not diagnose([str(FROZEN_RUNS / f"{name}.log.gz")]).findings
    [finding] = diagnose([str(partly)]).findings
    assert finding.id == "optimizer-offload-fp32-gpu-params-not-stepped" and finding.config.verdict == "confirmed"
    assert finding.overrides == ["--bf16"]
    assert "optimizer_offload_fraction 1.0" in finding.fix_sentences[0] + " ".join(finding.fix_sentences[1:])
    # refused at the optimizer's build on megatron-core 0.19.0 as it is: the fp32 model's signature, not this one
    assert [f.id for f in _findings_of_refusal("n104-gpt1b-fp32-f050")] == ["optimizer-offload-fp32-model"]


def _moved(path: Path) -> str:
    with gzip.open(path, "rt") as log:
        return re.search(r"ODR_KEEP_FP32: (\d+ of \d+) fp32-kept parameters moved", log.read()).group(1)


def test_a_bf16_models_fp32_parameters_kept_on_the_gpu_do_not_step_on_a_core_that_builds_it():
    """b106-b112 (an H100, megatron-core 0.19.0 and the same with NVIDIA/Megatron-LM#6982; planned in
    benchmarks/build_oom_plan.json): a bf16 GPT with its 18 layer-norm parameters kept in fp32. Offloading was refused
    at the optimizer's build as it is (optimizer-offload-fp32-params); on the #6982 core it trained, and the fix's
    "offload the whole optimizer" moved all 18, where 0.05 moved none (as many as without offloading: all)."""
    [finding] = _findings_of_refusal("b106-tiny-bf16-fp32-norms-f005-refused")
    assert finding.id == "optimizer-offload-fp32-params" and finding.config.verdict == "confirmed"
    assert "optimizer_offload_fraction 1.0" in finding.fix_sentences[0]
    assert _moved(FROZEN_RUNS / "partly-trained" / "b110-tiny-bf16-fp32-norms-f005-pr6982.log.gz") == "0 of 18"
    assert _moved(FROZEN_RUNS / "b111-tiny-bf16-fp32-norms-f100-pr6982.log.gz") == "18 of 18"
    assert _moved(FROZEN_RUNS / "b112-tiny-bf16-fp32-norms-no-offload.log.gz") == "18 of 18"
    commands = _launch_commands()
    assert "PYTHONPATH=/tmp/site-6982" in commands["b110-tiny-bf16-fp32-norms-f005-pr6982"]
    assert _settings(commands["b111-tiny-bf16-fp32-norms-f100-pr6982"].split("python3 ", 1)[1]) == _settings(
        commands["b110-tiny-bf16-fp32-norms-f005-pr6982"]
        .split("python3 ", 1)[1]
        .replace("fraction 0.05", "fraction 1.0")
    )


def test_the_max_split_size_an_old_torch_is_given_let_the_real_fragmented_runs_train():
    """b86, b89, b113-b116, n80, n81 (an H100, megatron-core 0.19.0; planned in benchmarks/build_oom_plan.json): two
    real fragmentation OOMs that expandable segments fixed, run with the setting an OOM of torch 2.0 or older gets
    instead. max_split_size_mb:512 ran b86's launch two iterations further and out of memory; 128, the value printed,
    trained it, and n80's trained with either."""
    commands = _launch_commands()
    base = commands["b86-gpt1b-cap39500-offload-085-figures-fix"]
    tried = commands["b113-gpt1b-cap39500-offload-085-max-split"]
    assert "PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:512 " in tried and "PYTORCH_CUDA_ALLOC_CONF" not in base
    assert _settings(tried.split("python3 ", 1)[1]) == _settings(base.split("python3 ", 1)[1])

    def iterations(path: Path) -> int:
        with gzip.open(path, "rt") as log:
            return len(re.findall(r"\] iteration +\d+/", log.read()))

    out_of_memory = FROZEN_RUNS / "out-of-memory"
    assert iterations(out_of_memory / "b113-gpt1b-cap39500-offload-085-max-split.log.gz") > iterations(
        out_of_memory / "b86-gpt1b-cap39500-offload-085-figures-fix.log.gz"
    )
    assert iterations(FROZEN_RUNS / "b89-gpt1b-cap39500-offload-085-expandable.log.gz") == 14
    assert iterations(FROZEN_RUNS / "b114-gpt1b-cap39500-offload-085-max-split-128.log.gz") == 14  # 128 held
    for run in ("b115-gpt-s16k-mbs1-max-split-512", "b116-gpt-s16k-mbs1-max-split-128"):  # n80, fixed by either
        assert iterations(FROZEN_RUNS / f"{run}.log.gz") == 3
    assert iterations(out_of_memory / "n80-gpt-s16k-mbs1-advised.log.gz") == 0
    [finding] = diagnose([str(FIXTURES / "held-out" / "megatron-gpt2-large-v100-old-wording" / "job.log")]).findings
    assert finding.overrides == ["export PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:128"]
    assert "b114, b116" in finding.fix_sentences[0] and "b113" in finding.fix_sentences[0]
