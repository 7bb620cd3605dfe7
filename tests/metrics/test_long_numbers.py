"""Issue 27 point 6: a number of more than 4,300 digits, past Python's int() limit, crashed every reader with
exit 3. Such a digit run is noise: the line holding it reads as a line that does not match, and a value given
with --set is refused in one line."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from offloaddoctor.cli import app
from offloaddoctor.coerce import DIGITS_MAX, integer
from offloaddoctor.metrics import metrics_from_text
from offloaddoctor.metrics.iteration_lines import iteration_found

from tests.conftest import FIXTURES, RUNNER

HUGE = "9" * 5000  # int() refuses more than 4,300 digits
ITERATION = " [2024-05-01 10:00:{second:02d}] iteration {n:>8}/ {total} | elapsed time per iteration (ms): 1234.5 | lm loss: 2.0 |\n"


def iteration_log(huge_at: str) -> str:
    lines = [
        ITERATION.format(
            second=i,
            n=HUGE if huge_at == "iteration" and i == 5 else i,
            total=HUGE if huge_at == "total" and i == 5 else 100,
        )
        for i in range(1, 10)
    ]
    return "".join(lines)


def test_integer_reads_plain_digits_and_refuses_runs_past_the_bound():
    assert integer(" 42 ") == 42
    assert integer("-7") == -7
    assert integer("9" * DIGITS_MAX) == int("9" * DIGITS_MAX)
    assert integer("9" * (DIGITS_MAX + 1)) is None
    assert integer(HUGE) is None
    assert integer("") is None
    assert integer("1.5") is None
    assert integer("٣") is None  # a digit to str.isdigit, not to a log


@pytest.mark.parametrize("huge_at", ["iteration", "total"])
def test_an_iteration_line_with_a_huge_number_is_not_a_record(huge_at):
    run = metrics_from_text(iteration_log(huge_at))
    assert [record.iteration for record in run.iterations] == [1, 2, 3, 4, 6, 7, 8, 9]


def test_memory_parameter_and_layout_lines_with_huge_numbers_do_not_match():
    run = metrics_from_text(
        f"[Rank {HUGE}] (after 1 iterations) memory (MB) | allocated: 1.0 | max allocated: 2.0\n"
        f"[Rank 0] (after {HUGE} iterations) memory (MB) | allocated: 1.0 | max allocated: 2.0\n"
        f" > number of parameters on (tensor, pipeline) model parallel rank (0, {HUGE}): 470503424\n"
        f" > number of parameters on (tensor, pipeline) model parallel rank (0, 0): {HUGE}\n"
        f"using world size: {HUGE}, data-parallel size: 2, tensor-model-parallel size: 1\n"
    )
    assert [(report.rank, report.iteration) for report in run.memory] == [(0, None)]
    assert run.parameters.per_model_parallel_rank == {}
    assert run.layout.world_size is None and run.layout.data_parallel_size == 2


@pytest.mark.parametrize("command", ["diagnose", "metrics", "compare", "baseline"])
def test_every_reader_of_iteration_lines_survives_a_huge_number(tmp_path, command):
    log = tmp_path / "job.log"
    log.write_text(iteration_log("iteration"))
    args = {
        "diagnose": ["diagnose", log],
        "metrics": ["metrics", log],
        "compare": ["compare", log, log],
        "baseline": ["diagnose", FIXTURES / "pp-cpu-offload" / "job.log", "--baseline", log],
    }[command]
    result = RUNNER.invoke(app, [str(a) for a in args])  # raised the ValueError before
    assert result.exit_code in (0, 1), result.output


def test_a_huge_number_given_with_set_is_a_short_one_line_error():
    result = RUNNER.invoke(app, ["check", "--set", f"model.num_layers={HUGE}"])
    assert result.exit_code == 2
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("offloaddoctor: error: --set model.num_layers=") and "takes a whole number" in line
    assert len(line) < 300  # the value is cut, not printed twice in full


def test_a_huge_number_in_a_printed_argument_is_not_an_integer():
    from offloaddoctor.config.printed import parse_override, parse_printed

    assert not isinstance(parse_printed(HUGE), int)
    assert parse_override(HUGE) == HUGE


def test_an_oom_naming_a_gpu_with_a_huge_number_is_still_diagnosed(tmp_path):
    # scanning/oom.py reads a GPU index of at most 4 digits (excerpts branch): no int() limit crash
    log = tmp_path / "job.log"
    log.write_text(
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB. "
        f"GPU {HUGE} has a total capacity of 79.11 GiB of which 1.00 GiB is free.\n"
    )
    result = RUNNER.invoke(app, ["diagnose", str(log), "--format", "json"])
    assert result.exit_code == 1 and '"oom' in result.stdout


_DIGITS = st.text(st.sampled_from("0123456789٣०９"), min_size=1, max_size=DIGITS_MAX + 3)


@given(_DIGITS, _DIGITS)
def test_iteration_found_refuses_what_integer_refuses(iteration, total):
    """iteration_found tests its two digit runs without coerce.integer (20,000 rank logs): the same answer, over
    other scripts' digits (which `\\d` takes) and runs around DIGITS_MAX."""
    found = iteration_found(f" iteration {iteration}/ {total} | lm loss: 2.0 |")
    assert (found is not None) == (integer(iteration) is not None and integer(total) is not None)
