"""A Megatron-LM arguments block prints every argument its release takes: a fix's flag it does not list is one that
Megatron-LM refuses as an unrecognized argument, so the report leaves it out and the memory model offers what the
release has (config/dialect.py flags_it_lacks)."""

from __future__ import annotations

import functools
import gzip

import pytest

from offloaddoctor.api import diagnose
from offloaddoctor.config.dialect import MEGATRON_LM, flags_it_lacks, render_changes, render_lines
from offloaddoctor.config.from_log import LogConfigCollector
from offloaddoctor.config.keys import KNOWN_KEYS
from tests.conftest import FIXTURES, builtin_catalog

HELD_OUT = FIXTURES / "held-out"
# Keys whose Megatron-LM flag megatron-core 0.19.0 does not take, and why a fix may still print it or never does.
NOT_IN_0_19 = {
    "model.cpu_offloading": "older releases' switch, printed only where a fix sets no layer count",
    "optimizer.offload_optimizer_states": "Megatron-LM PR 2811's flag, not merged",
    "dataset.persistent_workers": "no fix sets it",
    "model.share_embeddings_and_output_weights": "no fix sets it",
    "model.bias_activation_fusion": "no fix sets it",
}
# Keys that are no setting of the launch: what the run printed, the memory model's verdicts, derived values.
NOT_SETTINGS = ("runtime.", "memory.", "parallel.", "launcher.", "allocator.", "env.", "peft", "mixed_precision")
NOT_SETTINGS_KEYS = {"model.layers_per_pipeline_rank", "model.offload_modules_refused"}


def _collected(lines) -> LogConfigCollector:
    collector = LogConfigCollector("job.log")
    for number, line in enumerate(lines, start=1):
        collector.feed(line.rstrip("\n"), number)
    return collector


@functools.cache
def _megatron_core_0_19() -> frozenset[str]:
    with gzip.open(FIXTURES / "memory-calibration" / "n16-gpt1b-base.log.gz", "rt") as log:
        printed = _collected(log).printed_arguments
    assert printed is not None and len(printed) > 800
    return printed


def _sample(key) -> object:
    return True if key.kind == "bool" else 2 if key.kind == "int" else 0.5 if key.kind == "number" else "x"


@pytest.mark.parametrize(
    "key",
    [
        k
        for k in KNOWN_KEYS
        if not k.canonical.startswith(NOT_SETTINGS) and k.canonical not in NOT_SETTINGS_KEYS | NOT_IN_0_19.keys()
    ],
    ids=lambda k: k.canonical,
)
def test_every_flag_the_megatron_lm_dialect_prints_is_one_megatron_core_0_19_takes(key):
    value = key.choices[0] if key.choices else _sample(key)
    lines = render_changes([(key.canonical, value)], MEGATRON_LM)
    assert not flags_it_lacks(lines, _megatron_core_0_19()), lines


def test_the_flags_megatron_core_0_19_lacks_are_set_by_no_signatures_fix_or_said_why():
    from offloaddoctor.config.dialect import parse_fix_line

    set_by_fixes = {
        key for s in builtin_catalog().signatures for line in s.fix.overrides for key, _ in parse_fix_line(line)
    }
    assert not {key for key, why in NOT_IN_0_19.items() if why == "no fix sets it"} & set_by_fixes


def test_only_a_block_that_reached_its_end_line_says_what_the_release_takes():
    block = ["------------------------ arguments ------------------------", "  micro_batch_size ........ 4"]
    assert _collected(block).printed_arguments is None  # cut short: what it did not print may come after
    ended = _collected([*block, "-------------------- end of arguments ---------------------"])
    assert ended.printed_arguments == frozenset({"micro_batch_size"})


def test_negated_flags_and_other_destinations_are_found_under_the_name_the_block_prints():
    printed = frozenset({"add_bias_linear", "masked_softmax_fusion", "nccl_ub"})
    assert flags_it_lacks(["--disable-bias-linear", "--no-masked-softmax-fusion", "--use-nccl-ub"], printed) == []
    assert flags_it_lacks(["--optimizer-cpu-offload", "export X=1", "remove --x from the launch command"], printed) == [
        "--optimizer-cpu-offload"
    ]
    assert flags_it_lacks(["--optimizer-cpu-offload"], None) == []  # no block: nothing known


def test_an_old_megatron_lm_is_not_given_optimizer_offloading_it_does_not_have():
    """Held-out: a Megatron-LM whose arguments block has neither the distributed optimizer nor optimizer offloading
    had been given both; one with the distributed optimizer but no offloading gets the memory model's change it has."""
    [oldest] = diagnose([str(HELD_OUT / "megatron-lm-gpt-305k-vocab-forward-oom-11gb-gpu" / "job.log")]).findings
    assert oldest.overrides == [] and "`--optimizer-cpu-offload`" in oldest.fix_sentences[0]
    assert not any("offload fraction" in sentence for sentence in oldest.fix_sentences)
    [older] = diagnose([str(HELD_OUT / "megatron-lm-simulated-pp8-fp32-adam-state-oom" / "job.log")]).findings
    assert older.overrides == ["--recompute-granularity full", "--recompute-method uniform", "--recompute-num-layers 1"]
    assert "has no" not in " ".join(older.fix_sentences)


def test_estimate_of_the_same_log_suggests_only_changes_its_megatron_lm_takes():
    from offloaddoctor.api import estimate

    log = HELD_OUT / "megatron-lm-simulated-pp8-fp32-adam-state-oom" / "job.log"
    report = estimate([], gpu="H100-80GB", log_paths=[str(log)])
    assert report.suggestions
    with open(log) as text:
        printed = _collected(text).printed_arguments
    for suggestion in report.suggestions:
        assert not flags_it_lacks(render_lines(list(suggestion.overrides), MEGATRON_LM), printed), suggestion
    [said] = [note for note in report.notes if "are not suggested" in note]
    assert "--recompute-modules" in said and "does not list them" in said


def test_only_the_lines_it_lacks_are_left_out_and_the_rest_of_the_fix_stays():
    """A Megatron-LM with the distributed optimizer and no optimizer offloading (the block printed below), given
    the generic capacity fix: the distributed optimizer's line and change stay, offloading's go."""
    from offloaddoctor.api import diagnose_text

    block = [
        "------------------------ arguments ------------------------",
        "  micro_batch_size ................................ 4",
        "  use_distributed_optimizer ....................... False",
        "  recompute_granularity ........................... None",
        "-------------------- end of arguments ---------------------",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB. GPU 0 has a total capacity of 79.18 GiB"
        " of which 80.19 MiB is free. Including non-PyTorch memory, this process has 79.09 GiB memory in use. Of the"
        " allocated memory 78.10 GiB is allocated by PyTorch, and 0 bytes is reserved by PyTorch but unallocated.",
    ]
    [finding] = diagnose_text("\n".join(block)).findings
    assert "--use-distributed-optimizer" in finding.overrides
    assert not any(line.startswith(("--optimizer-cpu-offload", "--use-precision-aware")) for line in finding.overrides)
    assert ("optimizer.use_distributed_optimizer", True) in finding.changes
    assert not any(key == "optimizer.optimizer_cpu_offload" for key, _ in finding.changes)
