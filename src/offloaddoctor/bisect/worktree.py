"""A throwaway checkout of one commit, outside the user's working tree, always removed."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from offloaddoctor.bisect.git import Repo
from offloaddoctor.bisect.interrupts import signals_deferred
from offloaddoctor.errors import UserError

PREFIX = "offloaddoctor-bisect-"


@contextmanager
def temporary_worktree(repo: Repo, sha: str) -> Iterator[Path]:
    parent: Path | None = None
    tree: Path | None = None
    try:
        with signals_deferred():  # a signal between these steps would leave a directory nobody removes
            parent = Path(tempfile.mkdtemp(prefix=PREFIX))
            tree = parent / sha[:12]
            repo.git("worktree", "add", "--detach", "--quiet", str(tree), sha)
        yield tree
    finally:
        with signals_deferred():
            if tree is not None:
                remove_worktree(repo, tree)
            if parent is not None:
                shutil.rmtree(parent, ignore_errors=True)


def remove_worktree(repo: Repo, tree: Path) -> None:
    """Unregister TREE and delete it, locked (a `git worktree add` cut short leaves it locked) or not.
    Never `git worktree prune`: that would also drop the user's own worktrees whose disk is not mounted."""
    repo.git_quiet("worktree", "unlock", str(tree))
    if repo.git_quiet("worktree", "remove", "--force", "--force", str(tree)):
        return
    # The checkout is gone or half made: remove git's bookkeeping for this one worktree ourselves.
    admin = _admin_directory(repo, tree)
    if admin is not None:
        shutil.rmtree(admin, ignore_errors=True)


def _admin_directory(repo: Repo, tree: Path) -> Path | None:
    """`.git/worktrees/<id>` of TREE: the one whose `gitdir` file points into TREE."""
    try:
        common = Path(repo.git("rev-parse", "--git-common-dir").strip())
    except UserError:
        return None
    if not common.is_absolute():
        common = repo.directory / common
    wanted = (tree / ".git").resolve()
    for admin in sorted((common / "worktrees").glob("*")):
        try:
            if Path((admin / "gitdir").read_text().strip()).resolve() == wanted:
                return admin
        except OSError:
            continue
    return None
