"""What crashed jobs leave behind, through the CLI and the library: a clean outcome for each — a one-line
error naming the input (exit 2) or a read as far as valid — never a traceback, never executed config."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from offloaddoctor.api import check, diagnose
from offloaddoctor.cli import app
from offloaddoctor.errors import UserError

from .conftest import FIXTURES

RUNNER = CliRunner()
PP_LOG = FIXTURES / "pp-cpu-offload" / "job.log"


def one_line_error(args, *fragments):
    result = RUNNER.invoke(app, args)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("offloaddoctor: error: "), result.stderr
    assert "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in lines[0]


def log_case(tmp_path, name):
    path = tmp_path / "job.log"
    real = PP_LOG.read_bytes()
    if name == "empty":
        path.write_bytes(b"")
    elif name == "invalid-utf8":
        path.write_bytes(b"\xff\xfe\xc3(" + real + b"\x80\x81 tail\n")
    elif name == "nul-bytes":
        path.write_bytes(real.replace(b"\n", b"\x00\n", 5))
    elif name == "crlf-and-progress":
        path.write_bytes(real.replace(b"\n", b"\r\n").replace(b"iteration", b"10%\r50%\riteration"))
    elif name == "truncated-gz":
        data = gzip.compress(real)
        path = tmp_path / "job.log.gz"
        path.write_bytes(data[: len(data) // 2])
    return path


@pytest.mark.parametrize("case", ["empty", "invalid-utf8", "nul-bytes", "crlf-and-progress", "truncated-gz"])
def test_damaged_logs_are_read_as_far_as_valid(tmp_path, case):
    path = log_case(tmp_path, case)
    report = diagnose([str(path)])  # the library: no exception
    result = RUNNER.invoke(app, ["diagnose", str(path), "-f", "json"])
    assert result.exit_code in (0, 1) and "Traceback" not in result.output
    if case in ("invalid-utf8", "nul-bytes", "crlf-and-progress"):
        assert [f.id for f in report.findings] == ["pp-cpu-offload"]


def test_unreadable_inputs_are_one_line_errors(tmp_path):
    binary = tmp_path / "core.log"
    binary.write_bytes(os.urandom(4096) + b"\x00" * 4096)
    one_line_error(["diagnose", str(binary)], str(binary), "binary")
    corrupt = tmp_path / "job.log.gz"
    corrupt.write_bytes(b"\x1f\x8b\x08\x00" + os.urandom(64))
    one_line_error(["diagnose", str(corrupt)], "gzip")
    empty_dir = tmp_path / "nologs"
    empty_dir.mkdir()
    (empty_dir / "notes.md").write_text("x")
    one_line_error(["diagnose", str(empty_dir)], "no log files")
    loop = tmp_path / "loop.log"
    os.symlink(loop, loop)
    one_line_error(["diagnose", str(loop)], "loop")
    fifo = tmp_path / "pipe.log"
    os.mkfifo(fifo)
    one_line_error(["diagnose", str(fifo)], "not a regular file")
    one_line_error(["diagnose", "/dev/zero"], "/dev/zero", "not a regular file")
    one_line_error(["diagnose", str(tmp_path / "missing.log")], "no such file")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_permission_denied(tmp_path):
    locked = tmp_path / "job.log"
    locked.write_text("x\n")
    locked.chmod(0)
    one_line_error(["diagnose", str(locked)], str(locked), "ermission")


def test_config_tags_are_never_executed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "run_config.yaml"
    config.write_text(
        "model:\n  pipeline_model_parallel_size: !!python/object/apply:os.system ['touch PWNED']\n"
        "  cpu_offloading: true\n_target_: !!python/name:os.system\n"
    )
    report = check([str(config)])
    result = RUNNER.invoke(app, ["diagnose", str(PP_LOG), "--config", str(config), "-f", "json"])
    assert result.exit_code == 1
    assert not (tmp_path / "PWNED").exists()
    assert "pp-cpu-offload" not in [v.id for v in report.violations]  # the tagged value is text, not a number


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("a: &a [1,1,1,1,1,1,1,1,1]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
         "d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n", "alias bomb"),
        ("- just\n- a list\n", "mapping"),
        ("model:\n  num_layers: 8\n  num_layers: 16\n", "duplicate key"),
        ("model: [unclosed\n", "invalid YAML"),
        ("", "empty"),
    ],
)
def test_bad_configs_are_one_line_errors(tmp_path, text, fragment):
    config = tmp_path / "bad.yaml"
    config.write_text(text)
    one_line_error(["diagnose", str(PP_LOG), "--config", str(config)], "bad.yaml", fragment)
    one_line_error(["check", str(config)], "bad.yaml", fragment)


def test_wrong_types_leave_the_constraint_unknown(tmp_path):
    config = tmp_path / "typed.yaml"
    config.write_text('model:\n  pipeline_model_parallel_size: "four"\n  cpu_offloading: true\n')
    report = check([str(config)])
    assert "pp-cpu-offload" not in [v.id for v in report.violations]
    assert "pp-cpu-offload" in [u.id for u in report.unchecked]
    assert RUNNER.invoke(app, ["check", str(config)]).exit_code == 0


def test_set_without_equals():
    one_line_error(["diagnose", str(PP_LOG), "--set", "optimizer.optimizer_cpu_offload"], "KEY=VALUE")
    with pytest.raises(UserError):
        check([], ["nope"])


@pytest.mark.skipif(shutil.disk_usage("/tmp").free < 4 * 2**30, reason="needs 4 GB of free disk")
def test_a_single_1gb_line_is_cut_not_loaded(tmp_path):
    path = tmp_path / "one-line.log"
    block = b"x" * (1 << 20)
    with path.open("wb") as handle:
        handle.write(b"Error start " + block)
        for _ in range(1023):
            handle.write(block)
        handle.write(b"\n" + PP_LOG.read_bytes()[-400:])
    # A fresh parent, so the peak is this run's alone (offloaddoctor and the grep it may start).
    measure = (
        "import json, resource, subprocess, sys\n"
        "r = subprocess.run([sys.executable, '-m', 'offloaddoctor', 'diagnose', sys.argv[1], '-f', 'json'],"
        " capture_output=True, text=True)\n"
        "print(json.dumps([r.returncode, r.stdout, r.stderr, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss]))"
    )
    run = subprocess.run([sys.executable, "-c", measure, str(path)], capture_output=True, text=True, timeout=300)
    returncode, stdout, stderr, peak_kb = json.loads(run.stdout)
    assert returncode in (0, 1), stderr
    assert "line longer than" in stdout and "Traceback" not in stderr
    assert peak_kb / 1024 < 300
