"""A newcomer's first minutes (issue 26, point 7): the README's quick start, `make install`, `make demo`, and a
README that stays a user's page."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time

import pytest

from tests.conftest import REPO

README = (REPO / "README.md").read_text(encoding="utf-8")

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


def _quick_start_commands() -> list[str]:
    section = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    block = section.split("```\n", 2)[1]
    return [line.split("#", 1)[0].strip() for line in block.splitlines() if line.strip()]


def _make(target: str, tmp_path, exit_code: int | None = None) -> subprocess.CompletedProcess:
    """`make TARGET` with .venv stood in for: BIN holds an `offloaddoctor` that runs this checkout (or exits
    `exit_code`), and the install stamp is newer than pyproject.toml, so nothing is installed."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    body = f"exit {exit_code}" if exit_code is not None else f'exec "{sys.executable}" -m offloaddoctor "$@"'
    shim = bin_dir / "offloaddoctor"
    shim.write_text(f"#!/bin/sh\n{body}\n")
    shim.chmod(0o755)
    stamp = tmp_path / "installed"
    stamp.touch()
    later = time.time() + 60
    os.utime(stamp, (later, later))
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "MAKEFLAGS": ""}
    return subprocess.run(
        ["make", "--no-print-directory", target, f"BIN={bin_dir}", f"APP_STAMP={stamp}"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


def test_make_demo_exits_0_and_says_why_offloaddoctor_exited_1(tmp_path):
    result = _make("demo", tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Error" not in result.stderr and "ignored" not in result.stderr, result.stderr
    assert "oom-fragmentation" in result.stdout
    assert result.stdout.rstrip().endswith("exit 1: an error finding, as expected")


def test_make_demo_still_fails_when_offloaddoctor_fails_otherwise(tmp_path):
    result = _make("demo", tmp_path, exit_code=2)
    assert result.returncode != 0
    assert "as expected" not in result.stdout


def test_make_install_says_how_offloaddoctor_gets_on_path(tmp_path):
    result = _make("install", tmp_path)
    assert result.returncode == 0, result.stderr
    assert f"source {tmp_path}/bin/activate" in result.stdout


def test_the_readme_quick_start_is_install_activate_then_the_command():
    commands = _quick_start_commands()
    assert commands[:3] == ["make install", "source .venv/bin/activate", "offloaddoctor --help"]
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    for command in commands:
        if command.startswith("make "):
            assert re.search(rf"^{command.split()[1]}:", makefile, re.MULTILINE), command
    # what `make install` tells is what the README says
    assert "BIN := $(VENV)/bin" in makefile and "VENV := .venv" in makefile
    assert '@echo "    source $(BIN)/activate"' in makefile


def test_the_readme_is_a_users_page_and_the_internals_are_in_docs():
    internals = ("sendfile", "trie-shaped", "inode", "Adler-32", "fast_path.py", "literal_cover.py")
    assert not [word for word in internals if word in README]
    moved = (REPO / "docs" / "performance.md").read_text(encoding="utf-8")
    assert all(word in moved for word in internals)
    assert len(README.splitlines()) < 280
    for linked in re.findall(r"\]\((docs/[^)#]+)", README):
        assert (REPO / linked).exists(), linked
