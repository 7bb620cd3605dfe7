"""Rendered output is a product surface: snapshot it (update with `pytest --snapshot-update`)."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from offloaddoctor.api import diagnose
from offloaddoctor.render.json_report import render_json
from offloaddoctor.render.plain import render_plain
from offloaddoctor.render.terminal import render_terminal

from tests.conftest import REPO

CASES = [
    "pp-cpu-offload",
    "oom-fragmentation-multirank",
    "oom-partial-optimizer-offload-bridge",
    "optimizer-offload-slowdown-restart",
    "unmatched-failure",
    "clean-baseline",
    "moe-tp-requires-sequence-parallel",  # a fix that raises the peak, and the GPUs it then fits
]


@pytest.fixture
def in_repo(monkeypatch):
    monkeypatch.chdir(REPO)


def report_for(case: str):
    configs = ["fixtures/configs/bridge-run-config-optimizer-offload.yaml"] if case.endswith("-bridge") else []
    return diagnose([f"fixtures/{case}/job.log"], configs)


@pytest.mark.parametrize("case", CASES)
def test_plain_text(case, in_repo, snapshot):
    assert render_plain(report_for(case)) == snapshot


@pytest.mark.parametrize("case", ["oom-fragmentation-multirank", "oom-partial-optimizer-offload-bridge"])
def test_plain_text_details(case, in_repo, snapshot):
    assert render_plain(report_for(case), details=True) == snapshot


def _terminal(report, width: int, details: bool = False) -> str:
    buffer = io.StringIO()
    console = Console(file=buffer, width=width, force_terminal=False, color_system=None, highlight=False)
    render_terminal(report, console, details)
    return buffer.getvalue()


@pytest.mark.parametrize("width", [80, 120])
@pytest.mark.parametrize(
    "case", ["oom-fragmentation-multirank", "oom-partial-optimizer-offload-bridge", "unmatched-failure"]
)
def test_terminal_at_width(case, width, in_repo, snapshot):
    """What a person sees on an 80- and a 120-column terminal."""
    assert _terminal(report_for(case), width) == snapshot


def test_terminal_bridge_example_at_80_columns(snapshot, monkeypatch):
    monkeypatch.chdir(REPO / "fixtures" / "oom-partial-optimizer-offload-bridge")
    assert _terminal(diagnose(["job.log"], ["run_config.yaml"]), 80) == snapshot


@pytest.mark.parametrize("case", ["oom-fragmentation-multirank", "unmatched-failure"])
def test_json(case, in_repo, snapshot):
    assert render_json(report_for(case)) == snapshot


def test_terminal_panels(in_repo, snapshot):
    assert _terminal(report_for("oom-fragmentation-multirank"), 110, details=True) == snapshot
