"""Config mode: read the config at each commit from git objects (no checkout) and run the check."""

from __future__ import annotations

from offloaddoctor.bisect.changes import diff_configs, flatten, keys_read_by
from offloaddoctor.bisect.commits import Progress, bisect_commits
from offloaddoctor.bisect.git import Repo
from offloaddoctor.bisect.judge import ConfigJudge
from offloaddoctor.bisect.result import BisectResult
from offloaddoctor.bisect.search import SKIP, Outcome
from offloaddoctor.catalog.model import Catalog
from offloaddoctor.config.loading import parse_config_text
from offloaddoctor.config.values import ConfigValue
from offloaddoctor.errors import UserError


def bisect_config(
    repo_dir: str,
    good: str,
    bad: str,
    config_path: str,
    catalog: Catalog,
    signature_id: str | None = None,
    progress: Progress | None = None,
) -> BisectResult:
    repo = Repo(repo_dir)
    path = repo.repo_path(config_path)
    judge = ConfigJudge(catalog, signature_id)
    loaded: dict[str, list[ConfigValue]] = {}
    names = _names(repo, bad, path)

    def read(sha: str) -> tuple[str, str | None]:
        """The config at a commit under the name it had there: renames are followed (`git log --follow`)."""
        for name in names:
            text = repo.read_file(sha, name)
            if text is not None:
                return name, text
        return path, None

    if read(repo.resolve(good))[1] is None:
        raise UserError(_missing_at_good(repo, good, bad, path))

    def test(sha: str) -> Outcome:
        try:
            name, text = read(sha)
        except UserError as exc:  # larger than a config may be
            return Outcome(SKIP, str(exc))
        if text is None:
            return Outcome(SKIP, f"{path} is not in this commit")
        try:
            loaded[sha] = parse_config_text(text, f"{sha[:12]}:{name}", name)
        except UserError as exc:
            return Outcome(SKIP, f"config does not parse: {exc}")
        return judge.judge(loaded[sha])

    result = bisect_commits(repo, good, bad, test, "config", judge.target, progress)
    if result.earliest_bad and result.last_good:
        relevant = keys_read_by(catalog, result.failing)
        result.changes = diff_configs(
            flatten(loaded[result.last_good.sha]), flatten(loaded[result.earliest_bad.sha]), relevant
        )
    return result


def _names(repo: Repo, bad: str, path: str) -> list[str]:
    """PATH, then the names the file had before, newest first."""
    names = [path]
    for _sha, name in repo.path_history(repo.resolve(bad), path):
        if name not in names:
            names.append(name)
    return names


def _missing_at_good(repo: Repo, good: str, bad: str, path: str) -> str:
    """--good predates the config: an older good commit cannot help, the commit that created it can."""
    history = repo.path_history(repo.resolve(bad), path)
    if not history:
        return f"{path}: no commit up to --bad {bad} has this file"
    created = repo.commit(history[-1][0])
    return (
        f"--good {good} has no {path} (nor any earlier name of it): it was created in {created.short} "
        f"{created.subject!r}; try --good {created.short}"
    )
