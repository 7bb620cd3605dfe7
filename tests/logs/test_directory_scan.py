"""What a directory scan reads and what it passes over with a note (issue 27.15): a symbolic link out of the
directory is not followed, one rank's unreadable log or subdirectory does not end the diagnosis."""

from __future__ import annotations

import os
import shutil

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from offloaddoctor import api
from offloaddoctor.cli import app
from offloaddoctor.errors import UserError
from offloaddoctor.logs import sources
from offloaddoctor.policy import Policy

from tests.conftest import FIXTURES, RUNNER

OOM_LOG = FIXTURES / "oom-capacity-expandable" / "job.log"  # its one finding is oom-capacity
CLEAN_LOG = FIXTURES / "clean-baseline" / "job.log"
SECRET = "SECRET-TOKEN torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"


@pytest.fixture
def logs(tmp_path):
    directory = tmp_path / "logs"
    (directory / "sub").mkdir(parents=True)
    shutil.copy(CLEAN_LOG, directory / "rank0.log")
    (tmp_path / "secret.txt").write_text(SECRET + "\n")
    return directory


@pytest.mark.parametrize("recursive", [False, True])
@pytest.mark.parametrize("where", ["", "sub"])
def test_a_symbolic_link_out_of_the_directory_is_not_followed(logs, monkeypatch, recursive, where):
    if where and not recursive:
        pytest.skip("without -r the subdirectory is not read at all")
    link = logs / where / "leak.log"
    link.symlink_to(logs.parent / "secret.txt")
    summary = logs.parent / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    args = ["diagnose", str(logs), "--format", "github", *(["-r"] if recursive else [])]
    result = RUNNER.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "SECRET-TOKEN" not in result.stdout + summary.read_text()
    report = api.diagnose([str(logs)], recursive=recursive, policy=Policy())
    assert report.findings == [] and f"{link}: symbolic link to a file outside {logs}; skipped" in report.notes[0]
    assert [f.id for f in api.diagnose([str(link)], policy=Policy()).findings] == ["oom-capacity"]  # named: read


def test_a_symbolic_link_within_the_directory_is_still_followed(logs):
    (logs / "rank0.log").unlink()  # another run's log (docs/runs.md): the note that says so is not the point here
    shutil.copy(OOM_LOG, logs / "sub" / "job.txt")
    (logs / "oom.log").symlink_to(logs / "sub" / "job.txt")
    report = api.diagnose([str(logs)], policy=Policy())
    assert [f.id for f in report.findings] == ["oom-capacity"] and not report.notes


@pytest.fixture
def rank1_unreadable(logs, monkeypatch):
    """rank1.log may not be opened: by its mode, or (root reads everything) by an `os.open` that refuses it (a
    log is opened once, by logs/sources.py open_log, and read through that descriptor)."""
    shutil.copy(OOM_LOG, logs / "rank1.log")
    (logs / "rank1.log").chmod(0)
    if os.geteuid() == 0:
        real_open = os.open

        def refusing(path, *args, **kwargs):
            if str(path).endswith("rank1.log"):
                raise PermissionError(13, "Permission denied", str(path))
            return real_open(path, *args, **kwargs)

        monkeypatch.setattr(sources.os, "open", refusing)
    return logs / "rank1.log"


def test_an_unreadable_rank_log_in_a_directory_is_skipped_with_a_note(logs, rank1_unreadable):
    shutil.copy(OOM_LOG, logs / "rank2.log")
    report = api.diagnose([str(logs)], policy=Policy())
    assert [f.id for f in report.findings] == ["oom-capacity"]  # the other ranks are diagnosed
    assert f"{rank1_unreadable}: cannot read: Permission denied; skipped" in report.notes


def test_a_skipped_log_among_several_runs_is_no_run_of_its_own_and_is_said_once(logs, rank1_unreadable):
    """rank0 (a clean run) and rank2 (an OOM) are two runs (docs/runs.md); the unreadable rank1 is neither: not
    a third, empty run, but one note for all runs, in every text format."""
    shutil.copy(OOM_LOG, logs / "rank2.log")
    report = api.diagnose([str(logs)], policy=Policy())
    assert [run.run.paths for run in report.runs] == [[str(logs / "rank0.log")], [str(logs / "rank2.log")]]
    assert all("rank1.log" not in note for run in report.runs for note in run.notes)
    for output_format in ("text", "markdown"):
        out = RUNNER.invoke(app, ["diagnose", str(logs), "-f", output_format]).stdout
        assert out.count("rank1.log: cannot read: Permission denied; skipped") == 1, output_format


