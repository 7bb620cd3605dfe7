"""The scripts in tools/ run on anyone's machine: paths come from arguments or the environment, with
documented defaults (`../shared` next to the repository), never one machine's absolute paths."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.conftest import REPO

TOOLS = sorted(p for p in (REPO / "tools").iterdir() if p.suffix in (".py", ".sh"))
# Paths that exist on one machine only: a venv, the shared folder's absolute location, a home.
MACHINE_PATHS = re.compile(r"/opt/[\w.-]+venv|/work/(?:shared|main)\b|/home/\w+|/root/")


@pytest.mark.parametrize("tool", TOOLS, ids=lambda p: p.name)
def test_no_tool_hard_codes_one_machines_paths(tool):
    text = tool.read_text()
    first = text.splitlines()[0]
    if first.startswith("#!"):
        assert first.startswith("#!/usr/bin/env "), first
    assert not MACHINE_PATHS.findall(text), MACHINE_PATHS.findall(text)


def run_tool(name: str, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    import os

    return subprocess.run(
        [sys.executable, str(REPO / "tools" / name), *args],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=120,
        cwd=REPO,
    )


def test_compose_fixtures_reads_the_shared_folder_from_the_environment(tmp_path):
    result = run_tool("compose_fixtures.py", "--check", env={"OFFLOADDOCTOR_SHARED": str(tmp_path)})
    assert result.returncode == 2
    assert f"{tmp_path / 'logs'}: not a folder" in result.stderr


def test_record_fixtures_takes_its_interpreter_and_shared_folder_from_the_environment(tmp_path):
    (tmp_path / "logs").mkdir()
    missing = run_tool("record_fixtures.py", "--check", env={"OFFLOADDOCTOR_SHARED": str(tmp_path)})
    assert missing.returncode == 2 and "megatron-lm-h100-baseline-10iter.log" in missing.stderr
    assert str(tmp_path) in missing.stderr
    (tmp_path / "logs" / "megatron-lm-h100-baseline-10iter.log").write_text("baseline\n")
    result = run_tool(
        "record_fixtures.py",
        "--check",
        env={"OFFLOADDOCTOR_SHARED": str(tmp_path), "MCORE_PYTHON": str(tmp_path / "no-python")},
    )
    assert result.returncode == 1
    assert (
        result.stderr.strip()
        == f"--python {tmp_path / 'no-python'}: cannot run it: [Errno 2] No such file or directory: '{tmp_path / 'no-python'}'"
    )
    assert "Traceback" not in result.stderr


def test_finish_compare_family_rewrites_the_site_it_is_told(tmp_path):
    sys.path.insert(0, str(REPO / "tools"))
    try:
        import finish_compare_family
    finally:
        sys.path.remove(str(REPO / "tools"))
    text = '  File "/scratch/site/megatron/core/x.py", line 1'
    assert (
        finish_compare_family.rewrite(text, "/scratch/site")
        == '  File "/usr/local/lib/python3.12/dist-packages/megatron/core/x.py", line 1'
    )
