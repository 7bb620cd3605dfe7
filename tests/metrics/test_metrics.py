"""Run metrics: every line kind in the formats Megatron-LM and Megatron-Bridge releases print, the warm-up rule
at its edges, several ranks, restarts, and the `metrics` command's text, JSON and CSV."""

from __future__ import annotations

import csv
import gzip
import io
import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from offloaddoctor.cli import app
from offloaddoctor.metrics import collect_metrics, metrics_from_text, run_metrics
from offloaddoctor.metrics.iteration_lines import parse_iteration_line, parse_iteration_metrics
from offloaddoctor.metrics.layout import parse_layout_line
from offloaddoctor.metrics.memory_lines import parse_memory_report, parse_theoretical_memory
from offloaddoctor.metrics.model import ParameterCounts
from offloaddoctor.metrics.numbers import BRIDGE_REPORT_UNIT_BYTES, MIB, parse_number, to_mib
from offloaddoctor.metrics.parameter_lines import parameter_count, read_parameter_line, trainable_share
from offloaddoctor.metrics.summary import percentile
from offloaddoctor.render.metrics_csv import COLUMNS

from tests.conftest import FIXTURES, RUNNER
from tests.cli.test_cli import assert_one_line_error

BASELINE = FIXTURES / "clean-baseline" / "job.log"
OPT050 = FIXTURES / "clean-opt050" / "job.log"


def mlm_line(iteration: int, ms: float, loss: float = 9.5, total: int = 100, skipped: int = 0, nan: int = 0) -> str:
    """Megatron-LM core_v0.19 `training_log`, format strings copied from the source."""
    line = " [2026-11-22 10:50:38.665846]"
    line += " iteration {:8d}/{:8d} |".format(iteration, total)
    line += " consumed samples: {:12d} |".format(iteration * 32)
    line += " elapsed time per iteration (ms): {:.1f} |".format(ms)
    line += f" throughput per GPU (TFLOP/s/GPU): {100000 / ms:.1f} |"
    line += f" learning rate: {1e-4:.6E} |"
    line += f" global batch size: {32:5d} |"
    line += " {}: {:.6E} |".format("lm loss", loss)
    line += f" loss scale: {1.0:.1f} |"
    line += f" grad norm: {3.21:.3f} |"
    line += " number of skipped iterations: {:3d} |".format(skipped)
    line += " number of nan iterations: {:3d} |".format(nan)
    return line


def memory_line(
    rank: int, iteration: int, allocated: float, max_allocated: float, reserved: float, max_reserved: float
) -> str:
    """Megatron-LM `report_memory` as the H100 logs show it (values rounded to 2 decimals)."""
    return (
        f"[Rank {rank}] (after {iteration} iterations) memory (MB) | allocated: {allocated:.2f} | max allocated: "
        f"{max_allocated:.2f} | reserved: {reserved:.2f} | max reserved: {max_reserved:.2f}"
    )


def args_block(**values) -> str:
    lines = ["------------------------ arguments ------------------------"]
    for name, value in sorted(values.items()):
        lines.append(f"  {name} {'.' * max(1, 48 - len(name) - 3)} {value}")
    lines.append("-------------------- end of arguments ---------------------")
    return "\n".join(lines)


# ---- the two real H100 logs -------------------------------------------------------------------------------


def test_real_baseline_log_summary():
    summary = run_metrics(str(BASELINE)).summary
    assert summary.iterations_logged == 3 and summary.last_iteration == 10 and summary.train_iters == 10
    assert summary.steady_state_lines == 1  # only iteration 10 (6-10) lies wholly after warm-up
    assert summary.median_iteration_ms == 460.9 and summary.p90_iteration_ms == 460.9
    assert summary.median_tflops_per_gpu == 206.9
    assert summary.peak_allocated_mb == 13800.10 and summary.peak_reserved_mb == 14388.00
    assert summary.final_loss == pytest.approx(8.141713) and summary.final_loss_iteration == 10
    assert [i for i, _ in summary.loss_series] == [1, 5, 10]
    assert summary.skipped_iterations == 0 and summary.nan_iterations == 0
    assert summary.parameter_count == 470503424 and summary.total_parameters_billions == 0.47
    assert summary.theoretical_memory_mb == {"weight_and_optimizer": 8038.2, "activation": 2572.53, "total": 10610.73}
    assert summary.data_parallel_size == 1 and summary.world_size == 1
    assert summary.offload["optimizer_cpu_offload"] is False
    assert summary.offload["offload_optimizer_states"] is None
    assert summary.effective_offload_fraction == 0.0  # the printed fraction 1.0 is argparse's default


