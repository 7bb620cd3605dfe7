"""Logs of several runs (issue 26.1): one report per run, never one config assembled from several runs; the
logs of one job stay one run. The same rule in `diagnose`, `metrics` and `compare`."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from offloaddoctor.api import compare, diagnose
from offloaddoctor.config.run_identity import LogIdentity, group_runs
from offloaddoctor.metrics import collect_metrics
from offloaddoctor.policy import Policy
from offloaddoctor.render.outputs import render

from offloaddoctor.cli import app

from tests.conftest import EVERY_FIXTURE, FIXTURES, RUNNER, diagnosed_alone, schema_validator

PP = str(FIXTURES / "pp-cpu-offload" / "job.log")
CLEAN = str(FIXTURES / "clean-baseline" / "job.log")
MULTIRANK = FIXTURES / "oom-fragmentation-multirank" / "job.log"


def verdicts(report) -> dict[str, str]:
    return {f.id: f.config.verdict for f in report.findings}


def test_two_runs_keep_each_verdict():
    report = diagnose([PP, CLEAN], policy=Policy())
    assert verdicts(report) == {"pp-cpu-offload": "confirmed"}  # merged, it was CONTRADICTED
    assert [run.run.paths for run in report.runs] == [[PP], [CLEAN]]
    assert any("world_size 8" in d for d in report.runs[0].run.differs_in)


@EVERY_FIXTURE
def test_every_fixture_together_is_each_fixture_alone(catalog):
    logs = sorted(str(p) for p in FIXTURES.glob("*/job.log"))
    together = diagnose(logs, policy=Policy(), catalog=catalog)
    assert [run.run.paths for run in together.runs] == [[log] for log in logs]
    for run, log in zip(together.runs, logs, strict=True):
        alone = diagnosed_alone(log)  # diagnose([log], policy=Policy(), catalog=catalog), shared with test_cli.py
        assert verdicts(run) == verdicts(alone), run.run.paths
        assert [[k.issue.id for k in f.known_issues] for f in run.findings] == [
            [k.issue.id for k in f.known_issues] for f in alone.findings
        ]
    text = render(together, "text", catalog, Policy())
    # Merged, one Config line cited ~2,500 characters of values from every fixture; now no line mixes two logs.
    assert all(len(set(re.findall(r"fixtures/([\w.-]+)/job\.log", line))) <= 1 for line in text.splitlines())


@pytest.fixture
def rank_logs(tmp_path):
    """The multirank fixture as a job writes it per rank: each rank's lines in its own file (rank 0 has the
    lines without a prefix: the arguments block)."""
    files: dict[int, list[str]] = {}
    for line in MULTIRANK.read_text().splitlines(keepends=True):
        found = re.match(r"\[rank(\d+)\]:", line)
        files.setdefault(int(found.group(1)) if found else 0, []).append(line)
    directory = tmp_path / "ranks"
    directory.mkdir()
    for rank, lines in files.items():
        (directory / f"rank{rank}.log").write_text("".join(lines))
    return directory


def test_a_directory_of_one_jobs_rank_logs_stays_one_run(rank_logs):
    split = diagnose([str(rank_logs)], policy=Policy())
    whole = diagnose([str(MULTIRANK)], policy=Policy())
    assert split.runs == []
    assert [(f.id, f.ranks, f.config.verdict) for f in split.findings] == [
        (f.id, f.ranks, f.config.verdict) for f in whole.findings
    ]
    assert len(split.sources) == 8


def test_rank_logs_of_one_job_given_apart_are_one_run_for_metrics(rank_logs):
    runs = collect_metrics([str(rank_logs / "rank0.log"), str(rank_logs / "rank5.log")])
    assert len(runs) == 1 and runs[0].path == f"{rank_logs / 'rank0.log'} + {rank_logs / 'rank5.log'}"


def test_a_directory_of_two_runs_is_two_runs_everywhere(tmp_path):
    directory = tmp_path / "logs"
    directory.mkdir()
    (directory / "a.log").write_text(Path(CLEAN).read_text())
    (directory / "b.log").write_text(Path(PP).read_text())
    assert [r.path for r in collect_metrics([str(directory)])] == [str(directory / "a.log"), str(directory / "b.log")]
    assert len(diagnose([str(directory)], policy=Policy()).runs) == 2
    result = RUNNER.invoke(app, ["compare", str(directory), str(FIXTURES / "clean-opt050" / "job.log")])
    assert result.exit_code == 2 and "the baseline's logs are 2 runs" in result.stderr
    assert result.stderr.count("\n") == 1


def test_compare_joins_one_jobs_logs_given_apart(rank_logs):
    comparison = compare(str(FIXTURES / "clean-baseline" / "job.log"), [str(p) for p in sorted(rank_logs.iterdir())])
    assert len(comparison.runs) == 1 and " + " in comparison.runs[0].path


def test_standard_input_of_another_run_is_refused_in_one_line():
    result = RUNNER.invoke(app, ["diagnose", "-", CLEAN], input=Path(PP).read_text())
    assert result.exit_code == 2 and "standard input" in result.stderr and result.stderr.count("\n") == 1


def identity(path, lines=10, **values):
    return LogIdentity(path, {key: (value,) for key, value in values.items()}, lines)


def test_conflicting_identifying_values_are_different_runs():
    runs = group_runs([identity("a", **{"model.num_layers": 8}), identity("b", **{"model.num_layers": 12})])
    assert [r.paths for r in runs] == [["a"], ["b"]]
    assert runs[0].differs_in == ["model.num_layers 8"]


def test_an_excerpt_joins_the_one_run_and_stands_alone_among_several():
    one = group_runs([identity("a", world_size=8), identity("excerpt")])
    assert [r.paths for r in one] == [["a", "excerpt"]]
    several = group_runs([identity("a", world_size=8), identity("b", world_size=4), identity("excerpt")])
    assert [(r.paths, r.placed) for r in several] == [(["a"], True), (["b"], True), (["excerpt"], False)]


def test_the_same_rank_twice_is_another_run_unless_the_same_content():
    logs = [identity("a", world_size=8), identity("b", lines=11, world_size=8)]
    assert len(group_runs(logs, [("a", "b")])) == 2
    copies = [identity("a", world_size=8), identity("a.copy", world_size=8)]
    assert len(group_runs(copies, [("a", "a.copy")])) == 1
    assert len(group_runs([identity("x"), identity("y", lines=3)], [("x", "y")])) == 2  # excerpts of one rank


def test_two_single_process_logs_are_two_runs():
    logs = [identity("a", world_size=1), identity("b", lines=12, world_size=1)]
    assert len(group_runs(logs)) == 2


def test_ci_formats_group_findings_per_run():
    argv = ["diagnose", PP, CLEAN, "-f"]
    data = json.loads(RUNNER.invoke(app, [*argv, "json"]).stdout)
    assert [f["run"] for f in data["findings"]] == [1]
    assert [(r["index"], r["paths"], r["findings"]) for r in data["runs"]] == [
        (1, [PP], ["pp-cpu-offload"]),
        (2, [CLEAN], []),
    ]
    suites = ET.fromstring(RUNNER.invoke(app, [*argv, "junit"]).stdout).findall("testsuite")
    assert [s.get("name").split(":")[0] for s in suites] == ["offloaddoctor run 1 of 2", "offloaddoctor run 2 of 2"]
    assert RUNNER.invoke(app, [*argv, "github"]).stdout.startswith("::error file=")
    assert "title=run 1 of 2%3A pp-cpu-offload" in RUNNER.invoke(app, [*argv, "github"]).stdout
    markdown = RUNNER.invoke(app, [*argv, "markdown"]).stdout
    assert "## offloaddoctor: run 1 of 2" in markdown and "## offloaddoctor: run 2 of 2" in markdown


@pytest.mark.parametrize("command", ["diagnose", "metrics", "compare"])
def test_help_says_the_rule(command):
    text = " ".join(RUNNER.invoke(app, [command, "--help"]).stdout.split())
    assert ("one run" in text and "model shape" in text) or "rule diagnose uses" in text


@pytest.mark.parametrize("extra", [[], ["--ignore", "pp-cpu-offload"]])
def test_the_command_line_groups_and_suppresses_as_typer(extra, capsys):
    from offloaddoctor.cli import run_typer

    argv = ["diagnose", PP, CLEAN, "--format", "text", *extra]
    through_typer = RUNNER.invoke(app, argv)
    try:
        code = run_typer(argv)
    except SystemExit as exc:
        code = exc.code
    assert (code, capsys.readouterr().out) == (through_typer.exit_code, through_typer.stdout)
    assert "2 runs" in through_typer.stdout


def test_a_traceback_no_signature_explains_in_one_run_fails_the_several():
    """The exit code of issue 26.5 (an unexplained traceback exits 1) holds when the logs are several runs: the
    combined report carries no `unmatched` of its own, each run does."""
    unexplained = str(FIXTURES / "unmatched-failure" / "job.log")
    report = diagnose([unexplained, CLEAN], policy=Policy())
    assert len(report.runs) == 2 and report.unmatched is None
    assert Policy().failed(report) and not Policy(fail_on="never").failed(report)
    assert RUNNER.invoke(app, ["diagnose", unexplained, CLEAN, "-f", "text"]).exit_code == 1
    assert RUNNER.invoke(app, ["diagnose", unexplained, CLEAN, "-f", "text", "--fail-on", "never"]).exit_code == 0


def test_each_run_says_the_dialect_its_fixes_are_printed_in():
    """A Megatron-LM run and a Megatron-Bridge run diagnosed together: each run's fix lines follow its own
    config (issue 26.3), and the JSON says which per run."""
    bridge = str(FIXTURES / "bridge-summary-no-offload-oom" / "job.log")
    report = diagnose([PP, bridge], policy=Policy())
    assert [run.fix_dialect for run in report.runs] == ["megatron-lm", "bridge"]
    assert report.runs[0].findings[0].overrides[0].startswith("--")
    assert all(" " not in line for line in report.runs[1].findings[0].overrides if not line.startswith("export"))
    data = json.loads(RUNNER.invoke(app, ["diagnose", PP, bridge, "-f", "json"]).stdout)
    assert [run["fix_dialect"] for run in data["runs"]] == ["megatron-lm", "bridge"]
    assert data["fix_dialect"] == "megatron-lm"  # the first run's
    schema_validator("report.schema.json").validate(data)
