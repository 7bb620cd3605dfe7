"""Policy is the library's: `api.diagnose` applies the project file as the CLI does, and every command
loads the catalogue the same way (built-ins, the project's `signatures:`, `--signatures`)."""

from __future__ import annotations

import json
import os
import time

import pytest

from offloaddoctor import api
from offloaddoctor.cli import app
from offloaddoctor.errors import UserError
from offloaddoctor.policy import Policy, load_policy

from tests.conftest import FIXTURES, RUNNER
from tests.catalog.test_team_signatures import team_dir

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


# ---- which project file is obeyed (issue 27.5) ----------------------------------------------------------------

OOM_LOG = FIXTURES / "oom-capacity-recorded" / "job.log"


def _planted(directory, text="fail_on: never\n"):
    directory.mkdir(parents=True, exist_ok=True)
    planted = directory / ".offloaddoctor.yaml"
    planted.write_text(text)
    planted.chmod(0o644)
    return planted


def test_the_search_stops_at_the_repository_root(tmp_path):
    _planted(tmp_path)  # above the repository: not the project's
    work = tmp_path / "repo" / "sub"
    work.mkdir(parents=True)
    (tmp_path / "repo" / ".git").mkdir()
    assert load_policy(work).source is None
    inside = _planted(tmp_path / "repo")
    assert load_policy(work).source == str(inside)


def test_the_search_stops_at_home(tmp_path, monkeypatch):
    _planted(tmp_path)
    home = tmp_path / "home"
    (home / "job").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    assert load_policy(home / "job").source is None


def test_a_project_file_others_can_write_is_ignored_with_a_note(tmp_path, monkeypatch):
    planted = _planted(tmp_path)
    planted.chmod(0o666)
    monkeypatch.chdir(tmp_path)
    result = RUNNER.invoke(app, ["diagnose", str(OOM_LOG), "--format", "text"])
    assert result.exit_code == 1, result.output  # the OOM fails the run: `fail_on: never` was not obeyed
    assert f"note: {planted}: project settings ignored: writable by group or others" in result.stdout
    assert "project settings: " not in result.stdout


def test_a_project_file_owned_by_another_user_is_ignored(tmp_path, monkeypatch):
    planted = _planted(tmp_path)
    owner = os.stat(planted).st_uid
    if owner == 0:
        os.chown(planted, 4242, -1)  # we are root: give it to someone else
    else:
        monkeypatch.setattr(os, "getuid", lambda: owner + 1)
    policy = load_policy(tmp_path)
    assert policy.source is None and policy.fail_on == "error"
    assert policy.warnings == [
        f"{planted}: project settings ignored: owned by another user (uid {os.stat(planted).st_uid})"
    ]


def test_the_report_names_the_project_file_it_obeyed(tmp_path, monkeypatch):
    planted = _planted(tmp_path, "fail_on: warning\n")
    monkeypatch.chdir(tmp_path)
    text = RUNNER.invoke(app, ["diagnose", str(PP_LOG), "--format", "text"])
    assert f"project settings: {planted}" in text.stdout
    document = json.loads(RUNNER.invoke(app, ["diagnose", str(PP_LOG), "--format", "json"]).stdout)
    assert document["project_file"] == str(planted)
    assert api.diagnose([str(PP_LOG)], policy=Policy()).project_file is None


def test_an_alias_bomb_in_the_project_file_is_refused_quickly(tmp_path):
    # 400 bytes that PyYAML expanded to 9**9 list items (2.58 GB, 16 s) before the configs' guard applied here.
    levels = ["a0: &a0 [x,x,x,x,x,x,x,x,x]"] + [f"a{n}: &a{n} [{','.join([f'*a{n - 1}'] * 9)}]" for n in range(1, 9)]
    _planted(tmp_path, "\n".join(levels) + "\n")
    started = time.monotonic()
    with pytest.raises(UserError, match="alias bomb"):
        load_policy(tmp_path)
    assert time.monotonic() - started < 5


def test_other_commands_warn_on_stderr_of_a_project_file_they_ignore(tmp_path, monkeypatch):
    planted = _planted(tmp_path, "ignore:\n  - {id: oom-capacity, reason: planted}\n")
    planted.chmod(0o664)
    monkeypatch.chdir(tmp_path)
    result = RUNNER.invoke(app, ["explain", "oom-capacity"])
    assert result.exit_code == 0
    assert (
        result.stderr
        == f"offloaddoctor: warning: {planted}: project settings ignored: writable by group or others (chmod go-w to use it)\n"
    )


def test_the_project_file_is_what_suppressed_its_ignores(tmp_path):
    """Each id the project file ignores is suppressed `by` that file (Policy.ignored_by); the notes on project
    files passed over stay notes (Policy.warnings): two fields of one dataclass, not one in the other's place."""
    project = tmp_path / ".offloaddoctor.yaml"
    project.write_text("ignore:\n  - {id: pp-cpu-offload, reason: known}\n")
    policy = load_policy(tmp_path)
    assert policy.ignored_by == {"pp-cpu-offload": str(project)}
    assert policy.warnings == []
