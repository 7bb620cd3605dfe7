"""Run mode: run the user's command at a commit, diagnose what it wrote, and call the commit good or bad.

The same judgement serves `bisect --run` (each commit in a temporary worktree) and `bisect-step`
(called by `git bisect run` in the checkout git prepared).
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from offloaddoctor.api import diagnose
from offloaddoctor.bisect.changes import diff_configs, flatten, keys_read_by
from offloaddoctor.bisect.commits import Progress, bisect_commits
from offloaddoctor.bisect.git import Repo
from offloaddoctor.bisect.result import BisectResult
from offloaddoctor.bisect.search import BAD, GOOD, SKIP, Outcome
from offloaddoctor.bisect.worktree import temporary_worktree
from offloaddoctor.catalog.model import Catalog
from offloaddoctor.config.loading import parse_config_text
from offloaddoctor.errors import UserError


def run_and_judge(
    command: str,
    directory: Path,
    catalog: Catalog,
    log_path: str | None = None,
    timeout: float | None = None,
    signature_id: str | None = None,
    config_paths: Sequence[str] = (),
) -> Outcome:
    with tempfile.TemporaryDirectory(prefix="offloaddoctor-run-") as scratch:
        output = Path(scratch) / "output.log"
        with output.open("wb") as sink:
            exit_code, timed_out = _run(command, directory, sink, timeout)
        untestable = _untestable(exit_code, timed_out, timeout)
        log = directory / log_path if log_path else output
        if not log.exists():
            return Outcome(SKIP, untestable or f"the command wrote no log at {log_path} (exit {exit_code})")
        configs = [str(directory / c) for c in config_paths if (directory / c).is_file()]
        try:
            report = diagnose([str(log)], configs, catalog=catalog)
        except UserError as exc:
            return Outcome(SKIP, f"cannot diagnose the output: {exc}")
    failing = tuple(
        f.id for f in report.findings if (f.id == signature_id if signature_id else f.signature.severity == "error")
    )
    if failing:  # a job killed after printing its error is still bad
        return Outcome(BAD, f"{', '.join(failing)} in the output", failing)
    if untestable:
        return Outcome(SKIP, untestable)
    return Outcome(GOOD, f"exit {exit_code}, no {'matching' if signature_id else 'error'} finding")


def _untestable(exit_code: int | None, timed_out: bool, timeout: float | None) -> str | None:
    if timed_out:
        return f"timed out after {timeout:g} s"
    if exit_code is not None and (exit_code < 0 or exit_code >= 128):
        return f"the command was killed (exit {exit_code})"
    return None


def _run(command: str, directory: Path, sink, timeout: float | None) -> tuple[int | None, bool]:
    # A session of its own, so a timeout or Ctrl-C ends the whole job tree, not just the shell.
    process = subprocess.Popen(  # noqa: S602 - the user's own --run command, run as `git bisect run` would
        command,
        shell=True,
        cwd=directory,
        stdout=sink,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        return process.wait(timeout=timeout), False
    except subprocess.TimeoutExpired:
        _kill_group(process)
        return None, True
    except BaseException:
        _kill_group(process)
        raise


def _kill_group(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()


@contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM unwinds like Ctrl-C, so every `finally` (worktree removal) runs."""

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def bisect_run(
    repo_dir: str,
    good: str,
    bad: str,
    command: str,
    catalog: Catalog,
    log_path: str | None = None,
    timeout: float | None = None,
    signature_id: str | None = None,
    config_path: str | None = None,
    progress: Progress | None = None,
) -> BisectResult:
    repo = Repo(repo_dir)
    if signature_id and catalog.get(signature_id) is None:
        raise UserError(f"unknown signature id {signature_id!r}")
    config_in_repo = repo.repo_path(config_path) if config_path else None

    def test(sha: str) -> Outcome:
        with temporary_worktree(repo, sha) as tree:
            workdir = tree / repo.directory.resolve().relative_to(repo.toplevel.resolve())
            configs = [str(tree / config_in_repo)] if config_in_repo else []
            return run_and_judge(command, workdir, catalog, log_path, timeout, signature_id, configs)

    target = f"signature {signature_id}" if signature_id else "any error finding"
    with terminate_as_interrupt():
        result = bisect_commits(repo, good, bad, test, "run", target, progress)
    if config_in_repo and result.earliest_bad and result.last_good:
        before, after = (repo.read_file(c.sha, config_in_repo) for c in (result.last_good, result.earliest_bad))
        if before is not None and after is not None:
            try:
                result.changes = diff_configs(
                    flatten(parse_config_text(before, f"{result.last_good.short}:{config_in_repo}", config_in_repo)),
                    flatten(parse_config_text(after, f"{result.earliest_bad.short}:{config_in_repo}", config_in_repo)),
                    keys_read_by(catalog, result.failing),
                )
            except UserError:
                pass  # the diff is a bonus; a config that does not parse does not undo the search
    return result