def test_real_offload_log_summary_and_its_difference_to_the_baseline():
    base, run = collect_metrics([str(BASELINE), str(OPT050)])
    s = run.summary
    assert s.median_iteration_ms == 820.7 and s.median_tflops_per_gpu == 116.2
    assert s.peak_allocated_mb == 10968.14 and s.peak_reserved_mb == 11194.00
    assert s.final_loss == pytest.approx(8.141771)
    assert s.offload == {
        "optimizer_cpu_offload": True,
        "optimizer_offload_fraction": 0.5,
        "overlap_cpu_optimizer_d2h_h2d": False,
        "use_precision_aware_optimizer": True,
        "offload_optimizer_states": None,
    }
    assert s.effective_offload_fraction == 0.5
    assert s.median_iteration_ms / base.summary.median_iteration_ms == pytest.approx(1.78, abs=0.01)
    assert base.summary.peak_allocated_mb - s.peak_allocated_mb == pytest.approx(2831.96)
    assert abs(s.final_loss - base.summary.final_loss) < 0.001


def test_real_log_records_per_iteration():
    run = run_metrics(str(BASELINE))
    first = run.iterations[0]
    assert (first.line, first.rank, first.iteration, first.elapsed_ms, first.lm_loss) == (1028, 0, 1, 1650.4, 10.79121)
    assert first.learning_rate == pytest.approx(9.779754e-05) and first.grad_norm == 4.096
    assert first.global_batch_size == 32 and first.extra == {"consumed samples": 32.0}
    assert [r.steady_state for r in run.iterations] == [False, False, True]
    assert [(m.iteration, m.allocated_mb, m.max_allocated_mb) for m in run.memory] == [
        (1, 8269.31, 10210.45),
        (5, 8269.31, 13800.10),
        (10, 8269.31, 13800.10),
    ]
    assert run.arguments["optimizer.optimizer_cpu_offload"] is False
    assert run.arguments["train.train_iters"] == 10
    assert list(run.parameters.per_model_parallel_rank) == [(("tensor", 0), ("gtp_remat", 0), ("pipeline", 0))]


# ---- iteration lines across versions ------------------------------------------------------------------------

OLD_MLM = (
    " iteration       20/     500 | consumed samples:          640 | elapsed time per iteration (ms): 1234.5 |"
    " learning rate: 1.000E-04 | global batch size:    32 | lm loss: 1.0E+01 | loss scale: 1.0 | grad norm: 3.1 |"
    " number of skipped iterations:   0 | number of nan iterations:   0 |"
)
BRIDGE = (
    " [2026-05-02 09:14:11] iteration      100/    1000 | consumed samples:        51200 | elapsed time per iteration"
    " (ms): 2210.7 | throughput per GPU (TFLOP/s/GPU): 388.2 | energy per GPU (J/iter/GPU): 1532.4 | power per GPU"
    " (W/GPU): 693.2 | learning rate: 2.999700E-04 | global batch size:   512 | lm loss: 2.345678E+00 | loss scale:"
    " 1.0 | grad norm: 0.412 | num zeros: 0 | params norm: 312.500 | number of skipped iterations:   0 |"
    " number of nan iterations:   0 |"
)
FP16_SKIPS = (
    "[rank7]:  iteration      300/   10000 | consumed samples:       153600 | elapsed time per iteration (ms): 812.3 |"
    " learning rate: 5.999999E-05 | global batch size:   512 | lm loss: 3.412000E+00 | loss scale: 65536.0 |"
    " grad norm: 1.250 | number of skipped iterations:   2 | number of nan iterations:   1 |"
)
DEEPSPEED = (
    " iteration       10/     100 | consumed samples:          320 | consumed tokens:       655360 | elapsed time per"
    " iteration (ms): 1500.2 | learning rate: 1.000E-04 | global batch size:    32 | lm loss: 9.876543E+00 |"
    " loss scale: 4096.0 | grad norm: 2.500 | actual seqlen:  2048 | number of skipped iterations:   0 |"
    " number of nan iterations:   0 | samples per second: 21.330 | TFLOPs: 123.45 |"
)


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            OLD_MLM,
            dict(
                iteration=20,
                train_iters=500,
                elapsed_ms=1234.5,
                tflops_per_gpu=None,
                learning_rate=1e-4,
                lm_loss=10.0,
                loss_scale=1.0,
                grad_norm=3.1,
                skipped_iterations=0,
                nan_iterations=0,
            ),
        ),
        (
            BRIDGE,
            dict(
                iteration=100,
                train_iters=1000,
                elapsed_ms=2210.7,
                tflops_per_gpu=388.2,
                learning_rate=2.9997e-4,
                lm_loss=2.345678,
                grad_norm=0.412,
                global_batch_size=512,
            ),
        ),
        (FP16_SKIPS, dict(iteration=300, loss_scale=65536.0, skipped_iterations=2, nan_iterations=1)),
        (DEEPSPEED, dict(iteration=10, elapsed_ms=1500.2, tflops_per_gpu=123.45, loss_scale=4096.0)),
        (mlm_line(7, 480.25, loss=8.5), dict(iteration=7, elapsed_ms=480.2, lm_loss=8.5, tflops_per_gpu=208.2)),
    ],
    ids=["megatron-lm-old", "bridge", "fp16-skips", "megatron-deepspeed", "megatron-lm-0.19"],
)
def test_iteration_line_versions(text, expected):
    record = metrics_from_text(text).iterations[0]
    for name, value in expected.items():
        assert getattr(record, name) == pytest.approx(value) if value is not None else getattr(record, name) is None, (
            name
        )


