"""Issue 27 point 15, the terminal's width: at 50 columns or fewer the fix to paste was cut with "…", and
COLUMNS=0 printed nothing at all."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from offloaddoctor.api import diagnose
from offloaddoctor.render.terminal import render_terminal

from tests.conftest import FIXTURES, REPO

FIXTURE = FIXTURES / "oom-partial-optimizer-offload-bridge"
OVERRIDES = (
    "model.recompute_granularity=selective",
    "optimizer.optimizer_offload_fraction=1",
    "optimizer.overlap_cpu_optimizer_d2h_h2d=True",
)


@pytest.fixture(scope="module")
def report():
    return diagnose([str(FIXTURE / "job.log")], [str(FIXTURE / "run_config.yaml")])


@pytest.mark.parametrize("width", [30, 40, 50, 80])
def test_the_fix_to_paste_is_never_cut_however_narrow_the_terminal(report, width):
    buffer = io.StringIO()
    render_terminal(report, Console(file=buffer, width=width, color_system=None, force_terminal=False))
    lines = [line.strip() for line in buffer.getvalue().splitlines()]
    summary = lines[: next(i for i, line in enumerate(lines) if line.startswith("Details below"))]
    for override in OVERRIDES:  # each whole on a line of the summary: the line a person copies
        assert any(override in line.split() for line in summary), (override, summary)
    assert not any("…" in line for line in summary)


def test_columns_zero_or_garbage_is_an_unknown_width_not_an_empty_screen(command_line, monkeypatch):
    monkeypatch.chdir(REPO)
    for columns in ("0", "abc", "-3"):  # read where each run makes its console: in this process, as in a new one
        monkeypatch.setenv("COLUMNS", columns)
        result = command_line("diagnose", str(FIXTURE / "job.log"), "--format", "terminal")
        assert result.returncode == 1, result.stderr
        assert "oom-partial-optimizer-offload" in result.stdout, columns
