"""Generated signature pages are current; CI recipes parse and their offloaddoctor commands run."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from offloaddoctor.api import load_catalog
from offloaddoctor.cli import app
from offloaddoctor.render.signature_docs import pages

from tests.conftest import FIXTURES, REPO, RUNNER

RECIPES = REPO / "docs" / "ci"


def test_signature_pages_are_current():
    wanted = pages(load_catalog())
    out = REPO / "docs" / "signatures"
    stale = [name for name, text in wanted.items() if not (out / name).exists() or (out / name).read_text() != text]
    extra = [p.name for p in out.glob("*.md") if p.name not in wanted]
    assert not stale and not extra, f"run: python3 tools/gen_signature_docs.py (stale: {stale + extra})"


def test_every_signature_is_in_the_readme_catalogue_and_every_preflight_one_in_checks_table():
    catalog = load_catalog()
    readme = (REPO / "README.md").read_text()
    check_doc = (REPO / "docs" / "check-and-bisect.md").read_text()
    assert [s.id for s in catalog.signatures if f"`{s.id}`" not in readme] == []
    assert [s.id for s in catalog.signatures if s.preflight and f"`{s.id}`" not in check_doc] == []


def test_github_workflow_shape():
    workflow = yaml.safe_load((RECIPES / "github-actions.yml").read_text())
    steps = workflow["jobs"]["diagnose"]["steps"]
    assert any("offloaddoctor diagnose" in step.get("run", "") and "--format github" in step["run"] for step in steps)
    assert any(step.get("uses", "").startswith("actions/upload-artifact") for step in steps)
    # artifacts of another workflow's run are only found with its run id and a token
    [download] = [step for step in steps if step.get("uses", "").startswith("actions/download-artifact")]
    assert {"run-id", "github-token"} <= set(download["with"])


def test_gitlab_job_shape():
    job = yaml.safe_load((RECIPES / "gitlab-ci.yml").read_text())["offloaddoctor"]
    assert job["artifacts"]["reports"]["junit"] == "offloaddoctor.xml"


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_slurm_epilog_is_valid_bash_and_never_fails(tmp_path):
    script = RECIPES / "slurm-epilog.sh"
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    assert (
        subprocess.run(
            ["bash", str(script)], env={"LOG_ROOT": str(tmp_path), "SLURM_JOB_ID": "42", "PATH": "/usr/bin:/bin"}
        ).returncode
        == 0
    )


@pytest.mark.skipif(shutil.which("bash") is None or shutil.which("timeout") is None, reason="needs bash and timeout")
def test_slurm_epilog_writes_the_report_next_to_the_logs(tmp_path):
    tool = Path(sys.executable).parent / "offloaddoctor"
    if not tool.exists():
        pytest.skip("offloaddoctor is not installed next to this interpreter")
    job_dir = tmp_path / "42"
    (job_dir / "rank0").mkdir(parents=True)
    shutil.copy(FIXTURES / "pp-cpu-offload" / "job.log", job_dir / "rank0" / "job.log")
    env = {"LOG_ROOT": str(tmp_path), "SLURM_JOB_ID": "42", "PATH": f"{tool.parent}:/usr/bin:/bin"}
    done = subprocess.run(["bash", str(RECIPES / "slurm-epilog.sh")], env=env)
    assert done.returncode == 0  # a finding must not fail the epilog
    report = json.loads((job_dir / "offloaddoctor.json").read_text())
    assert [f["id"] for f in report["findings"]][:1] == ["pp-cpu-offload"]
    assert sorted(p.name for p in job_dir.iterdir()) == ["offloaddoctor.json", "offloaddoctor.stderr", "rank0"]


def recipe_commands():
    for path in sorted(RECIPES.iterdir()):
        for line in path.read_text().replace("\\\n", " ").splitlines():  # join shell continuation lines
            found = re.search(r"(?<![\w-])offloaddoctor (diagnose .*)$", line)
            if found:
                yield pytest.param(found.group(1), id=path.name)


@pytest.mark.parametrize("command", list(recipe_commands()))
def test_recipe_commands_run(command, tmp_path, monkeypatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    (tmp_path / "logs").mkdir()
    shutil.copy(FIXTURES / "pp-cpu-offload" / "job.log", tmp_path / "logs" / "job.log")
    (tmp_path / "configs").mkdir()
    shutil.copy(
        FIXTURES / "configs" / "bridge-run-config-optimizer-offload.yaml", tmp_path / "configs" / "run_config.yaml"
    )
    monkeypatch.chdir(tmp_path)
    words = [
        w.replace('"$job_dir"', "logs").replace("$job_dir", "logs")
        for w in shlex.split(command.split(">")[0].replace('"$job_dir"', "logs"))
    ]
    result = RUNNER.invoke(app, words)
    assert result.exit_code == (0 if "--fail-on never" in command else 1), result.output  # the log has an error