def test_iteration_line_keeps_every_other_field_and_the_rank_prefix():
    record = metrics_from_text(BRIDGE).iterations[0]
    assert record.extra["energy per gpu (j/iter/gpu)"] == 1532.4
    assert record.extra["params norm"] == 312.5 and record.extra["num zeros"] == 0
    assert metrics_from_text(FP16_SKIPS).iterations[0].rank == 7


def test_nan_loss_is_kept_but_not_the_final_loss():
    text = "\n".join([mlm_line(1, 900, loss=9.0), mlm_line(2, 500, loss=8.0).replace("8.000000E+00", "NAN")])
    run = metrics_from_text(text)
    assert math.isnan(run.iterations[1].lm_loss)
    assert (run.summary.final_loss, run.summary.final_loss_iteration) == (9.0, 1)


def test_validation_and_other_iteration_mentions_are_not_iteration_lines():
    text = "\n".join(
        [
            " validation loss at iteration 10 | lm loss value: 8.123456E+00 | lm loss PPL: 3.372E+03 | ",
            "Overwriting rerun_state_machine.current_iteration from -1 to 0...",
            "[before the start of training step] datetime: 2026-11-22 10:50:37.015497 elapsed time per iteration",
        ]
    )
    assert metrics_from_text(text).iterations == []


NEMO2 = FIXTURES / "held-out" / "nemo2-qwen3-30b-a3b-perf-script-healthy-slow" / "job.log"


def test_nemo2s_step_lines_are_iteration_lines_in_metrics_and_in_diagnose():
    """NeMo 2 prints `Training epoch 0, iteration 8/29 | … | reduced_train_loss: 10.22 | train_step_timing in s: 27.01
    | … | TFLOPS_per_GPU: 48.58` (held-out nemo2-qwen3-30b-a3b-…): no `elapsed time per iteration`, so neither
    `metrics` nor diagnose's run facts read them before, and an OOM after them was said to come before any."""
    from offloaddoctor.api import diagnose, diagnose_text
    from offloaddoctor.metrics.iteration_lines import iteration_found, speed_record

    line = next(text for text in NEMO2.read_text().splitlines() if "iteration 8/29" in text)
    record = parse_iteration_metrics(line, "x.log", 1, None, 0)
    assert (record.iteration, record.train_iters, record.global_batch_size) == (8, 29, 512)
    assert (record.elapsed_ms, record.tflops_per_gpu, record.lm_loss) == (27010.0, 48.58, 10.22)
    assert record.learning_rate == 5.389e-06 and record.extra["max_memory_allocated"] == 53930270720
    fast = speed_record(iteration_found(line), "x.log", 1, None, 0)
    assert (fast.elapsed_ms, fast.tflops_per_gpu) == (27010.0, 48.58)
    summary = metrics_from_text(NEMO2.read_text()).summary
    assert summary.steady_state_lines == 4
    # its step lines' peaks, in bytes: the run's peak memory (53930270720 B = 51,431.91 MiB)
    assert (round(summary.peak_allocated_mb, 2), summary.peak_reserved_mb) == (51431.91, 55004.0)
    assert diagnose([str(NEMO2)]).run_facts["median_iteration_ms"] == 26930.0
    oom = (
        '[rank0]:   File "/opt/megatron-lm/megatron/core/pipeline_parallel/schedules.py", line 500, in '
        "forward_backward_no_pipelining\n"
        "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity "
        "of 79.11 GiB of which 1.06 GiB is free."
    )
    after_steps = diagnose_text(line + "\n[rank0]: Traceback (most recent call last):\n" + oom).findings[0]
    assert "before_any_iteration_line" not in after_steps.facts
    assert (
        "before_any_iteration_line"
        in diagnose_text("[rank0]: Traceback (most recent call last):\n" + oom).findings[0].facts
    )


def test_the_parser_returns_iteration_planned_iterations_and_fields():
    iteration, planned, fields = parse_iteration_line(mlm_line(10, 460.9))
    assert iteration == 10 and planned > 0 and fields["elapsed time per iteration (ms)"] == 460.9


