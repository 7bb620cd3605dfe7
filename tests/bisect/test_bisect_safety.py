"""bisect under hostile conditions: git variables of a hook, signals of every kind, jobs that leave processes
behind, a `git worktree add` cut short, configs too large to read. The user's repository must come out
byte-identical and no process of the test command may survive."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from offloaddoctor.bisect import git as git_module
from offloaddoctor.bisect.config_mode import bisect_config
from offloaddoctor.bisect.git import Repo
from offloaddoctor.bisect.job import run_job
from offloaddoctor.bisect.run_mode import bisect_run
from offloaddoctor.bisect.worktree import temporary_worktree

from tests.conftest import builtin_catalog
from tests.git_repos import ENV, dirty_up, fingerprint, git, make_repo
from tests.bisect.test_bisect import config, history  # noqa: F401 - the fixture

CATALOG = builtin_catalog()
HANDLED = [signal.SIGHUP, signal.SIGQUIT, signal.SIGTERM, signal.SIGINT]


def alive(pid: int) -> bool:
    """Running, not a zombie waiting for its reaper."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def wait_for(path: Path, process: subprocess.Popen | None = None, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        if process is not None and process.poll() is not None:
            raise AssertionError(f"exited ({process.returncode}) before {path.name}: {process.communicate()}")
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)


def leaves_processes_behind(pids: Path) -> str:
    """A test command that starts a background job and a `setsid` grandchild (out of the process group and
    session), writes their pids and its own under PIDS, then waits."""
    return (
        f"sleep 300 & echo $! > {pids}/background; "
        f"setsid sh -c 'echo $$ > {pids}/escaped; exec sleep 300' & "
        f"echo $$ > {pids}/shell; "
        f"while [ ! -s {pids}/escaped ]; do sleep 0.01; done; "
    )


def pids_in(directory: Path) -> dict[str, int]:
    return {p.name: int(p.read_text()) for p in directory.iterdir() if p.read_text().strip()}


# --- 1. git variables that would redirect our git calls -----------------------------------------------


@pytest.mark.parametrize("index", ["the user's index", "another file"])
def test_git_index_file_from_a_hook_is_never_written(history, monkeypatch, tmp_path, index):  # noqa: F811
    repo, shas = history
    dirty_up(repo)  # a staged edit of cfg.yaml, among others
    staged_before = git(repo, "diff", "--cached", "--name-only")
    before = fingerprint(repo)
    other = tmp_path / "other-index"
    monkeypatch.setenv("GIT_INDEX_FILE", str(repo / ".git" / "index") if index == "the user's index" else str(other))
    result = bisect_run(str(repo), shas[0], shas[-1], "sh run.sh", CATALOG)
    bisect_config(str(repo), shas[0], shas[-1], "cfg.yaml", CATALOG)
    monkeypatch.delenv("GIT_INDEX_FILE")
    assert result.first_bad.sha == shas[4]
    assert git(repo, "diff", "--cached", "--name-only") == staged_before == "cfg.yaml\n"
    assert fingerprint(repo) == before
    assert not other.exists()


