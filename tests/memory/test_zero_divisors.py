"""Issue 27 point 12: `estimate` and `check --gpu` divided by zero (exit 3) when a size the memory model
divides by (heads, TP, PP, CP, EP, …) was 0, from --set, a config or a log's arguments block. Now a one-line
error names the key, the value and where it came from."""

from __future__ import annotations

import pytest

from offloaddoctor.cli import app

from tests.conftest import FIXTURES, RUNNER

CONFIG = FIXTURES / "oom-partial-optimizer-offload-bridge" / "run_config.yaml"
COMPLETE = ["--set", "model.seq_length=4096", "--set", "model.vocab_size=32000"]
DIVISORS = [
    "model.num_attention_heads",
    "model.hidden_size",
    "model.tensor_model_parallel_size",
    "model.pipeline_model_parallel_size",
    "model.context_parallel_size",
    "model.expert_model_parallel_size",
    "model.expert_tensor_parallel_size",
    "model.make_vocab_size_divisible_by",
    "train.micro_batch_size",
]


def one_line(result) -> str:
    assert result.exit_code == 2, result.output
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("offloaddoctor: error: ")
    return line


@pytest.mark.parametrize("key", DIVISORS)
@pytest.mark.parametrize("value", ["0", "-2"])
@pytest.mark.parametrize("command", [["estimate"], ["check", "--gpu", "H100-80GB"]])
def test_a_zero_or_negative_divisor_from_set_is_one_line_naming_key_and_source(key, value, command):
    moe = ["--set", "model.num_moe_experts=8"]  # so that the expert sizes are read
    result = RUNNER.invoke(app, [*command, str(CONFIG), *COMPLETE, *moe, "--set", f"{key}={value}"])
    line = one_line(result)
    assert f"{key} = {value}" in line and "--set" in line and "at least 1" in line


def test_a_zero_divisor_from_a_logs_arguments_block_names_the_log_line(tmp_path):
    text = (FIXTURES / "pp-cpu-offload" / "job.log").read_text()
    printed = "  tensor_model_parallel_size ...................... 1\n"
    assert printed in text
    log = tmp_path / "job.log"
    log.write_text(text.replace(printed, printed[:-2] + "0\n"))
    line = one_line(RUNNER.invoke(app, ["estimate", str(log)]))
    number = text[: text.index(printed)].count("\n") + 1
    assert f"model.tensor_model_parallel_size = 0 ({log}:{number}" in line


def test_sizes_of_one_still_estimate():
    result = RUNNER.invoke(app, ["estimate", str(CONFIG), *COMPLETE, "--set", "model.context_parallel_size=1"])
    assert result.exit_code in (0, 1), result.output
