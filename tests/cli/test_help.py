"""Every command's help: `-h` is `--help`, and each shows an example; the guides named and parentheses at most
two deep in what a user reads (issue 26, point 7)."""

from __future__ import annotations

import re

import pytest
from typer.main import get_command

from offloaddoctor.api import diagnose
from offloaddoctor.cli import app
from offloaddoctor.render.plain import render_plain

from tests.conftest import FIXTURES, REPO, RUNNER


def _command_paths(command, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    paths = [prefix]
    for name, sub in getattr(command, "commands", {}).items():
        if not sub.hidden:
            paths.extend(_command_paths(sub, (*prefix, name)))
    return paths


COMMAND_PATHS = _command_paths(get_command(app))


def test_every_command_is_listed():
    assert {("diagnose",), ("bisect",), ("signatures", "lint"), ()} <= set(COMMAND_PATHS)


@pytest.mark.parametrize("path", COMMAND_PATHS, ids=lambda path: " ".join(path) or "offloaddoctor")
def test_dash_h_is_help_and_help_shows_an_example(path):
    long_help = RUNNER.invoke(app, [*path, "--help"])
    short_help = RUNNER.invoke(app, [*path, "-h"])
    assert short_help.exit_code == 0, short_help.output
    assert short_help.stdout == long_help.stdout
    assert "-h, --help" in short_help.stdout
    examples = short_help.stdout.split("Examples:\n", 1)[1]
    runs = [line.strip()[2:] for line in examples.splitlines() if line.strip().startswith("$ ")]
    invocation = " ".join(("offloaddoctor", *path)) if path != ("bisect-step",) else "git bisect run offloaddoctor"
    assert any(run.startswith(invocation) for run in runs), examples


def test_bisect_help_explains_its_three_modes():
    text = RUNNER.invoke(app, ["bisect", "-h"]).stdout
    description = text.split("Options:")[0]
    for mode, options in (
        ("config mode", "--good REV --bad REV --config PATH"),
        ("run mode", "--good REV --bad REV --run CMD"),
        ("two-config", "--good-config A --bad-config B"),
    ):
        line = next(line for line in description.splitlines() if line.strip().startswith(mode))
        assert options in line
    assert "temporary worktree" in description and "no checkout" in description


# --- wording: the guides named, parentheses at most two deep --------------------------------------------------

_BARE_GUIDE = re.compile(r"\b(?:the|a) (?:memory )?guide(?:'s)?\b", re.IGNORECASE)


def _help_texts() -> list[str]:
    return [RUNNER.invoke(app, [*path, "-h"]).stdout for path in COMMAND_PATHS]


def test_every_guide_is_named_where_a_user_reads_it():
    signature_texts = [path.read_text(encoding="utf-8") for path in sorted((REPO / "signatures").glob("*.yaml"))]
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    for text in [*signature_texts, *_help_texts(), readme]:
        assert not _BARE_GUIDE.findall(text), _BARE_GUIDE.findall(text)
    assert "CPU-offloading\nguide* (`docs/training/cpu-offloading.md`)" in readme
    assert "*memory-tuning guide* (`docs/parallelisms.md`" in readme


def _depth(line: str) -> int:
    depth = deepest = 0
    for char in line:
        if char == "(":
            depth += 1
            deepest = max(deepest, depth)
        elif char == ")":
            depth = max(0, depth - 1)
    return deepest


@pytest.mark.parametrize(
    "case, config",
    [
        ("oom-capacity-recorded", None),  # the cheapest change and its cost inside the fix note
        ("cpu-offload-num-layers", None),  # a derived value's source inside a config line
        ("cuda-graph-expandable-segments", None),
        ("oom-partial-optimizer-offload-bridge", "run_config.yaml"),
    ],
)
def test_report_wording_nests_parentheses_at_most_two_deep(case, config):
    log = FIXTURES / case / "job.log"
    report = diagnose([str(log)], [str(FIXTURES / case / config)] if config else [])
    text = render_plain(report, details=True)
    assert max(map(_depth, text.splitlines())) <= 2, [line for line in text.splitlines() if _depth(line) > 2]
    assert all(_depth(text) <= 2 for text in _help_texts())