# ---- memory, parameter, theoretical-memory and layout lines --------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            "[Rank 0] (after 10 iterations) memory (MB) | allocated: 8269.31 | max allocated: 13800.10 | reserved: "
            "14388.00 | max reserved: 14388.00",
            (0, 10, 8269.31, 13800.10, 14388.0, 14388.0),
        ),
        (
            "[Rank 3] (after 2 iterations) memory (MB) | allocated: 8269.3134765625 | max allocated: 10210.4521484375"
            " | reserved: 10742.0 | max reserved: 10742.0",
            (3, 2, 8269.313, 10210.452, 10742.0, 10742.0),
        ),
        (
            "[rank2]: [Rank 2] (after 50 iterations) memory (MB) | allocated: 1.5E+04 | max allocated: 2.0E+04"
            " | reserved: 20480.0 | max reserved: 22528.0",
            (2, 50, 15000.0, 20000.0, 20480.0, 22528.0),
        ),
        (
            "[Rank 0] (after 10 iterations) memory (GB) | mem-allocated-gigabytes: 8.6712 | mem-active-gigabytes: 8.6712"
            " | mem-inactive-gigabytes: 0.52 | mem-reserved-gigabytes: 11.264 | mem-max-allocated-gigabytes: 14.47 |"
            " mem-max-active-gigabytes: 14.47 | mem-max-inactive-gigabytes: 2.1 | mem-max-reserved-gigabytes: 15.088 |"
            " mem-alloc-retires: 3 | mem-allocated-count: 1234",
            (0, 10, 8.6712e9 / MIB, 14.47e9 / MIB, 11.264e9 / MIB, 15.088e9 / MIB),
        ),
    ],
    ids=["megatron-lm-0.19", "megatron-lm-old-unrounded", "torchrun-prefix-scientific", "bridge-gb"],
)
def test_memory_report_versions(text, expected):
    report = metrics_from_text(text).memory[0]
    got = (
        report.rank,
        report.iteration,
        report.allocated_mb,
        report.max_allocated_mb,
        report.reserved_mb,
        report.max_reserved_mb,
    )
    assert got == pytest.approx(expected, abs=1e-3)


def test_bridge_memory_report_keeps_counts_as_counts():
    report = parse_memory_report(
        "[Rank 1] (after 4 iterations) memory (GB) | mem-max-inactive-gigabytes: 2.1 | mem-alloc-retires: 3 | "
        "mem-allocated-count: 1234",
        "x",
        1,
        None,
        0,
    )
    assert report.extra == {
        "max_inactive_mb": pytest.approx(2002.716, abs=1e-3),
        "alloc_retries": 3.0,
        "allocated_count": 1234.0,
    }
    assert report.allocated_mb is None


def test_not_memory_reports():
    for text in (
        "Activation memory footprint per transformer layer (precise, without SP): 272.0 MB",
        "[Rank 0] (after 1 iterations) memory (MB) | nothing here",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB.",
    ):
        assert parse_memory_report(text, "x", 1, None, 0) is None


@pytest.mark.parametrize(
    "text, key, value",
    [
        (
            " > number of parameters on (tensor, gtp_remat, pipeline) model parallel rank (0, 0, 0): 470503424",
            (("tensor", 0), ("gtp_remat", 0), ("pipeline", 0)),
            470503424,
        ),
        (
            " > number of parameters on (tensor, pipeline) model parallel rank (1, 3): 1731919872",
            (("tensor", 1), ("pipeline", 3)),
            1731919872,
        ),
        (
            "INFO:megatron.bridge.training.mlm_compat.model: > number of parameters on (tensor, pipeline) model parallel"
            " rank (0, 1): 1000",
            (("tensor", 0), ("pipeline", 1)),
            1000,
        ),
    ],
)
def test_per_rank_parameter_lines(text, key, value):
    counts = ParameterCounts()
    assert read_parameter_line(text, counts)
    assert counts.per_model_parallel_rank == {key: value}


def test_billions_parameter_lines_of_every_release():
    counts = ParameterCounts()
    for text in (
        "Number of parameters in transformer block in billions:  0.40",
        "Number of parameters in transformer layers in billions:  6.44",
        "Number of parameters in embedding layers in billions: 0.07",
        "Total number of parameters in billions: 0.47",
        "Number of parameters in most loaded shard in billions: 0.4683",
        "Number of dense and embedding parameters in billions: 3.10",
    ):
        assert read_parameter_line(text, counts), text
    assert counts.billions["Total number of parameters"] == 0.47
    assert counts.billions["Number of parameters in transformer layers"] == 6.44
    assert counts.billions["Number of dense and embedding parameters"] == 3.10
    assert parameter_count(counts) == 470_000_000  # no exact line: the rounded total
    assert not read_parameter_line("Number of buckets for gradient all-reduce / reduce-scatter: 1", counts)


# megatron-core's DDP bucket lines, from param_and_grad_buffer.py's format strings (0.16.1; 0.19.0 adds the count of
# parameters with extra main grads), with the counts of a real LoRA run (held-out flagscale-…-oom-capacity)
BUCKET_0161 = "Params for bucket 1 (38797312 elements, 38797312 padded size):"
BUCKET_0190 = "Params for bucket 2 (470503424 elements, 470503424 padded size, 0 param(s) with extra main_grads):"
LORA_RANK = " > number of parameters on (tensor, pipeline) model parallel rank (0, 0): 8874364928"


def test_gradient_bucket_lines_of_both_releases_add_up():
    counts = ParameterCounts()
    assert read_parameter_line(BUCKET_0161, counts) and read_parameter_line(BUCKET_0190, counts)
    assert counts.gradient_bucket_elements == 38797312 + 470503424
    assert not read_parameter_line("Params for bucket 1 (many elements):", counts)


