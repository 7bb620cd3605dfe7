"""Every command's help: `-h` is `--help`, and each shows an example (issue 26, point 7)."""

from __future__ import annotations

import pytest
from typer.main import get_command

from offloaddoctor.cli import app

from .conftest import RUNNER


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
