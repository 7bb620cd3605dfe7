"""Policy is the library's: `api.diagnose` applies the project file as the CLI does, and every command
loads the catalogue the same way (built-ins, the project's `signatures:`, `--signatures`)."""

from __future__ import annotations

import pytest

from offloaddoctor import api
from offloaddoctor.cli import app
from offloaddoctor.errors import UserError
from offloaddoctor.policy import Policy

from .conftest import FIXTURES, RUNNER
from .test_team_signatures import team_dir

PP_LOG = FIXTURES / "pp-cpu-offload" / "job.log"


def test_api_diagnose_applies_the_project_files_suppressions(tmp_path, monkeypatch):
    (tmp_path / ".offloaddoctor.yaml").write_text("ignore:\n  - {id: pp-cpu-offload, reason: 'known issue #12'}\n")
    monkeypatch.chdir(tmp_path)
    report = api.diagnose([str(PP_LOG)])
    assert [f.id for f in report.findings] == [] and report.suppressed == {"pp-cpu-offload": "known issue #12"}
    assert [f.id for f in api.diagnose([str(PP_LOG)], policy=Policy()).findings] == ["pp-cpu-offload"]


def test_api_diagnose_refuses_an_unknown_ignored_id(tmp_path):
    with pytest.raises(UserError, match="unknown signature id 'pp-cpu-ofload'; did you mean pp-cpu-offload"):
        api.diagnose([str(PP_LOG)], policy=Policy(ignore={"pp-cpu-ofload": "typo"}))


def test_policy_fails_by_severity_after_suppression():
    report = api.diagnose([str(PP_LOG)], policy=Policy())
    assert Policy().failed(report) and not Policy(fail_on="never").failed(report)
    assert not Policy().add_command_line(ignore=["pp-cpu-offload"]).apply(report).findings


def test_every_command_reads_the_project_files_signature_directories(tmp_path, monkeypatch):
    team = team_dir(tmp_path, literal="No ")  # a three-byte literal: `signatures lint` warns about it
    (tmp_path / ".offloaddoctor.yaml").write_text(f"signatures: [{team.name}]\n")
    monkeypatch.chdir(tmp_path)
    explained = RUNNER.invoke(app, ["explain", "checkpoint-disk-full"])
    assert explained.exit_code == 0 and "Checkpoint storage full" in explained.stdout
    tested = RUNNER.invoke(app, ["signatures", "test"])
    assert tested.exit_code == 0 and "checkpoint-disk-full" in tested.stdout
    linted = RUNNER.invoke(app, ["signatures", "lint"])
    assert "checkpoint-disk-full.yaml" in linted.stdout and "'No '" in linted.stdout
    assert "checkpoint-disk-full" in api.load_catalog(policy=Policy(signature_dirs=[team])).ids