def test_buckets_far_below_the_parameters_say_most_are_frozen_and_how_many_train():
    lora = ParameterCounts()
    for text in (LORA_RANK, BUCKET_0161):
        read_parameter_line(text, lora)
    assert trainable_share(lora) == pytest.approx(38797312 / 8874364928)
    whole = ParameterCounts()
    for text in (
        BUCKET_0190.replace("bucket 2", "bucket 1"),
        " > number of parameters on (tensor, pipeline) model parallel rank (0, 0): 470503424",
    ):
        read_parameter_line(text, whole)
    assert trainable_share(whole) is None  # every parameter trains
    assert trainable_share(ParameterCounts(per_model_parallel_rank={(("tensor", 0),): 10})) is None  # no bucket line


@given(
    stages=st.lists(st.integers(10**6, 10**10), min_size=1, max_size=8),
    tensor=st.integers(1, 8),
    printed=st.data(),
)
def test_a_model_that_trains_every_parameter_is_never_called_frozen_whichever_stages_printed_buckets(
    stages, tensor, printed
):
    """Each stage's buckets (printed at tensor rank 0) hold its whole count; a log may keep any non-empty subset of the
    stages' bucket lines (a rank's own file, a cut paste) and every rank's count line."""
    counts = ParameterCounts()
    for stage, count in enumerate(stages):
        for rank in range(tensor):
            counts.per_model_parallel_rank[(("tensor", rank), ("pipeline", stage))] = count
    kept = printed.draw(st.lists(st.sampled_from(range(len(stages))), min_size=1, unique=True))
    counts.gradient_bucket_elements = sum(stages[stage] for stage in kept)
    assert trainable_share(counts) is None


def test_parameter_count_adds_model_parallel_ranks_once_each():
    text = "\n".join(
        [
            f" > number of parameters on (tensor, pipeline) model parallel rank ({t}, {p}): {100 + p}"
            for t in range(2)
            for p in range(2)
        ]
        * 2  # printed twice (two sources) counts once
    )
    summary = metrics_from_text(text).summary
    assert summary.parameter_count == 2 * (100 + 101)
    assert summary.max_parameters_per_model_parallel_rank == 101


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            "Theoretical memory footprints: weight and optimizer=8038.20 MB, activation=2572.53 MB, total=10610.73 MB",
            {"weight_and_optimizer": 8038.2, "activation": 2572.53, "total": 10610.73},
        ),
        ("Theoretical memory footprints: weight and optimizer=22733.95 MB", {"weight_and_optimizer": 22733.95}),
        ("Theoretical memory footprints: weight and optimizer=2.00 GB", {"weight_and_optimizer": 2048.0}),
    ],
)
def test_theoretical_memory(text, expected):
    assert parse_theoretical_memory(text) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            "using world size: 8, data-parallel size: 2, context-parallel size: 1, hierarchical context-parallel sizes:"
            " None, tensor-model-parallel size: 2, pipeline-model-parallel size: 2 ",
            {
                "world_size": 8,
                "data_parallel_size": 2,
                "context_parallel_size": 1,
                "tensor_model_parallel_size": 2,
                "pipeline_model_parallel_size": 2,
            },
        ),
        (
            "using world size: 16, data-parallel-size: 8, tensor-model-parallel size: 2, pipeline-model-parallel size: 1 ",
            {
                "world_size": 16,
                "data_parallel_size": 8,
                "tensor_model_parallel_size": 2,
                "pipeline_model_parallel_size": 1,
            },
        ),
    ],
    ids=["megatron-lm-0.19", "megatron-lm-old"],
)
def test_layout_line(text, expected):
    assert parse_layout_line(text) == expected
    assert metrics_from_text(text).summary.data_parallel_size == expected["data_parallel_size"]


def test_data_parallel_size_derived_when_only_world_and_model_parallel_sizes_are_printed():
    text = args_block(world_size=16, tensor_model_parallel_size=2, pipeline_model_parallel_size=4)
    assert metrics_from_text(text).summary.data_parallel_size == 2


# ---- number parsers -----------------------------------------------------------------------------------------

finite = st.floats(allow_nan=False, allow_infinity=False, min_value=-1e30, max_value=1e30)


@given(finite, st.sampled_from([".6E", ".3E", ".1f", ".3f", ".2f", "g", ""]))
def test_parse_number_reads_every_format_megatron_uses(value, spec):
    printed = format(value, spec)
    assert parse_number(printed) == float(printed)


@given(st.integers(min_value=0, max_value=10**15))
def test_parse_number_reads_integer_counts(value):
    assert parse_number(f"{value:12d}") == value


@pytest.mark.parametrize("text", ["nan", "NAN", "inf", "-INF", "Infinity"])
def test_parse_number_non_finite(text):
    assert not math.isfinite(parse_number(text))


@pytest.mark.parametrize("text", ["", "1.2.3", "12MB", "E+01", "None", "0x10", "1e", "--1"])
def test_parse_number_rejects(text):
    assert parse_number(text) is None