def test_git_dir_and_work_tree_of_another_repository_are_ignored(history, monkeypatch, tmp_path):  # noqa: F811
    repo, shas = history
    (tmp_path / "elsewhere").mkdir()
    elsewhere, _ = make_repo(tmp_path / "elsewhere", [({"x.txt": "x"}, "unrelated")])
    before, elsewhere_before = fingerprint(repo), fingerprint(elsewhere)
    heads = tmp_path / "heads"
    monkeypatch.setenv("GIT_DIR", str(elsewhere / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(elsewhere))
    # The command's own git calls see the worktree's commit, not the repository a hook pointed at.
    result = bisect_run(str(repo), shas[0], shas[-1], f"git rev-parse HEAD >> {heads}; sh run.sh", CATALOG)
    monkeypatch.delenv("GIT_DIR")
    monkeypatch.delenv("GIT_WORK_TREE")
    assert result.first_bad.sha == shas[4]
    assert set(heads.read_text().split()) == {t.commit.sha for t in result.tested}
    assert fingerprint(repo) == before and fingerprint(elsewhere) == elsewhere_before


# --- 2. signals, and processes the test command leaves behind ------------------------------------------


@pytest.mark.parametrize("signum", HANDLED, ids=lambda s: signal.Signals(s).name)
def test_every_signal_ends_the_job_and_removes_worktrees(history, tmp_path, signum):  # noqa: F811
    repo, shas = history
    dirty_up(repo)
    before = fingerprint(repo)
    pids, temp = tmp_path / "pids", tmp_path / "tmp"
    pids.mkdir()
    temp.mkdir()
    command = leaves_processes_behind(pids) + f"touch {pids}/../ready; sleep 300"
    process = subprocess.Popen(
        [sys.executable, "-m", "offloaddoctor", "bisect", "--good", shas[0], "--bad", shas[-1]]
        + ["--run", command, "--repo", str(repo)],
        env={**ENV, "TMPDIR": str(temp)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_for(tmp_path / "ready", process)
    started = pids_in(pids)
    assert set(started) == {"background", "escaped", "shell"} and all(map(alive, started.values()))
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 128 + signum, stderr
    assert stderr.splitlines()[-1] == (
        f"offloaddoctor: interrupted ({signal.Signals(signum).name}); test command ended, "
        "temporary worktrees removed, your checkout untouched"
    ), stderr
    assert "Traceback" not in stderr
    assert [name for name, pid in started.items() if alive(pid)] == []
    assert fingerprint(repo) == before
    assert list(temp.iterdir()) == []


def test_background_jobs_and_setsid_grandchildren_end_with_the_command(tmp_path):
    pids = tmp_path / "pids"
    pids.mkdir()
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    finished = run_job(leaves_processes_behind(pids) + "echo done", tmp_path, scratch)
    assert finished.exit_code == 0 and not finished.timed_out
    assert finished.output.read_text() == "done\n"
    assert [name for name, pid in pids_in(pids).items() if alive(pid)] == []

    for seconds in (0.5, 5):  # 5 s only where the command took more than half a second to start its processes
        for name in list(pids.iterdir()):
            name.unlink()
        command = leaves_processes_behind(pids) + f"touch {tmp_path}/ready; sleep 300"
        timed_out = run_job(command, tmp_path, scratch, seconds)
        if (tmp_path / "ready").exists():
            break
    assert (tmp_path / "ready").exists(), "the timeout was too short for this machine"
    assert timed_out.timed_out and timed_out.exit_code is None
    assert [name for name, pid in pids_in(pids).items() if alive(pid)] == []


def fake_git_that_stalls_in_worktree_add(bin_dir: Path, ready: Path) -> None:
    """`git worktree add` as it is while it checks files out: registered and locked ("initializing"). It
    touches READY there and takes 1 s to finish; a git killed there leaves the worktree locked."""
    real = shutil.which("git")
    bin_dir.mkdir()
    script = bin_dir / "git"
    script.write_text(
        "#!/bin/sh\n"
        'case " $* " in\n'
        '  *" worktree add "*)\n'
        f'    "{real}" "$@" || exit $?\n'
        f'    "{real}" worktree lock --reason initializing "$9" || exit 1\n'
        f"    touch {ready}; sleep 1\n"
        f'    exec "{real}" worktree unlock "$9" ;;\n'
        f'  *) exec "{real}" "$@" ;;\n'
        "esac\n"
    )
    script.chmod(0o755)


def test_sigterm_during_git_worktree_add_leaves_no_locked_worktree(history, tmp_path):  # noqa: F811
    repo, shas = history
    before = fingerprint(repo)
    ready, temp = tmp_path / "ready", tmp_path / "tmp"
    temp.mkdir()
    fake_git_that_stalls_in_worktree_add(tmp_path / "bin", ready)
    process = subprocess.Popen(
        [sys.executable, "-m", "offloaddoctor", "bisect", "--good", shas[0], "--bad", shas[-1]]
        + ["--run", "sh run.sh", "--repo", str(repo)],
        env={**ENV, "TMPDIR": str(temp), "PATH": f"{tmp_path / 'bin'}{os.pathsep}{ENV['PATH']}"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_for(ready, process)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 128 + signal.SIGTERM, stderr
    assert "your checkout untouched" in stderr
    assert fingerprint(repo) == before  # no worktree registered, locked or not
    assert list(temp.iterdir()) == []


def test_a_worktree_locked_while_in_use_is_still_removed(history):  # noqa: F811
    repo, shas = history
    before = fingerprint(repo)
    with temporary_worktree(Repo(repo), shas[1]) as tree:
        git(repo, "worktree", "lock", "--reason", "the test command locked it", str(tree))
    assert not tree.exists()
    assert fingerprint(repo) == before


def test_a_worktree_whose_checkout_vanished_is_unregistered(history):  # noqa: F811
    repo, shas = history
    before = fingerprint(repo)
    with temporary_worktree(Repo(repo), shas[1]) as tree:
        shutil.rmtree(tree)  # the test command deleted its own checkout
    assert fingerprint(repo) == before


# --- 13. configs too large to read --------------------------------------------------------------------


def test_config_mode_refuses_a_config_blob_over_the_limit_before_reading_it(tmp_path, monkeypatch):
    huge = config(300) + "# " + "x" * (2**20) + "\n"
    repo, shas = make_repo(
        tmp_path,
        [
            ({"cfg.yaml": config(100)}, "good"),
            ({"cfg.yaml": huge}, "a huge config"),
            ({"cfg.yaml": config(300, offload=True)}, "offload"),
        ],
    )
    calls: list[tuple[str, ...]] = []
    real_run = git_module.Repo._run

    def spy(self, *args, check=True):
        calls.append(args)
        return real_run(self, *args, check=check)

    monkeypatch.setattr(git_module.Repo, "_run", spy)
    result = bisect_config(str(repo), shas[0], shas[-1], "cfg.yaml", CATALOG)
    skipped = {t.commit.sha: t.outcome.reason for t in result.skipped}
    assert skipped == {shas[1]: f"{shas[1][:12]}:cfg.yaml: larger than 1 MiB ({len(huge)} bytes); refusing to read it"}
    assert [c.sha for c in result.candidates] == shas[1:]
    reads_of_the_huge_one = [a for a in calls if a[0] in ("show", "cat-file") and a[-1] == f"{shas[1]}:cfg.yaml"]
    assert reads_of_the_huge_one == [("cat-file", "-s", f"{shas[1]}:cfg.yaml")]


def test_a_signal_waits_for_a_deferred_section_and_a_second_one_cannot_cut_the_clean_up():
    from offloaddoctor.bisect.interrupts import Interrupted, signals_deferred, signals_interrupt

    steps = []
    hangup_handler = signal.getsignal(signal.SIGHUP)
    with signals_interrupt(), pytest.raises(Interrupted) as raised:
        try:
            with signals_deferred():
                os.kill(os.getpid(), signal.SIGHUP)
                steps.append("git finished")  # held: the section runs to its end
        finally:
            os.kill(os.getpid(), signal.SIGINT)  # a second signal during the clean-up is ignored
            steps.append("cleaned up")
    assert raised.value.signum == signal.SIGHUP and steps == ["git finished", "cleaned up"]
    assert signal.getsignal(signal.SIGHUP) == hangup_handler  # handlers restored
