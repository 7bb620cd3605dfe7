"""`--output FORMAT=PATH` is checked before anything is scanned (issues 26.5, 27.3, 27.15): never an input,
never `-`, a file in a directory that exists; and a report saved among the logs is never read back as one.
Every CLI case runs through typer's test runner and through the command line's own entry."""

from __future__ import annotations

import shutil

import pytest

from offloaddoctor import api
from offloaddoctor.cli import app, run_typer
from offloaddoctor.logs.sources import OUR_REPORT_REASON, not_text_reason
from offloaddoctor.policy import Policy
from offloaddoctor.render.formats import FILE_FORMATS
from offloaddoctor.render.outputs import render

from tests.conftest import FIXTURES, RUNNER

OOM_LOG = FIXTURES / "oom-capacity-recorded" / "job.log"
CLEAN_LOG = FIXTURES / "clean-baseline" / "job.log"


def both_roads(argv: list[str], capsys) -> list[tuple[int, str, str]]:
    through_typer = RUNNER.invoke(app, argv)
    typer_road = (through_typer.exit_code, through_typer.stdout, through_typer.stderr)
    capsys.readouterr()
    try:
        code = run_typer(argv)
    except SystemExit as exc:
        code = exc.code
    captured = capsys.readouterr()
    return [typer_road, (code, captured.out, captured.err)]


def assert_refused_before_the_scan(argv: list[str], capsys, *fragments: str) -> None:
    for code, out, err in both_roads(argv, capsys):
        assert code == 2 and out == "", (code, out, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("offloaddoctor: error: --output "), err
        for fragment in fragments:
            assert fragment in lines[0], lines[0]


@pytest.fixture
def log_dir(tmp_path, monkeypatch):
    logs = tmp_path / "logs"
    logs.mkdir()
    shutil.copy(OOM_LOG, logs / "job.log")
    monkeypatch.chdir(tmp_path)
    return logs


@pytest.mark.parametrize("spec", ["json=logs/job.log", "text=./logs/../logs/job.log", "logs/job.log"])
def test_an_output_that_is_the_input_log_is_refused_and_the_log_kept(log_dir, capsys, spec):
    before = (log_dir / "job.log").read_bytes()
    assert_refused_before_the_scan(["diagnose", "logs/job.log", "-o", spec, "-f", "json"], capsys, "it is the input")
    assert (log_dir / "job.log").read_bytes() == before


@pytest.mark.parametrize("spec", ["logs/train.txt", "json=logs/job.log", "text=logs/report.log"])
def test_an_output_the_log_directory_would_read_is_refused(log_dir, capsys, spec):
    assert_refused_before_the_scan(["diagnose", "logs", "-o", spec, "-f", "json"], capsys, "input directory logs")
    assert sorted(p.name for p in log_dir.iterdir()) == ["job.log"]


def test_a_log_named_output_below_the_directory_is_refused_only_with_recursive(log_dir, capsys):
    (log_dir / "sub").mkdir()
    argv = ["diagnose", "logs", "-o", "text=logs/sub/report.txt", "-f", "json"]
    assert_refused_before_the_scan([*argv, "-r"], capsys, "input directory logs")
    assert {code for code, _, _ in both_roads(argv, capsys)} == {1}  # not read without -r: written


def test_an_output_matched_by_the_input_pattern_is_refused(log_dir, capsys):
    assert_refused_before_the_scan(["diagnose", "logs/*.log", "-o", "text=logs/new.log"], capsys, "pattern")


def test_a_config_is_not_overwritten_by_an_output(log_dir, capsys):
    config = log_dir.parent / "run.yaml"
    config.write_text("model:\n  num_layers: 16\n")
    assert_refused_before_the_scan(
        ["diagnose", "logs/job.log", "-c", "run.yaml", "-o", "text=run.yaml"], capsys, "it is the input run.yaml"
    )
    assert config.read_text() == "model:\n  num_layers: 16\n"


def test_a_json_report_beside_the_logs_is_fine(log_dir, capsys):
    for code, _, err in both_roads(["diagnose", "logs", "-o", "json=logs/report.json", "-f", "text"], capsys):
        assert code == 1 and err == ""
    assert (log_dir / "report.json").read_text().startswith("{")


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ("json=/no/such/dir/r.json", "directory /no/such/dir does not exist"),
        ("json=logs", "is a directory"),
        ("json=-", "name a file (standard output is --format's: use --format json)"),
        ("json=", "name a file"),
    ],
)
def test_an_unwritable_output_is_refused_before_the_report_prints(log_dir, capsys, spec, fragment):
    # It failed after the report printed: exit 2 hid the findings' exit 1 (and `-` became a file named `-`).
    assert_refused_before_the_scan(["diagnose", "logs/job.log", "-o", spec, "-f", "text"], capsys, fragment)
    assert not (log_dir.parent / "-").exists()


@pytest.mark.parametrize("output_format", FILE_FORMATS)
def test_every_report_format_we_write_is_recognised_as_ours(output_format, catalog):
    report = api.diagnose([str(OOM_LOG)], catalog=catalog, policy=Policy())
    text = render(report, output_format, catalog, Policy())
    expected = None if output_format == "github" else OUR_REPORT_REASON  # annotations: the runner's lines
    assert not_text_reason(text.encode()[:8192]) == expected
    assert not_text_reason(OOM_LOG.read_bytes()[:8192]) is None


def test_a_report_saved_among_the_logs_is_skipped_with_a_note_not_read_as_a_log(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "old").mkdir()
    shutil.copy(OOM_LOG, tmp_path / "old" / "job.log")
    assert {code for code, _, _ in both_roads(["diagnose", "old", "-o", "text=report.txt"], capsys)} == {1}
    logs = tmp_path / "logs"
    logs.mkdir()
    shutil.copy(CLEAN_LOG, logs / "job.log")
    shutil.copy(tmp_path / "report.txt", logs / "last-report.txt")  # the OOM's report, in the new run's logs
    for code, out, _ in both_roads(["diagnose", "logs", "-f", "text"], capsys):
        assert code == 0, out  # the old report's OOM line is not a finding of this run
        assert f"note: logs/last-report.txt: {OUR_REPORT_REASON}; skipped" in out
    for code, out, err in both_roads(["diagnose", "logs/last-report.txt"], capsys):
        assert (code, out) == (2, "") and OUR_REPORT_REASON in err