@given(st.floats(min_value=0, max_value=1e7, allow_nan=False))
def test_megatron_mb_is_mib_and_gib_is_1024_mib(mib):
    assert to_mib(mib, "MB") == pytest.approx(mib)
    assert to_mib(mib, "MiB") == pytest.approx(mib)
    assert to_mib(mib / 1024, "GiB") == pytest.approx(mib)
    assert to_mib(mib / 1024, "GB") == pytest.approx(mib)  # theoretical-memory GB: bytes / 1024**3


@given(st.integers(min_value=0, max_value=200 * 10**9))
def test_bridge_gigabytes_are_decimal(byte_count):
    gigabytes = byte_count / 1e9
    assert to_mib(gigabytes, "gigabytes", BRIDGE_REPORT_UNIT_BYTES) == pytest.approx(byte_count / MIB)
    assert to_mib(gigabytes, "GB", BRIDGE_REPORT_UNIT_BYTES) == pytest.approx(byte_count / MIB)


def test_unknown_unit():
    assert to_mib(1.0, "furlongs") is None


@given(
    st.integers(min_value=0, max_value=4095),
    st.integers(min_value=1, max_value=10**7),
    st.lists(st.integers(min_value=0, max_value=80 * 1024**3), min_size=4, max_size=4),
)
def test_memory_report_round_trip(rank, iteration, byte_counts):
    mib = [b / MIB for b in byte_counts]
    report = parse_memory_report(memory_line(rank, iteration, *mib), "x", 1, None, 0)
    assert (report.rank, report.iteration) == (rank, iteration)
    got = [report.allocated_mb, report.max_allocated_mb, report.reserved_mb, report.max_reserved_mb]
    assert got == pytest.approx([round(m, 2) for m in mib], abs=0.006)


@given(st.integers(min_value=1, max_value=10**6), finite.filter(lambda x: x > 0), finite)
def test_iteration_line_round_trip(iteration, ms, loss):
    record = parse_iteration_metrics(mlm_line(iteration, ms, loss=loss), "x", 1, None, 0)
    assert record.iteration == iteration
    assert record.elapsed_ms == float(f"{ms:.1f}")
    assert record.lm_loss == float(f"{loss:.6E}")


# ---- warm-up ------------------------------------------------------------------------------------------------


def steady(iterations: list[int]) -> list[int]:
    text = "\n".join(mlm_line(i, 100.0 + i) for i in iterations)
    return [r.iteration for r in metrics_from_text(text).iterations if r.steady_state]


@pytest.mark.parametrize(
    "logged, kept",
    [
        ([1, 5, 10], [10]),  # Megatron-LM 0.19 with --log-interval 5: 2-5 includes warm-up
        ([5, 10, 15], [10, 15]),  # older releases: 6-10 is clean
        (list(range(1, 8)), [4, 5, 6, 7]),  # interval 1: from iteration 4 on
        ([2, 4, 6, 8], [6, 8]),  # 3-4 includes iteration 3
        ([3, 6], [6]),  # 4-6 starts right after warm-up
        ([1, 2, 3], []),  # stopped inside warm-up: no steady state at all
        ([10], []),  # a single line: the start of its interval is unknown
        ([1000, 1010, 1020], [1010, 1020]),  # resumed from a checkpoint: its first line goes
        ([5, 10, 10, 15], [10, 15]),  # a repeated line is not an interval
    ],
)
def test_warmup_exclusion(logged, kept):
    assert steady(logged) == kept


def test_summary_statistics_use_steady_state_lines_only():
    times = {1: 5000.0, 2: 900.0, 3: 700.0, 4: 400.0, 5: 410.0, 6: 420.0, 7: 800.0}
    run = metrics_from_text("\n".join(mlm_line(i, ms) for i, ms in times.items()))
    s = run.summary
    assert s.steady_state_lines == 4
    assert s.median_iteration_ms == 415.0
    assert s.mean_iteration_ms == pytest.approx((400 + 410 + 420 + 800) / 4)
    assert s.p90_iteration_ms == pytest.approx(420 + 0.7 * 380)
    assert s.iterations_logged == 7 and len(s.loss_series) == 7  # loss covers every iteration


def test_log_inside_warmup_has_no_timing_but_has_loss():
    s = metrics_from_text("\n".join(mlm_line(i, 1000.0, loss=10 - i) for i in (1, 2))).summary
    assert s.median_iteration_ms is None and s.mean_iteration_ms is None and s.median_tflops_per_gpu is None
    assert s.final_loss == 8.0


def test_percentile():
    assert percentile([5.0], 0.9) == 5.0
    assert percentile([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0], 0.9) == 10.0
    assert percentile([10.0, 0.0], 0.5) == 5.0


# ---- several ranks, restarts, directories -------------------------------------------------------------------


