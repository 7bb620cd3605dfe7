"""Read-only access to the user's repository through the git command line.

Nothing here changes HEAD, the index, the working tree, refs, the stash or a bisect in progress:
config files are read from git objects (`git show REV:PATH`); run mode's checkouts go to separate,
temporary worktrees (worktree.py).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from offloaddoctor.bisect.interrupts import signals_deferred
from offloaddoctor.config.files import MAX_CONFIG_BYTES
from offloaddoctor.errors import UserError

# Hooks stay off: a user's post-checkout hook must not run in our temporary worktrees.
_GIT = ["git", "-c", "core.hooksPath=/dev/null", "-c", "advice.detachedHead=false"]

# What `git rev-parse --local-env-vars` lists (git 2.39): variables that point git at another repository,
# index or object store. Git sets some of them in hooks and aliases; `GIT_INDEX_FILE` there would make our
# `git worktree add` write the user's index. Our calls find the repository from their directory alone.
REPO_LOCAL_GIT_VARIABLES = frozenset(
    {
        "GIT_ALTERNATE_OBJECT_DIRECTORIES",
        "GIT_CONFIG",
        "GIT_CONFIG_PARAMETERS",
        "GIT_CONFIG_COUNT",
        "GIT_OBJECT_DIRECTORY",
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_IMPLICIT_WORK_TREE",
        "GIT_GRAFT_FILE",
        "GIT_INDEX_FILE",
        "GIT_NO_REPLACE_OBJECTS",
        "GIT_REPLACE_REF_BASE",
        "GIT_PREFIX",
        "GIT_INTERNAL_SUPER_PREFIX",
        "GIT_SHALLOW_FILE",
        "GIT_COMMON_DIR",
        "GIT_NAMESPACE",
        "GIT_QUARANTINE_PATH",
    }
)


def without_repo_local_git_variables(environ: Mapping[str, str]) -> dict[str, str]:
    """ENVIRON less every variable that would send a git call elsewhere than its working directory's repo
    (the `GIT_CONFIG_KEY_n`/`GIT_CONFIG_VALUE_n` pairs that go with `GIT_CONFIG_COUNT` too)."""
    return {
        name: value
        for name, value in environ.items()
        if name not in REPO_LOCAL_GIT_VARIABLES and not name.startswith(("GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_"))
    }


def git_environment() -> dict[str, str]:
    # No optional locks: reading the repository never rewrites its index (git status would refresh it).
    return {**without_repo_local_git_variables(os.environ), "GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0"}


@dataclass(frozen=True)
class Commit:
    sha: str
    author: str
    date: str
    subject: str

    @property
    def short(self) -> str:
        return self.sha[:12]


class Repo:
    def __init__(self, directory: str | Path = ".") -> None:
        self.directory = Path(directory)
        if not self.directory.is_dir():
            raise UserError(f"{directory}: repository directory not found")
        result = self._run("rev-parse", "--show-toplevel", check=False)
        if result.returncode != 0:
            raise UserError(f"{directory}: not a git repository")
        self.toplevel = Path(result.stdout.strip())

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        # Never cut in half (a killed `git worktree add` leaves a locked worktree behind): a signal waits for
        # git to finish. Its own session keeps a terminal's Ctrl-C or hang-up from reaching git directly.
        try:
            with signals_deferred():
                result = subprocess.run(
                    [*_GIT, *args],
                    cwd=self.directory,
                    env=git_environment(),
                    capture_output=True,
                    text=True,
                    errors="replace",
                    check=False,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                )
        except FileNotFoundError:
            raise UserError("git is not installed or not on PATH") from None
        if check and result.returncode != 0:
            message = result.stderr.strip().splitlines()[-1:] or [f"exit {result.returncode}"]
            raise UserError(f"git {args[0]} failed: {message[0]}")
        return result

    def git(self, *args: str) -> str:
        return self._run(*args).stdout

    def git_quiet(self, *args: str) -> bool:
        """Run a clean-up command; True when it succeeded. Never raises."""
        try:
            return self._run(*args, check=False).returncode == 0
        except UserError:
            return False

    def resolve(self, rev: str) -> str:
        result = self._run("rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}", check=False)
        if result.returncode != 0:
            raise UserError(f"{rev}: not a commit in {self.directory}")
        return result.stdout.strip()

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        return self._run("merge-base", "--is-ancestor", ancestor, descendant, check=False).returncode == 0

    def commits_between(self, good: str, bad: str) -> list[str]:
        """Commits after GOOD up to and including BAD, oldest first, on the paths that lead from one to
        the other (`--ancestry-path`); merges are ordered topologically, as git bisect does."""
        return self.git("rev-list", "--reverse", "--topo-order", "--ancestry-path", f"{good}..{bad}").split()

    def commit(self, sha: str) -> Commit:
        sha_full, author, date, subject = (
            self.git("show", "-s", "--format=%H%x00%an <%ae>%x00%aI%x00%s", sha).rstrip("\n").split("\x00", 3)
        )
        return Commit(sha_full, author, date, subject)

    def repo_path(self, path: str) -> str:
        """PATH as git names it inside the repository (relative to the top level)."""
        candidate = Path(path)
        absolute = candidate if candidate.is_absolute() else (self.directory / candidate).resolve()
        try:
            return absolute.relative_to(self.toplevel.resolve()).as_posix()
        except ValueError:
            raise UserError(f"{path}: not inside the repository {self.toplevel}") from None

    def read_file(self, sha: str, path: str) -> str | None:
        """The file's text at a commit, or None where the commit does not have it (or has a directory there).
        Larger than MAX_CONFIG_BYTES (the limit of a config on disk): refused before git reads the blob."""
        size = self._run("cat-file", "-s", f"{sha}:{path}", check=False)
        if size.returncode != 0:
            return None
        if int(size.stdout.strip() or 0) > MAX_CONFIG_BYTES:
            raise UserError(
                f"{sha[:12]}:{path}: larger than {MAX_CONFIG_BYTES // 2**20} MiB ({int(size.stdout)} bytes); refusing to read it"
            )
        result = self._run("cat-file", "blob", f"{sha}:{path}", check=False)
        return result.stdout if result.returncode == 0 else None

    def path_history(self, rev: str, path: str) -> list[tuple[str, str]]:
        """(commit, the file's name in it) for every commit up to REV that touched PATH, newest first,
        following renames as `git log --follow` does; empty when no commit has it."""
        result = self._run("log", "--follow", "--name-only", "--format=%x00%H", rev, "--", path, check=False)
        if result.returncode != 0:
            return []
        history = []
        for record in result.stdout.split("\x00")[1:]:
            lines = [line for line in record.splitlines() if line]
            if len(lines) >= 2:
                history.append((lines[0], lines[-1]))
        return history
