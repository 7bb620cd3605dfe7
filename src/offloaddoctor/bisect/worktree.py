"""A throwaway checkout of one commit, outside the user's working tree, always removed."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from offloaddoctor.bisect.git import Repo

PREFIX = "offloaddoctor-bisect-"


@contextmanager
def temporary_worktree(repo: Repo, sha: str) -> Iterator[Path]:
    parent = Path(tempfile.mkdtemp(prefix=PREFIX))
    tree = parent / sha[:12]
    try:
        repo.git("worktree", "add", "--detach", "--quiet", str(tree), sha)
        yield tree
    finally:
        # `remove` also deletes git's bookkeeping under .git/worktrees; never `prune`, which would touch
        # the user's own stale worktrees.
        repo.git_quiet("worktree", "remove", "--force", str(tree))
        shutil.rmtree(parent, ignore_errors=True)
