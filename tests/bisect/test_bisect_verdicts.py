"""Run mode's verdicts, `git bisect run`'s way: a run that failed for another reason is no evidence either
way; and the test command's output is kept within a bound."""

from __future__ import annotations

import pytest

from offloaddoctor.bisect import spool as spool_module
from offloaddoctor.bisect.config_mode import bisect_config
from offloaddoctor.bisect.run_mode import bisect_run, judge_run, run_and_judge
from offloaddoctor.bisect.search import BAD, GOOD, SKIP
from offloaddoctor.bisect.spool import OutputSpool

from tests.conftest import builtin_catalog
from tests.git_repos import make_repo
from tests.bisect.test_bisect import PP_ERROR, RUN_SH, config

CATALOG = builtin_catalog()
TRACEBACK_SH = (
    "#!/bin/sh\n"
    "echo 'Traceback (most recent call last):'\n"
    "echo '  File \"train.py\", line 3, in <module>'\n"
    "echo \"ModuleNotFoundError: No module named 'apex'\"\n"
    "exit 1\n"
)


@pytest.fixture
def unrelated_failures(tmp_path):
    """Fifteen commits: 4 turns offloading on with PP 4 (the failure bisected); 5 to 12 crash on an import
    before training starts (6 asks to be skipped, 8 calls a launcher that does not exist); 13 and 14 fail
    as 4 does. Counting the crashes as good named commit 13."""
    commits = [({"cfg.yaml": config(100), "run.sh": RUN_SH}, "initial")]
    commits += [({"cfg.yaml": config(100 + i)}, f"tune {i}") for i in (1, 2, 3)]
    commits.append(({"cfg.yaml": config(100, offload=True)}, "offload activations"))
    for i in range(5, 13):
        script = {6: "#!/bin/sh\nexit 125\n", 8: "#!/bin/sh\n./launch-missing.sh\n"}.get(i, TRACEBACK_SH)
        commits.append(({"run.sh": script, "step.txt": str(i)}, f"broken import {i}"))
    commits.append(({"run.sh": RUN_SH}, "import fixed"))
    commits.append(({"README": "docs\n"}, "docs"))
    return make_repo(tmp_path, commits)


def test_a_run_that_fails_for_another_reason_is_skipped_not_good(unrelated_failures):
    repo, shas = unrelated_failures
    assert bisect_config(str(repo), shas[0], shas[-1], "cfg.yaml", CATALOG).first_bad.sha == shas[4]
    steps: list[str] = []
    result = bisect_run(str(repo), shas[0], shas[-1], "sh run.sh", CATALOG, progress=steps.append)
    assert result.first_bad.sha == shas[4]
    verdicts = {t.commit.subject: f"{t.outcome.verdict}: {t.outcome.reason}" for t in result.tested}
    assert verdicts["initial"] == "good: exit 0, log shows no error finding"
    assert verdicts["offload activations"] == "bad: log shows pp-cpu-offload (exit 1)"
    assert verdicts["broken import 7"] == (
        "skip: exit 1, not this failure: log shows no error finding (no finding explains it)"
    )
    assert verdicts["broken import 6"] == "skip: exit 125, the command asked to skip this commit"
    assert verdicts["broken import 8"].startswith("skip: exit 127, command not found")
    # The progress lines say which rule decided each commit.
    assert "  skipped: exit 127, command not found (git bisect run would call it bad)" in steps
    assert "  good: exit 0, log shows no error finding" in steps
    assert "  bad: log shows pp-cpu-offload (exit 1)" in steps


@pytest.mark.parametrize(
    ("exit_code", "timed_out", "failing", "errors", "verdict", "reason"),
    [
        (0, False, (), (), GOOD, "exit 0, log shows no pp-cpu-offload"),
        (1, False, ("pp-cpu-offload",), ("pp-cpu-offload",), BAD, "log shows pp-cpu-offload (exit 1)"),
        (0, False, ("pp-cpu-offload",), ("pp-cpu-offload",), BAD, "log shows pp-cpu-offload (exit 0)"),
        (None, True, ("pp-cpu-offload",), (), BAD, "log shows pp-cpu-offload (timed out)"),
        (-9, False, ("pp-cpu-offload",), (), BAD, "log shows pp-cpu-offload (exit -9)"),
        (None, True, (), (), SKIP, "timed out after 30 s"),
        (-9, False, (), (), SKIP, "the command was killed by SIGKILL (exit 137)"),
        (137, False, (), (), SKIP, "the command was killed (exit 137)"),
        (125, False, (), (), SKIP, "exit 125, the command asked to skip this commit"),
        (126, False, (), (), SKIP, "exit 126, command found but cannot run (git bisect run would call it bad)"),
        (127, False, (), (), SKIP, "exit 127, command not found (git bisect run would call it bad)"),
        (
            1,
            False,
            (),
            ("oom-capacity",),
            SKIP,
            "exit 1, not this failure: log shows no pp-cpu-offload (it shows oom-capacity)",
        ),
        (0, False, (), ("oom-capacity",), GOOD, "exit 0, log shows no pp-cpu-offload"),
    ],
)
def test_judge_run_rules(exit_code, timed_out, failing, errors, verdict, reason):
    outcome = judge_run(exit_code, timed_out, 30, failing, errors, "pp-cpu-offload")
    assert (outcome.verdict, outcome.reason) == (verdict, reason)


def test_spool_keeps_the_head_and_the_tail_and_says_what_was_cut(tmp_path):
    lines = b"".join(f"line {i}\n".encode() for i in range(20000))
    spool = OutputSpool(tmp_path, head_bytes=1000, tail_bytes=5000)
    for start in range(0, len(lines), 777):
        spool.write(lines[start : start + 777])
    kept = spool.finish().read_bytes()
    assert kept.startswith(lines[:1000])
    assert kept.endswith(lines[-5000:])
    assert len(kept) <= 1000 + 1 + 2 * 5000
    assert lines[1000:].endswith(kept[1001:])  # a line break between head and tail, then only the tail
    assert spool.note == (
        f"output cut: kept the first 1000 bytes and the last {(len(kept) - 1001) / 1024:.2f} KiB "
        f"of {len(lines) / 1024:.2f} KiB"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["output.log"]


def test_spool_keeps_short_output_whole(tmp_path):
    spool = OutputSpool(tmp_path, head_bytes=1000, tail_bytes=5000)
    spool.write(b"a" * 999)
    spool.write(b"b" * 4000)
    assert spool.finish().read_bytes() == b"a" * 999 + b"b" * 4000
    assert spool.note is None


def test_run_output_is_capped_and_the_failure_at_its_end_still_found(tmp_path, monkeypatch):
    monkeypatch.setattr(spool_module, "OUTPUT_HEAD_BYTES", 4096)
    monkeypatch.setattr(spool_module, "OUTPUT_TAIL_BYTES", 65536)
    outcome = run_and_judge(f"seq 1 400000; echo '{PP_ERROR}'; exit 1", tmp_path, CATALOG)
    assert outcome.verdict == BAD
    assert outcome.reason.startswith("log shows pp-cpu-offload (exit 1); output cut: kept the first 4.00 KiB and the")
