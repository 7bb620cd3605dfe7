"""An evidence line cut to the screen keeps the figure the finding is about (issue 26, point 7): the slowdown's
iteration lines were cut just before `elapsed time per iteration (ms): X`."""

from __future__ import annotations

import io

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from offloaddoctor.api import diagnose
from offloaddoctor.render.plain import cut_evidence, render_plain
from offloaddoctor.render.terminal import render_terminal

from tests.conftest import FIXTURES

SLOWDOWN_LOG = str(FIXTURES / "optimizer-offload-slowdown-restart" / "job.log")


def _evidence_lines(text: str) -> list[str]:
    section = text.split("Evidence", 1)[1].split("Numbers", 1)[0]
    return [line for line in section.splitlines() if "iteration" in line]


def test_the_slowdown_evidence_keeps_the_iteration_time_in_plain_text():
    lines = _evidence_lines(render_plain(diagnose([SLOWDOWN_LOG])))
    assert len(lines) == 2
    assert "elapsed time per iteration (ms): 460.9 |" in lines[0]
    assert "elapsed time per iteration (ms): 1935.8 |" in lines[1]
    assert all(len(line) <= 100 for line in lines)


@pytest.mark.parametrize("width", [80, 100, 120])
def test_the_slowdown_evidence_keeps_the_iteration_time_in_panels(width):
    console = Console(file=io.StringIO(), width=width, force_terminal=False, color_system=None)
    render_terminal(diagnose([SLOWDOWN_LOG]), console)
    lines = _evidence_lines(console.file.getvalue())
    assert any("elapsed time per iteration (ms): 1935.8 |" in line for line in lines), lines
    assert all(len(line) <= width for line in lines)


MEGATRON_LINE = (
    " iteration       10/      10 | consumed samples:          320 | elapsed time per iteration (ms): 1935.8 | "
    "throughput per GPU (TFLOP/s/GPU): 49.3 | learning rate: 1.000000E-05 | global batch size:    32 | "
    "lm loss: 8.141713E+00 | loss scale: 1.0 | grad norm: 6.424 | number of skipped iterations:   0 |"
)


def test_key_fields_first_then_the_line_in_order():
    assert cut_evidence(MEGATRON_LINE, 84) == "iteration 10/ 10 | … | elapsed time per iteration (ms): 1935.8 | …"
    assert cut_evidence(MEGATRON_LINE, 50) == "… | elapsed time per iteration (ms): 1935.8 | …"
    assert cut_evidence("a line that fits", 84) == "a line that fits"
    assert cut_evidence("x" * 100, 20) == "x" * 19 + "…"  # no fields: cut at its end, as before


@given(st.text(alphabet="ab |:0", max_size=300), st.integers(min_value=8, max_value=200))
def test_a_cut_line_never_exceeds_its_width(text, width):
    assert len(cut_evidence(text, width)) <= width
