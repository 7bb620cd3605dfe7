"""bisect in every mode, on throwaway repos; the user's repository must come out byte-identical."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from offloaddoctor.bisect.config_mode import bisect_config
from offloaddoctor.bisect.delta import bisect_configs, ddmin
from offloaddoctor.bisect.run_mode import bisect_run
from offloaddoctor.bisect.search import BAD, GOOD, SKIP, Outcome, find_first_bad
from offloaddoctor.bisect.worktree import PREFIX
from offloaddoctor.cli import app
from offloaddoctor.errors import UserError

from tests.conftest import RUNNER, builtin_catalog

from tests.git_repos import dirty_up, fingerprint, git, make_repo

CATALOG = builtin_catalog()
PP_ERROR = "ValueError: Currently there is no support for Pipeline parallelism with CPU offloading"


def config(iters: int, offload: bool = False, recompute: bool = False) -> str:
    text = "model:\n  num_layers: 8\n  pipeline_model_parallel_size: 4\n"
    if offload:
        text += "  cpu_offloading: true\n"
    if recompute:
        text += "  recompute_granularity: full\n"
    return text + f"train:\n  iters: {iters}\n"


# A launcher that prints MCore's real error when the config turns offloading on with PP 4.
RUN_SH = (
    "#!/bin/sh\n"
    "echo 'iteration 1/10 | elapsed time per iteration (ms): 100.0'\n"
    f"if grep -q 'cpu_offloading: true' cfg.yaml; then echo '{PP_ERROR}'; exit 1; fi\n"
)


@pytest.fixture
def history(tmp_path):
    """Seven commits; commit 4 (index 4) turns activation offloading on; commit 2 has broken YAML."""
    commits = [
        ({"cfg.yaml": config(100), "run.sh": RUN_SH}, "initial"),
        ({"cfg.yaml": config(200)}, "longer run"),
        ({"cfg.yaml": "model:\n  num_layers: [8\n"}, "typo"),
        ({"cfg.yaml": config(300)}, "fix typo"),
        ({"cfg.yaml": config(300, offload=True)}, "offload activations"),
        ({"cfg.yaml": config(400, offload=True)}, "even longer"),
        ({"README": "docs\n"}, "docs"),
    ]
    return make_repo(tmp_path, commits)


def test_config_mode_finds_the_commit_and_the_key(history):
    repo, shas = history
    result = bisect_config(str(repo), shas[0], shas[-1], "cfg.yaml", CATALOG)
    assert result.first_bad.sha == shas[4]
    assert result.first_bad.subject == "offload activations"
    assert result.first_bad.author == "Ada Tester <ada@example.com>"
    assert result.last_good.sha == shas[3]
    assert result.failing == ("pp-cpu-offload",)
    changed = {c.key: c for c in result.changes}
    assert set(changed) == {"model.cpu_offloading"}
    assert changed["model.cpu_offloading"].read_by_failing_rule
    assert changed["model.cpu_offloading"].after_source == f"{shas[4][:12]}:cfg.yaml:4"


def test_config_mode_reports_skipped_commits_and_unrelated_changes_unmarked(tmp_path):
    repo, shas = make_repo(
        tmp_path,
        [
            ({"cfg.yaml": config(100)}, "a"),
            ({"cfg.yaml": "model: [\n"}, "broken"),
            ({"other.txt": "x"}, "unrelated"),
            ({"cfg.yaml": None}, "config deleted"),
            ({"cfg.yaml": config(900, offload=True)}, "back, offloading and longer"),
        ],
    )
    result = bisect_config(str(repo), shas[0], shas[-1], "cfg.yaml", CATALOG)
    skipped = {t.commit.sha: t.outcome.reason for t in result.skipped}
    assert shas[3] in skipped and "not in this commit" in skipped[shas[3]]
    assert all(t.outcome.verdict == SKIP for t in result.tested if t.commit.sha in (shas[1], shas[3]))
    # The search cannot see past the skipped commits: it names every candidate, like git bisect.
    assert result.first_bad is None
    assert [c.sha for c in result.candidates][-1] == shas[4]
    marks = {c.key: c.read_by_failing_rule for c in result.changes}
    assert marks["model.cpu_offloading"] is True and marks["train.iters"] is False


def test_ends_are_verified_and_ancestry_is_required(history):
    repo, shas = history
    with pytest.raises(UserError, match="does not pass"):
        bisect_config(str(repo), shas[5], shas[6], "cfg.yaml", CATALOG)
    with pytest.raises(UserError, match="does not fail"):
        bisect_config(str(repo), shas[0], shas[3], "cfg.yaml", CATALOG)
    with pytest.raises(UserError, match="not an ancestor"):
        bisect_config(str(repo), shas[6], shas[0], "cfg.yaml", CATALOG)
    git(repo, "checkout", "-q", "-b", "side", shas[1])
    (repo / "side.txt").write_text("x")
    git(repo, "add", "side.txt")
    git(repo, "commit", "-q", "-m", "side")
    with pytest.raises(UserError, match="not an ancestor"):
        bisect_config(str(repo), "side", shas[6], "cfg.yaml", CATALOG)
    with pytest.raises(UserError, match="not a commit"):
        bisect_config(str(repo), "no-such-rev", shas[6], "cfg.yaml", CATALOG)


def test_signature_filter(history):
    repo, shas = history
    with pytest.raises(UserError, match="does not fail"):
        bisect_config(str(repo), shas[0], shas[-1], "cfg.yaml", CATALOG, signature_id="recompute-cpu-offload")
    result = bisect_config(str(repo), shas[0], shas[-1], "cfg.yaml", CATALOG, signature_id="pp-cpu-offload")
    assert result.first_bad.sha == shas[4]


def test_user_state_is_untouched_by_config_and_run_modes(history, tmp_path, monkeypatch):
    repo, shas = history
    git(repo, "bisect", "start", "--no-checkout", shas[-1], shas[0])  # a bisect of the user's own, in progress
    dirty_up(repo)
    before = fingerprint(repo)
    # A temporary directory of this test's own: a bisect running beside it (pytest -n, another checkout's suite)
    # leaves its worktrees in the shared one for a while.
    (tmp_path / "temp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "temp"))
    temp_before = set(Path(tempfile.gettempdir()).glob(PREFIX + "*"))
    bisect_config(str(repo), shas[0], shas[-1], "cfg.yaml", CATALOG)
    bisect_run(str(repo), shas[0], shas[-1], "sh run.sh", CATALOG)
    with pytest.raises(UserError):
        bisect_run(str(repo), shas[5], shas[6], "sh run.sh", CATALOG)  # a failure path, too
    assert fingerprint(repo) == before
    assert set(Path(tempfile.gettempdir()).glob(PREFIX + "*")) == temp_before


def test_run_mode_diagnoses_each_commit_in_a_worktree(history):
    repo, shas = history
    steps = []
    result = bisect_run(
        str(repo), shas[0], shas[-1], "sh run.sh", CATALOG, config_path="cfg.yaml", progress=steps.append
    )
    assert result.first_bad.sha == shas[4]
    assert result.failing == ("pp-cpu-offload",)
    assert any(c.key == "model.cpu_offloading" and c.read_by_failing_rule for c in result.changes)
    assert steps[0].startswith("[good end]") and any(s.startswith("[step 1/") for s in steps)


def test_run_mode_log_path_timeouts_and_kills_are_skips(tmp_path):
    writes_log = "#!/bin/sh\nmkdir -p out\n" + RUN_SH.replace("echo '", "echo >>out/train.log '", 2).split("\n", 1)[1]
    repo, shas = make_repo(
        tmp_path,
        [
            ({"cfg.yaml": config(1), "run.sh": "#!/bin/sh\nmkdir -p out; : > out/train.log\n"}, "good"),
            ({"run.sh": "#!/bin/sh\nsleep 30\n"}, "hangs"),
            ({"run.sh": "#!/bin/sh\nkill -9 $$\n"}, "killed"),
            ({"cfg.yaml": config(1, offload=True), "run.sh": writes_log}, "offload"),
        ],
    )
    result = bisect_run(str(repo), shas[0], shas[-1], "sh run.sh", CATALOG, log_path="out/train.log", timeout=1)
    reasons = {t.commit.subject: t.outcome.reason for t in result.tested}
    assert "timed out after 1 s" in reasons["hangs"]
    assert "killed" in reasons["killed"] or "no log" in reasons["killed"]
    assert {c.sha for c in result.candidates} == set(shas[1:])


def test_bisect_step_under_git_bisect_run(history):
    repo, shas = history
    git(repo, "bisect", "start", shas[-1], shas[0])
    out = git(repo, "bisect", "run", sys.executable, "-m", "offloaddoctor", "bisect-step", "--config", "cfg.yaml")
    assert f"{shas[4]} is the first bad commit" in out
    git(repo, "bisect", "reset")


def test_bisect_step_exit_codes(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "good.yaml").write_text(config(1))
    (tmp_path / "bad.yaml").write_text(config(1, offload=True))
    (tmp_path / "broken.yaml").write_text("model: [\n")
    assert RUNNER.invoke(app, ["bisect-step", "--config", "good.yaml"]).exit_code == 0
    assert RUNNER.invoke(app, ["bisect-step", "--config", "bad.yaml"]).exit_code == 1
    assert RUNNER.invoke(app, ["bisect-step", "--config", "broken.yaml"]).exit_code == 125
    assert RUNNER.invoke(app, ["bisect-step", "--config", "missing.yaml"]).exit_code == 125
    assert RUNNER.invoke(app, ["bisect-step", "--run", "kill -9 $$"]).exit_code == 125
    assert RUNNER.invoke(app, ["bisect-step", "--run", "sleep 5", "--timeout", "0.5"]).exit_code == 125
    assert RUNNER.invoke(app, ["bisect-step", "--run", f"echo '{PP_ERROR}'; exit 137"]).exit_code == 1
    assert RUNNER.invoke(app, ["bisect-step", "--run", "echo fine"]).exit_code == 0
    assert RUNNER.invoke(app, ["bisect-step"]).exit_code == 125


def test_two_configs_are_minimised(tmp_path):
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text(config(100))
    bad.write_text(config(500, offload=True) + "  tensor_model_parallel_size: 2\nlogger:\n  interval: 5\n")
    result = bisect_configs(str(good), str(bad), CATALOG)
    assert [c.key for c in result.changes] == ["model.cpu_offloading"]
    assert result.total_changes == 4
    assert result.failing == ("pp-cpu-offload",)
    with pytest.raises(UserError, match="does not fail"):
        bisect_configs(str(good), str(good), CATALOG)
    with pytest.raises(UserError, match="does not pass"):
        bisect_configs(str(bad), str(bad), CATALOG)


def test_two_configs_need_every_key_of_a_joint_cause(tmp_path):
    # Offloading alone is fine at PP 1; the failure needs both changes.
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text("model:\n  pipeline_model_parallel_size: 1\n")
    bad.write_text("model:\n  pipeline_model_parallel_size: 2\n  cpu_offloading: true\n  hidden_size: 4096\n")
    result = bisect_configs(str(good), str(bad), CATALOG, signature_id="pp-cpu-offload")
    assert sorted(c.key for c in result.changes) == ["model.cpu_offloading", "model.pipeline_model_parallel_size"]


@given(st.sets(st.integers(0, 30), min_size=1, max_size=4), st.integers(1, 31))
def test_ddmin_returns_a_one_minimal_failing_subset(culprits, size):
    items = [str(i) for i in range(max(size, max(culprits) + 1))]
    fails = lambda subset: {str(c) for c in culprits} <= set(subset)  # noqa: E731
    found = ddmin(items, fails)
    assert fails(found)
    assert all(not fails([x for x in found if x != removed]) for removed in found)


def test_search_with_skips_names_every_candidate():
    commits = [str(i) for i in range(1, 21)]
    verdict = lambda sha: Outcome(SKIP) if sha in {"8", "9"} else Outcome(BAD if int(sha) >= 9 else GOOD)  # noqa: E731
    result = find_first_bad("0", commits, verdict)
    assert result.candidates == ["8", "9", "10"] and result.last_good == "7"
    clean = find_first_bad("0", commits, lambda sha: Outcome(BAD if int(sha) >= 13 else GOOD))
    assert clean.first_bad == "13" and len(clean.tested) <= 5


def test_cli_json_and_bad_usage(history, monkeypatch):
    repo, shas = history
    monkeypatch.chdir(repo)
    result = RUNNER.invoke(
        app, ["bisect", "--good", shas[0], "--bad", shas[-1], "--config", "cfg.yaml", "--format", "json", "-q"]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["schema_version"] == 1 and data["first_bad"]["sha"] == shas[4]
    assert data["changed_keys"][0]["key"] == "model.cpu_offloading" and data["changed_keys"][0]["change"] == "added"
    for args, fragment in [
        (["bisect"], "--good"),
        (["bisect", "--good", shas[0], "--bad", shas[-1]], "--config"),
        (["bisect", "--good-config", "a.yaml"], "two-config"),
        (["bisect", "--good", shas[0], "--bad", shas[-1], "--config", "/etc/hostname"], "not inside the repository"),
        (
            ["bisect", "--good", shas[0], "--bad", shas[-1], "--config", "cfg.yaml", "--repo", "/"],
            "not a git repository",
        ),
    ]:
        bad = RUNNER.invoke(app, args)
        assert bad.exit_code == 2, (args, bad.output)
        assert len(bad.stderr.strip().splitlines()) == 1 and fragment in bad.stderr, bad.stderr