def test_multi_rank_torchrun_log():
    lines = [
        args_block(world_size=4, data_parallel_size=2, tensor_model_parallel_size=1, pipeline_model_parallel_size=2)
    ]
    for iteration, ms in ((1, 3000.0), (5, 600.0), (10, 500.0), (15, 520.0)):
        lines.append("[rank3]:" + mlm_line(iteration, ms, skipped=1 if iteration == 10 else 0))
        for rank, base in ((0, 9000.0), (2, 7000.0)):  # DP rank 0 of each pipeline stage reports memory
            lines.append(
                f"[rank{rank}]: "
                + memory_line(rank, iteration, base, base + iteration * 100, base + 2000, base + 2000 + iteration)
            )
    run = metrics_from_text("\n".join(lines))
    s = run.summary
    assert {r.rank for r in run.iterations} == {3}
    assert s.memory_ranks == [0, 2] and s.memory_reports == 8
    assert s.peak_allocated_mb == 10500.0 and s.peak_reserved_mb == 11015.0
    assert s.median_iteration_ms == 510.0 and s.skipped_iterations == 1
    assert (s.world_size, s.data_parallel_size) == (4, 2)


def test_same_iteration_from_several_ranks_takes_the_slowest():
    lines = []
    for rank, ms in ((0, 400.0), (1, 450.0)):
        lines += [f"[rank{rank}]:" + mlm_line(i, ms + i, nan=rank) for i in (3, 6, 9)]
    s = metrics_from_text("\n".join(lines)).summary
    assert s.iterations_logged == 3
    assert s.median_iteration_ms == 457.5  # of 456 and 459, rank 1's (the slower) times
    assert s.nan_iterations == 3


def test_unprefixed_iteration_line_belongs_to_the_last_rank():
    text = "\n".join(
        [
            "using world size: 8, data-parallel size: 8, tensor-model-parallel size: 1, "
            "pipeline-model-parallel size: 1 ",
            mlm_line(1, 900.0),
            memory_line(0, 1, 1, 2, 3, 4),
        ]
    )
    run = metrics_from_text(text)
    assert run.iterations[0].rank == 7 and run.memory[0].rank == 0


def test_restart_with_other_offload_settings_summarises_the_final_start():
    first = [args_block(optimizer_cpu_offload=False, optimizer_offload_fraction=1.0)]
    first += [mlm_line(i, 400.0, loss=9.0) for i in (1, 5, 10)] + [memory_line(0, 10, 8000, 14000, 15000, 15000)]
    second = [args_block(optimizer_cpu_offload=True, optimizer_offload_fraction=0.5)]
    second += [mlm_line(i, 800.0, loss=8.0) for i in (1, 5, 10)] + [memory_line(0, 10, 5000, 11000, 12000, 12000)]
    run = metrics_from_text("\n".join(first + second))
    s = run.summary
    assert s.segments == [1]
    assert s.median_iteration_ms == 800.0 and s.peak_allocated_mb == 11000.0 and s.final_loss == 8.0
    assert s.effective_offload_fraction == 0.5
    assert len(run.iterations) == 6  # the records keep both starts


def test_resumed_job_with_the_same_settings_is_one_run():
    block = args_block(optimizer_cpu_offload=True, optimizer_offload_fraction=0.25)
    lines = [block] + [mlm_line(i, 700.0 + i, loss=10.0 - i / 10) for i in range(10, 60, 10)]
    lines += [block] + [mlm_line(i, 700.0 + i, loss=1.0) for i in range(40, 90, 10)]  # resumed from iteration 30
    s = metrics_from_text("\n".join(lines)).summary
    assert s.segments == [0, 1]
    assert s.steady_state_lines == 8  # each start loses its first line
    assert s.iterations_logged == 8 and s.last_iteration == 80
    assert dict(s.loss_series)[40] == 1.0  # the later start's value for an iteration logged twice


def test_directory_of_per_rank_logs_is_one_run(tmp_path):
    (tmp_path / "train_rank0.log").write_text(
        args_block(world_size=2, data_parallel_size=2) + "\n" + memory_line(0, 10, 100, 200, 300, 400) + "\n"
    )
    (tmp_path / "train_rank1.log").write_text("\n".join(mlm_line(i, 500.0) for i in (5, 10, 15)) + "\n")
    with gzip.open(tmp_path / "train_rank2.log.gz", "wt") as handle:
        handle.write(memory_line(2, 10, 100, 250, 300, 450) + "\n")
    run = run_metrics(str(tmp_path))
    assert len(run.sources) == 3
    assert {r.rank for r in run.iterations} == {1}
    assert run.summary.peak_allocated_mb == 250.0 and run.summary.median_iteration_ms == 500.0


def test_lines_other_than_metrics_are_not_kept():
    noise = "\n".join(f"INFO:megatron.core.timers: forward-backward ......: ({i}.0, {i}.5)" for i in range(5000))
    run = metrics_from_text(noise + "\n" + mlm_line(1, 100.0))
    assert len(run.iterations) == 1 and run.memory == [] and run.sources == [("<text>", 5001)]


# ---- the command --------------------------------------------------------------------------------------------


