"""Throwaway git repositories for the bisect tests, and a fingerprint of everything a user owns in one."""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "Ada Tester",
    "GIT_AUTHOR_EMAIL": "ada@example.com",
    "GIT_COMMITTER_NAME": "Ada Tester",
    "GIT_COMMITTER_EMAIL": "ada@example.com",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
}


def git(repo: Path, *args: str, check: bool = True) -> str:
    result = subprocess.run(["git", *args], cwd=repo, env=ENV, capture_output=True, text=True)
    if check and result.returncode != 0:
        raise AssertionError(f"git {' '.join(args)}: {result.stderr}")
    return result.stdout


def make_repo(root: Path, commits: list[tuple[dict[str, str | None], str]]) -> tuple[Path, list[str]]:
    """Each commit writes (or, for None, deletes) files; returns the repo and the shas, oldest first. A history
    is made once per test session and copied for each test (a copy: 0.04 s; 22 git commands: 0.2 s)."""
    key = repr(commits)
    if key not in _TEMPLATES:
        if not _TEMPLATE_ROOT:
            _TEMPLATE_ROOT.append(Path(tempfile.mkdtemp(prefix="offloaddoctor-test-repos-")))
            atexit.register(shutil.rmtree, _TEMPLATE_ROOT[0], True)
        template = _TEMPLATE_ROOT[0] / str(len(_TEMPLATES))
        template.mkdir()
        _TEMPLATES[key] = _make_repo(template, commits)
    template_repo, shas = _TEMPLATES[key]
    repo = root / "repo"
    shutil.copytree(template_repo, repo, symlinks=True)
    git(repo, "update-index", "-q", "--refresh")  # the index's file stats to the copies' (inodes): as made here
    return repo, list(shas)


_TEMPLATES: dict[str, tuple[Path, list[str]]] = {}
_TEMPLATE_ROOT: list[Path] = []


def _make_repo(root: Path, commits: list[tuple[dict[str, str | None], str]]) -> tuple[Path, list[str]]:
    repo = root / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    shas = []
    for files, message in commits:
        for name, text in files.items():
            path = repo / name
            if text is None:
                path.unlink()
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text)
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", message)
        shas.append(git(repo, "rev-parse", "HEAD").strip())
    return repo, shas


def fingerprint(repo: Path) -> dict[str, object]:
    """HEAD, index, working tree (untracked and ignored files too), stash, refs, worktrees, bisect state."""
    tree = {}
    for path in sorted(repo.rglob("*")):
        if path.is_file() and ".git" not in path.relative_to(repo).parts:
            tree[str(path.relative_to(repo))] = hashlib.sha256(path.read_bytes()).hexdigest()
    git_dir = repo / ".git"
    bisect_files = {p.name: p.read_text() for p in git_dir.glob("BISECT_*")}
    return {
        "head": (git_dir / "HEAD").read_text(),
        "index": hashlib.sha256((git_dir / "index").read_bytes()).hexdigest() if (git_dir / "index").exists() else None,
        "tree": tree,
        "refs": git(repo, "for-each-ref", "--format=%(refname) %(objectname)"),
        "stash": git(repo, "stash", "list"),
        "worktrees": git(repo, "worktree", "list", "--porcelain"),
        "worktree_admin": sorted(p.name for p in (git_dir / "worktrees").iterdir())
        if (git_dir / "worktrees").exists()
        else [],
        "bisect": bisect_files,
    }


def dirty_up(repo: Path) -> None:
    """Give the checkout everything a user might have going: stash, staged and unstaged edits, untracked files."""
    (repo / "notes.txt").write_text("stashed work\n")
    git(repo, "add", "notes.txt")
    git(repo, "stash", "-q")
    (repo / "cfg.yaml").write_text((repo / "cfg.yaml").read_text() + "# staged edit\n")
    git(repo, "add", "cfg.yaml")
    (repo / "cfg.yaml").write_text((repo / "cfg.yaml").read_text() + "# unstaged edit\n")
    (repo / "untracked.log").write_text("mine\n")