def test_an_unreadable_log_named_directly_is_still_an_error(rank1_unreadable):
    with pytest.raises(UserError, match=r"rank1\.log: cannot read: Permission denied$"):
        api.diagnose([str(rank1_unreadable)], policy=Policy())


def test_a_directory_of_only_unreadable_logs_is_an_error_not_a_clean_report(logs, rank1_unreadable):
    (logs / "rank0.log").unlink()
    with pytest.raises(UserError, match=r"rank1\.log: cannot read: Permission denied$"):
        api.diagnose([str(logs)], policy=Policy())


def test_an_unreadable_subdirectory_under_recursive_is_noted(logs, monkeypatch):
    shutil.copy(OOM_LOG, logs / "sub" / "rank1.log")
    locked = str(logs / "sub")
    real_scandir = os.scandir

    def refusing(path="."):
        if os.fspath(path) == locked:
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", refusing)  # (root lists every directory whatever its mode)
    report = api.diagnose([str(logs)], recursive=True, policy=Policy())
    assert report.findings == []
    assert f"{locked}: cannot list the directory: Permission denied; skipped" in report.notes


@pytest.mark.parametrize("suffix", sources.LOG_SUFFIXES)
def test_one_suffix_list_decides_what_is_a_log_for_scans_and_estimate(suffix):
    """`estimate` kept its own list (with `.gz`, without the rule that `.gz` wraps a log suffix): one list now."""
    for name in (f"job{suffix}", f"JOB{suffix.upper()}", f"job{suffix}.gz"):
        assert sources.is_log_name(name) and sources.reads_as_log(name), name
    assert not sources.is_log_name(f"job{suffix}.yaml") and not sources.reads_as_log(f"job{suffix}.yaml")
    assert sources.reads_as_log("dump.gz") and not sources.is_log_name("dump.gz")  # a scan lists logs only
    assert not any(hasattr(module, "LOG_SUFFIXES") for module in _config_modules())


def _config_modules():
    import importlib
    import pkgutil

    import offloaddoctor.config as config

    return [importlib.import_module(f"offloaddoctor.config.{m.name}") for m in pkgutil.iter_modules(config.__path__)]


def _listed_as_before(directory, recursive):
    """The listing as it was (os.walk, Path objects sorted, a stat per file): what one scandir walk must equal."""
    from pathlib import Path

    if recursive:
        walked = (Path(root, name) for root, _, files in os.walk(directory) for name in files)
    else:
        walked = (Path(directory, name) for name in os.listdir(directory))
    return [str(p) for p in sorted(p for p in walked if p.is_file() and sources.is_log_name(p.name))]


_NAMES = st.sampled_from(["a", "a-c", "a.c", "b", "A", "a0", "x.log", "x.log.gz", "y.txt", "z.yaml", "r-1.out"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    tree=st.lists(
        st.tuples(st.lists(_NAMES, max_size=3), _NAMES, st.sampled_from(["file", "dir", "link"])), max_size=12
    )
)
@example(tree=[(["a"], "x.log", "file"), (["a-c"], "x.log", "file"), (["a.c"], "y.txt", "file")])
def test_one_scandir_walk_lists_what_os_walk_and_sorted_paths_listed(tmp_path_factory, tree):
    """Same files, same order (`a/x.log` before `a-c/x.log`, as Path sorts), symbolic links to files kept and to
    directories not followed, whether or not recursive."""
    root = tmp_path_factory.mktemp("tree")
    for parents, name, kind in tree:
        where = root.joinpath(*parents)
        if (where.exists() and not where.is_dir()) or (where / name).exists() or (where / name).is_symlink():
            continue
        try:
            where.mkdir(parents=True, exist_ok=True)
        except OSError:  # under a file, or a link that loops
            continue
        if kind == "file":
            (where / name).write_text("x\n")
        elif kind == "dir":
            (where / name).mkdir()
        else:
            (where / name).symlink_to(root / "a" if name.startswith("a") else root / "x.log")
    for recursive in (False, True):
        listed = [path for path, _ in sources._listed_logs(root, recursive, [])]
        assert listed == _listed_as_before(root, recursive)
