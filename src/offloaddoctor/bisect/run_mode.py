"""Run mode: run the user's command at a commit, diagnose what it wrote, and call the commit good or bad.

The same judgement serves `bisect --run` (each commit in a temporary worktree) and `bisect-step`
(called by `git bisect run` in the checkout git prepared).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Mapping, Sequence
from pathlib import Path

from offloaddoctor.api import diagnose
from offloaddoctor.bisect.changes import diff_configs, flatten, keys_read_by
from offloaddoctor.bisect.commits import Progress, bisect_commits
from offloaddoctor.bisect.git import Repo, without_repo_local_git_variables
from offloaddoctor.bisect.interrupts import signals_interrupt
from offloaddoctor.bisect.job import run_job, scratch_directory
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
    environment: Mapping[str, str] | None = None,
) -> Outcome:
    with scratch_directory() as scratch:
        job = run_job(command, directory, scratch, timeout, environment)
        log = directory / log_path if log_path else job.output
        if not log.exists():
            reason = _untestable(job.exit_code, job.timed_out, timeout) or f"exit {job.exit_code}"
            return _noted(Outcome(SKIP, f"{reason}, and the command wrote no log at {log_path}"), job.output_note)
        configs = [str(directory / c) for c in config_paths if (directory / c).is_file()]
        try:
            report = diagnose([str(log)], configs, catalog=catalog)
        except UserError as exc:
            return _noted(Outcome(SKIP, f"cannot diagnose the output: {exc}"), job.output_note)
    errors = tuple(f.id for f in report.findings if f.signature.severity == "error")
    failing = tuple(f.id for f in report.findings if f.id == signature_id) if signature_id else errors
    outcome = judge_run(job.exit_code, job.timed_out, timeout, failing, errors, signature_id)
    return _noted(outcome, job.output_note if not log_path else None)


def judge_run(
    exit_code: int | None,
    timed_out: bool,
    timeout: float | None,
    failing: Sequence[str],
    errors: Sequence[str] = (),
    signature_id: str | None = None,
) -> Outcome:
    """Good, bad or skip for one run, `git bisect run`'s way, with the rule that decided in the reason.

    Bad needs the failure being bisected in the log (a job killed after printing it is still bad). Good needs
    exit 0 and no such failure. A run that failed some other way tells nothing about this failure: skip."""
    target = signature_id or "error finding"
    if failing:
        how = "timed out" if timed_out else f"exit {exit_code}"
        return Outcome(BAD, f"log shows {', '.join(failing)} ({how})", tuple(failing))
    untestable = _untestable(exit_code, timed_out, timeout)
    if untestable:
        return Outcome(SKIP, untestable)
    if exit_code == 0:
        return Outcome(GOOD, f"exit 0, log shows no {target}")
    if exit_code == 125:
        return Outcome(SKIP, "exit 125, the command asked to skip this commit")
    if exit_code in _CANNOT_RUN:
        return Outcome(SKIP, f"exit {exit_code}, {_CANNOT_RUN[exit_code]} (git bisect run would call it bad)")
    others = [e for e in errors if e != signature_id]
    shows = f"it shows {', '.join(others)}" if others else "no finding explains it"
    return Outcome(SKIP, f"exit {exit_code}, not this failure: log shows no {target} ({shows})")


_CANNOT_RUN = {126: "command found but cannot run", 127: "command not found"}


def _untestable(exit_code: int | None, timed_out: bool, timeout: float | None) -> str | None:
    if timed_out:
        return f"timed out after {timeout:g} s"
    if exit_code is not None and exit_code < 0:
        return f"the command was killed by {_signal_name(-exit_code)} (exit {128 - exit_code})"
    if exit_code is not None and exit_code >= 128:
        return f"the command was killed (exit {exit_code})"
    return None


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def _noted(outcome: Outcome, note: str | None) -> Outcome:
    return Outcome(outcome.verdict, f"{outcome.reason}; {note}", outcome.detail) if note else outcome


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
            # The command runs in the worktree as if started there: git variables of a hook or alias that
            # point at the user's repository (GIT_DIR, GIT_INDEX_FILE...) are not passed on.
            return run_and_judge(command, workdir, catalog, log_path, timeout, signature_id, configs, environment)

    environment = without_repo_local_git_variables(os.environ)
    target = f"signature {signature_id}" if signature_id else "any error finding"
    with signals_interrupt():
        result = bisect_commits(repo, good, bad, test, "run", target, progress)
    if config_in_repo and result.earliest_bad and result.last_good:
        try:
            before, after = (repo.read_file(c.sha, config_in_repo) for c in (result.last_good, result.earliest_bad))
            if before is not None and after is not None:
                result.changes = diff_configs(
                    flatten(parse_config_text(before, f"{result.last_good.short}:{config_in_repo}", config_in_repo)),
                    flatten(parse_config_text(after, f"{result.earliest_bad.short}:{config_in_repo}", config_in_repo)),
                    keys_read_by(catalog, result.failing),
                )
        except UserError:
            pass  # the diff is a bonus; a config too large or that does not parse does not undo the search
    return result
