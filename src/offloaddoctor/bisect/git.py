"""Read-only access to the user's repository through the git command line.

Nothing here changes HEAD, the index, the working tree, refs, the stash or a bisect in progress:
config files are read from git objects (`git show REV:PATH`); run mode's checkouts go to separate,
temporary worktrees (worktree.py).
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from offloaddoctor.errors import UserError

# Hooks stay off: a user's post-checkout hook must not run in our temporary worktrees.
_GIT = ["git", "-c", "core.hooksPath=/dev/null", "-c", "advice.detachedHead=false"]


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
        try:
            result = subprocess.run(
                [*_GIT, *args], cwd=self.directory, capture_output=True, text=True, errors="replace", check=False
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
        """The file's text at a commit, or None where the commit does not have it."""
        result = self._run("show", f"{sha}:{path}", check=False)
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