def test_cli_text():
    result = RUNNER.invoke(app, ["metrics", str(BASELINE), str(OPT050)])
    assert result.exit_code == 0, result.output
    for fragment in (
        "median 460.9 ms",
        "median 820.7 ms",
        "13800.10 MB allocated",
        "final 8.141713 at iteration 10",
        "470,503,424",
        "optimizer_offload_fraction=0.5",
        "(effective fraction 0.5)",
    ):
        assert fragment in result.stdout, fragment


def test_cli_json():
    result = RUNNER.invoke(app, ["metrics", "--format", "json", str(BASELINE), str(OPT050)])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["schema_version"] == 1
    assert [r["path"] for r in document["runs"]] == [str(BASELINE), str(OPT050)]
    base = document["runs"][0]
    assert base["summary"]["median_iteration_ms"] == 460.9
    assert base["summary"]["peak_allocated_mb"] == 13800.1
    assert base["summary"]["loss_series"][-1] == [10, 8.141713]
    assert base["summary"]["offload"]["optimizer_cpu_offload"] is False
    assert [i["iteration"] for i in base["iterations"]] == [1, 5, 10]
    assert base["iterations"][-1]["steady_state"] is True
    assert base["memory"][0]["max_allocated_mb"] == 10210.45
    assert base["parameters"]["per_model_parallel_rank"][0]["count"] == 470503424
    assert base["arguments"]["optimizer.optimizer_offload_fraction"] == 1.0


def test_cli_json_has_no_nan(tmp_path):
    log = tmp_path / "nan.log"
    log.write_text(mlm_line(1, 900.0).replace("lm loss: 9.500000E+00", "lm loss: NAN") + "\n")
    result = RUNNER.invoke(app, ["metrics", "-f", "json", str(log)])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["runs"][0]["iterations"][0]["lm_loss"] is None


def test_cli_csv():
    result = RUNNER.invoke(app, ["metrics", "--format", "csv", str(BASELINE), str(OPT050)])
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert tuple(rows[0]) == COLUMNS
    assert len(rows) == 6  # 3 iterations x 2 runs; memory report joined to the iteration line of rank 0
    last = rows[2]
    assert (last["run"], last["rank"], last["iteration"], last["steady_state"]) == (str(BASELINE), "0", "10", "true")
    assert float(last["elapsed_ms"]) == 460.9 and float(last["max_allocated_mb"]) == 13800.1
    assert float(rows[5]["lm_loss"]) == 8.141771


def test_cli_csv_separate_rows_for_ranks_that_print_different_lines():
    text = "[rank1]:" + mlm_line(1, 900.0) + "\n[rank0]: " + memory_line(0, 1, 1, 2, 3, 4) + "\n"
    result = RUNNER.invoke(app, ["metrics", "-f", "csv", "-"], input=text)
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert [(r["rank"], r["elapsed_ms"], r["allocated_mb"]) for r in rows] == [("0", "", "1.0"), ("1", "900.0", "")]


def test_cli_log_without_metrics_is_not_an_error(tmp_path):
    log = tmp_path / "empty.log"
    log.write_text("hello\n")
    result = RUNNER.invoke(app, ["metrics", str(log)])
    assert result.exit_code == 0
    assert "no iteration lines" in result.stdout and "no memory report" in result.stdout


@pytest.mark.parametrize("kind", ["missing", "binary", "empty-dir"])
def test_cli_bad_input_is_one_line_and_exit_2(tmp_path, kind):
    if kind == "missing":
        target, fragment = tmp_path / "nope.log", "no such file"
    elif kind == "binary":
        target, fragment = tmp_path / "core.log", "binary"
        target.write_bytes(b"\x7fELF\x00\x01\x02\x00\x00" * 200)
    else:
        target, fragment = tmp_path / "logs", "no log files"
        target.mkdir()
    result = RUNNER.invoke(app, ["metrics", str(BASELINE), str(target)])
    assert_one_line_error(result, str(target), fragment)
    assert result.stdout == ""


def test_cli_rejects_unknown_format():
    result = RUNNER.invoke(app, ["metrics", "--format", "xml", str(BASELINE)])
    assert result.exit_code == 2


def test_a_grad_norm_of_nan_or_inf_is_named_where_megatrons_nan_count_stays_zero():
    """Megatron's `number of nan iterations` counts the loss; a NaN gradient norm (Megatron-Bridge#5306, in
    fixtures/held-out) leaves it at 0."""
    lines = [
        mlm_line(i, 480.0).replace("grad norm: 3.210", f"grad norm: {norm}")
        for i, norm in ((4, "3.2"), (5, "nan"), (6, "inf"), (7, "2.9"))
    ]
    summary = metrics_from_text("\n".join(lines)).summary
    assert summary.nan_iterations == 0
    assert summary.nonfinite_grad_norm_iterations == [5, 6]
    result = RUNNER.invoke(app, ["metrics", "-"], input="\n".join(lines))
    assert "grad norm       nan or inf at iterations 5-6" in result.output
