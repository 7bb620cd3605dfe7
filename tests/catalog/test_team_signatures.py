"""A team's own signatures: loading next to the built-ins, `signatures test` and `signatures lint`."""

from __future__ import annotations

import json

import pytest

from offloaddoctor import api
from offloaddoctor.cli import app

from tests.conftest import RUNNER


GOOD = """id: {id}
title: Checkpoint storage full
severity: error
priority: 40
symptom: "OSError: [Errno 28] No space left on device while saving a checkpoint"
cause: The checkpoint directory ran out of space.
match:
  literals: ["{literal}"]
  patterns: ['{pattern}']
confirm: ["df -h on the checkpoint directory"]
fix: {{summary: Free space or point save to a larger volume.}}
references: [{{doc: team runbook}}]
examples:
{examples}
"""
EXAMPLES = """  - {expect: match, log: "OSError: [Errno 28] No space left on device"}
  - {expect: no_match, log: "OSError: [Errno 2] No such file or directory"}"""


def team_dir(tmp_path, name="team", **fields):
    values = {
        "id": "checkpoint-disk-full",
        "literal": "No space left",
        "pattern": r"Errno 28\]\s+No space left",
        "examples": EXAMPLES,
        **fields,
    }
    directory = tmp_path / name
    directory.mkdir()
    (directory / f"{values['id']}.yaml").write_text(GOOD.format(**values))
    return directory


def test_team_signature_is_used_by_diagnose(tmp_path):
    log = tmp_path / "job.log"
    log.write_text("[rank3]: OSError: [Errno 28] No space left on device\n")
    result = RUNNER.invoke(app, ["diagnose", str(log), "--signatures", str(team_dir(tmp_path)), "-f", "json"])
    assert result.exit_code == 1
    assert json.loads(result.stdout)["findings"][0]["id"] == "checkpoint-disk-full"


def test_id_clash_is_one_clear_error_naming_both_files(tmp_path):
    clash = team_dir(tmp_path, id="pp-cpu-offload")
    result = RUNNER.invoke(app, ["signatures", "--signatures", str(clash)])
    assert result.exit_code == 2
    assert "duplicate id 'pp-cpu-offload'" in result.stderr and "signatures/pp-cpu-offload.yaml" in result.stderr


def test_signatures_test_prints_the_confusion_matrix(tmp_path):
    ok = RUNNER.invoke(app, ["signatures", "test", str(team_dir(tmp_path)), "--only"])
    assert ok.exit_code == 0, ok.stdout
    assert ok.stdout.splitlines()[1].split() == ["checkpoint-disk-full", "1", "0", "1", "0"]
    wrong = team_dir(
        tmp_path,
        name="wrong",
        examples="""  - {expect: match, log: "No space left on device"}
  - {expect: no_match, log: "OSError: [Errno 28] No space left on device"}""",
    )
    result = RUNNER.invoke(app, ["signatures", "test", str(wrong), "--only", "-f", "json"])
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert data["signatures"]["checkpoint-disk-full"] == {
        "true_positive": 0,
        "false_negative": 1,
        "true_negative": 0,
        "false_positive": 1,
    }
    assert data["total"] == data["signatures"]["checkpoint-disk-full"]
    assert {f["problem"] for f in data["failures"]} == {"did not fire (fired: nothing)", "fired on a no-match example"}
    everything = RUNNER.invoke(app, ["signatures", "test", str(team_dir(tmp_path, name="all"))])
    assert "pp-cpu-offload" in everything.stdout and everything.exit_code == 0


def test_signatures_test_refuses_only_without_a_dir_and_formats_it_cannot_print():
    result = RUNNER.invoke(app, ["signatures", "test", "--only"])
    assert result.exit_code == 2 and "--only needs at least one DIR" in result.stderr
    assert RUNNER.invoke(app, ["signatures", "test", "--format", "github"]).exit_code == 2


