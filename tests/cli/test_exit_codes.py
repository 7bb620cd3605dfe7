"""Exit codes a CI job can trust (issues 26.5, 27.14): nothing passes silently that should fail, and a closed
standard stream gives the right code with no traceback. Run as a user's shell runs it, and in-process."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

import pytest

from offloaddoctor import api
from offloaddoctor.cli import app, run_typer
from offloaddoctor.policy import Policy

from tests.conftest import FIXTURES, REPO, RUNNER

OOM_LOG = str(FIXTURES / "oom-capacity-recorded" / "job.log")
CLEAN_LOG = str(FIXTURES / "clean-baseline" / "job.log")
UNKNOWN_CRASH = """INFO starting training
Traceback (most recent call last):
  File "/workspace/train.py", line 10, in <module>
    main()
  File "/workspace/train.py", line 5, in main
    open("/data/missing.bin")
FileNotFoundError: [Errno 2] No such file or directory: '/data/missing.bin'
"""


def exit_codes(argv: list[str], capsys) -> set[int]:
    """The exit code through typer's test runner and through the command line's own entry (they must agree:
    one code comes back)."""
    codes = {RUNNER.invoke(app, argv).exit_code}
    try:
        codes.add(run_typer(argv))
    except SystemExit as exc:
        codes.add(exc.code)
    capsys.readouterr()
    return codes


@pytest.fixture
def crash_log(tmp_path):
    log = tmp_path / "crash.log"
    log.write_text(UNKNOWN_CRASH)
    return str(log)


def test_a_traceback_nobody_recognises_fails_ci_by_default(crash_log, capsys):
    report = api.diagnose([crash_log], policy=Policy())
    assert report.findings == [] and report.unmatched_traceback
    assert exit_codes(["diagnose", crash_log, "-f", "json"], capsys) == {1}
    assert exit_codes(["diagnose", crash_log, "-f", "json", "--fail-on", "warning"], capsys) == {1}
    assert exit_codes(["diagnose", crash_log, "-f", "json", "--fail-on", "never"], capsys) == {0}


def test_a_failure_line_that_is_no_traceback_fails_only_under_unknown(tmp_path, capsys):
    log = tmp_path / "nccl.log"
    log.write_text("host:1:2 [3] misc/ibvwrap.cc:178 NCCL WARN Call to ibv_create_qp failed\n")
    report = api.diagnose([str(log)], policy=Policy())
    assert report.unmatched is not None and not report.unmatched_traceback
    assert exit_codes(["diagnose", str(log), "-f", "json"], capsys) == {0}
    assert exit_codes(["diagnose", str(log), "-f", "json", "--fail-on", "unknown"], capsys) == {1}


@pytest.mark.parametrize("content", ["", "\n"], ids=["empty", "blank-line"])
def test_an_empty_log_does_not_pass_under_fail_on_unknown(tmp_path, capsys, content):
    log = tmp_path / "empty.log"
    log.write_text(content)
    if content:  # one blank line is a line read: nothing unknown in it
        assert exit_codes(["diagnose", str(log), "--fail-on", "unknown", "-f", "json"], capsys) == {0}
        return
    assert exit_codes(["diagnose", str(log), "--fail-on", "unknown", "-f", "json"], capsys) == {1}
    assert exit_codes(["diagnose", str(log), "-f", "json"], capsys) == {0}  # said empty; the default lets it pass


def test_a_directory_of_only_skipped_logs_does_not_pass_under_fail_on_unknown(tmp_path, capsys):
    (tmp_path / "gone.log").symlink_to(tmp_path.parent / f"{tmp_path.name}-elsewhere.log")  # dangling
    (tmp_path / "empty.log").write_text("")
    assert exit_codes(["diagnose", str(tmp_path), "--fail-on", "unknown", "-f", "json"], capsys) == {1}


# ---- closed standard streams (`<&-`, `>&-`, `2>&-`), as a shell closes them ----------------------------------


def shell(command: str) -> subprocess.CompletedProcess:
    """`offloaddoctor` run by bash with `command` after it (redirections included); stderr captured unless the
    command closes it."""
    module = f"{shlex.quote(sys.executable)} -m offloaddoctor"
    return subprocess.run(
        ["bash", "-c", f"{module} {command}"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "PYTHONPATH": str(REPO / "src"), "NO_COLOR": "1"},
    )


@pytest.mark.parametrize("args", ["-f json", "-rf json"], ids=["fast", "typer"])  # a short-option cluster: typer
def test_standard_input_closed_is_a_one_line_error(args):
    result = shell(f"diagnose - {args} <&-")
    assert result.returncode == 2, result.stderr
    assert result.stderr == "offloaddoctor: error: -: standard input is closed; pipe a log into it or name a log file\n"


@pytest.mark.parametrize("args", [f"diagnose {OOM_LOG} -f text", f"diagnose {OOM_LOG} -rf json", "check --set x=1"])
def test_standard_output_closed_exits_2_with_a_line_on_stderr(args):
    result = shell(f"{args} >&-")
    assert result.returncode == 2, result.stderr
    assert (
        result.stderr == "offloaddoctor: error: cannot write the output to standard output: standard output is closed\n"
    )


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (f"diagnose {CLEAN_LOG} -f text", 0),
        (f"diagnose {OOM_LOG} -f text", 1),
        ("diagnose /no/such.log -f text", 2),
        (f"diagnose {OOM_LOG} -rf text", 1),
        ("diagnose /no/such.log -rf text", 2),
        ("", 0),  # help, on stdout
        ("diagnose", 2),  # typer's usage error: a missing LOG
    ],
)
def test_standard_error_closed_keeps_every_exit_code(args, code):
    result = shell(f"{args} 2>&-")
    assert result.returncode == code, result.stdout
    assert "Traceback" not in result.stdout


def test_every_stream_closed_is_still_an_exit_code_not_a_crash():
    assert shell(f"diagnose {OOM_LOG} -f text <&- >&- 2>&-").returncode == 2
