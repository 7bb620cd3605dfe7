"""A suppressed finding is said, in every format, with what suppressed it (issue 26.2): the text report never
says the log is clean when a finding was only suppressed."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from offloaddoctor.cli import app

from tests.conftest import FIXTURES, RUNNER

OOM = str(FIXTURES / "oom-capacity-expandable" / "job.log")  # its one finding is oom-capacity
CLEAN_SENTENCE = "The log shows no error that offloaddoctor knows, and no traceback."


@pytest.fixture
def in_empty_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_text_says_what_ignore_left_out(in_empty_dir, snapshot):
    result = RUNNER.invoke(app, ["diagnose", OOM, "--ignore", "oom-capacity", "-f", "text"])
    assert CLEAN_SENTENCE not in result.stdout
    assert result.stdout.replace(str(FIXTURES), "fixtures") == snapshot


def test_text_names_the_project_file_that_suppressed(in_empty_dir, snapshot):
    (in_empty_dir / ".offloaddoctor.yaml").write_text("ignore:\n  - {id: oom-capacity, reason: 'known small GPU'}\n")
    result = RUNNER.invoke(app, ["diagnose", OOM, "-f", "text"])
    assert CLEAN_SENTENCE not in result.stdout
    text = result.stdout.replace(str(FIXTURES), "fixtures").replace(str(in_empty_dir), "<project>")
    assert "by <project>/.offloaddoctor.yaml: known small GPU" in text
    assert text == snapshot


@pytest.mark.parametrize("output_format", ["terminal", "markdown", "github"])
def test_every_format_says_it(in_empty_dir, output_format):
    out = RUNNER.invoke(app, ["diagnose", OOM, "--ignore", "oom-capacity", "-f", output_format]).stdout
    assert "1 suppressed" in out
    if output_format != "github":  # GitHub's job summary (markdown) has the list; its log line the count
        assert "suppressed: oom-capacity, 1 occurrence, by --ignore" in " ".join(out.split())
        assert CLEAN_SENTENCE not in " ".join(out.split())


def test_json_and_junit_say_by_what(in_empty_dir):
    argv = ["diagnose", OOM, "--ignore", "oom-capacity", "-f"]
    data = json.loads(RUNNER.invoke(app, [*argv, "json"]).stdout)
    assert data["suppressed"] == [
        {"id": "oom-capacity", "reason": "--ignore on the command line", "by": "--ignore", "occurrences": 1}
    ]
    assert data["project_file"] is None
    root = ET.fromstring(RUNNER.invoke(app, [*argv, "junit"]).stdout)
    assert root.get("skipped") == "1"