def test_lint_reports_errors_and_warnings(tmp_path):
    one_sided = team_dir(
        tmp_path, name="one", examples='  - {expect: match, log: "OSError: [Errno 28] No space left on device"}'
    )
    result = RUNNER.invoke(app, ["signatures", "lint", str(one_sided)])
    assert result.exit_code == 1 and "error: " in result.stdout and "no_match" in result.stdout
    sloppy = team_dir(tmp_path, literal="No", pattern=r".*Errno 28\]\s+No space left")
    result = RUNNER.invoke(app, ["signatures", "lint", str(sloppy)])
    assert result.exit_code == 0
    assert "warning: " in result.stdout and "starts with .*" in result.stdout and "'No' is short" in result.stdout
    nested = team_dir(tmp_path, name="nested", pattern=r"Errno 28\]\s+(?:No\s+){1,2}space left")
    result = RUNNER.invoke(app, ["signatures", "lint", str(nested)])
    assert result.exit_code == 0 and "polynomial backtracking of degree 2" in result.stdout
    hidden = team_dir(tmp_path, name="hidden", literal="disk full")
    assert "prefilter hides it" in RUNNER.invoke(app, ["signatures", "lint", str(hidden)]).stdout
    clean = RUNNER.invoke(app, ["signatures", "lint", str(team_dir(tmp_path, name="clean"))])
    assert clean.exit_code == 0 and clean.stdout.strip().endswith("0 error(s), 0 warning(s)")


def test_lint_reports_every_loader_problem_at_once(tmp_path):
    broken = team_dir(tmp_path, pattern=r"(a+)+ No space left")
    (broken / "other.yaml").write_text("id: other\ntitle: x\n")
    result = RUNNER.invoke(app, ["signatures", "lint", str(broken)])
    assert result.exit_code == 1
    assert "unbounded repeat" in result.stdout and "other.yaml" in result.stdout and "required field" in result.stdout


def test_a_signatures_path_that_is_not_a_directory_is_one_line(tmp_path):
    log = tmp_path / "job.log"
    log.write_text("iteration 1\n")
    result = RUNNER.invoke(app, ["diagnose", str(log), "--signatures", str(tmp_path / "missing")])
    assert result.exit_code == 2
    assert result.stderr == f"offloaddoctor: error: {tmp_path / 'missing'}: not a directory\n"


def test_a_missing_built_in_catalogue_says_so(tmp_path, monkeypatch):
    from offloaddoctor.catalog import loader

    monkeypatch.setattr(loader, "builtin_signature_dir", lambda: tmp_path / "gone")
    with pytest.raises(loader.CatalogError) as raised:
        loader.load_catalog(api.vocabulary())
    assert str(raised.value) == f"{tmp_path / 'gone'}: the built-in catalogue is missing (a broken install?)"


def test_one_function_says_whether_a_signature_is_a_teams(tmp_path, monkeypatch):
    """The scanner (user-pattern budget) and the loader (duplicate-id message) ask catalog.loader.is_team_signature;
    a path reached through a link to the built-in catalogue is the built-in catalogue's."""
    from offloaddoctor.scanning.scanner import build_matchers
    from offloaddoctor.catalog import loader

    team = team_dir(tmp_path)
    link = tmp_path / "builtin-link"
    link.symlink_to(loader.builtin_signature_dir(), target_is_directory=True)
    assert loader.is_team_signature(team / "checkpoint-disk-full.yaml")
    assert not loader.is_team_signature(loader.builtin_signature_dir() / "recompute-cpu-offload.yaml")
    assert not loader.is_team_signature(link / "recompute-cpu-offload.yaml")
    catalog = api.load_catalog([team])
    monkeypatch.setattr(loader, "is_team_signature", lambda path: True)  # the scanner asks, it does not decide
    assert all(m.user for m in build_matchers(catalog))


def test_the_built_in_catalogue_is_resolved_once_not_once_a_signature(monkeypatch):
    """Start-up (issue 28.2): asking of every signature whether it is a team's resolved the built-in directory
    again each time (~70 path resolutions for 17 signatures, an lstat per path component each)."""
    from pathlib import Path

    from offloaddoctor.scanning.scanner import build_matchers

    catalog = api.load_catalog()
    resolved: list[Path] = []
    real_resolve = Path.resolve

    def counting(self, strict=False):
        resolved.append(self)
        return real_resolve(self, strict)

    monkeypatch.setattr(Path, "resolve", counting)
    matchers = build_matchers(catalog)
    assert not any(m.user for m in matchers)
    assert len(resolved) <= len(matchers) + 1  # each signature's own file, the built-in directory at most once
