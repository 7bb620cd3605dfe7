"""`metrics` and `compare` group logs into runs by the rule `diagnose` uses (config/run_identity.py): the logs
of one job are one run however they are passed, and a path holding several runs gives one each."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from offloaddoctor.config.run_identity import Run, group_runs, log_identity
from offloaddoctor.errors import UserError
from offloaddoctor.logs.sources import LogSource, resolve_sources
from offloaddoctor.metrics.reader import RunReader


class RunLogs(NamedTuple):
    """One run: its name (the path given, or the paths whose logs it gathers) and its logs."""

    name: str
    sources: list[LogSource]
    given: list[str]  # the paths given on the command line that hold (some of) its logs
    run: Run


def read_runs(paths: Sequence[str]) -> tuple[list[RunLogs], dict[str, RunReader]]:
    """The runs among the logs of `paths`, and each path's reader when the runs are the paths as given (one
    path, one run: nothing is read twice); otherwise the readers are empty and each run must be read."""
    readers: dict[str, RunReader] = {}
    by_path: dict[str, list[LogSource]] = {}
    for path in dict.fromkeys(paths):
        sources = by_path[path] = resolve_sources([path])
        readers[path] = RunReader.read(path, sources)
    return runs_of(readers, by_path)


def runs_of(
    readers: dict[str, RunReader], by_path: dict[str, list[LogSource]]
) -> tuple[list[RunLogs], dict[str, RunReader]]:
    """read_runs for logs already read: `readers[path]` has read the logs `by_path[path]` (`compare` reads
    each log once, for its numbers and its diagnosis together)."""
    owner: dict[str, str] = {}
    identities = []
    clashes: set[tuple[str, str]] = set()
    rank_logs: dict[int, str] = {}
    for path, reader in readers.items():
        for source in by_path[path]:
            owner.setdefault(source.name, path)
        lines = dict(reader.run.sources)
        for collector in reader.collectors:
            identities.append(log_identity(collector.path, collector.values, lines.get(collector.path, 0)))
        seen = [(r.rank, r.path) for r in reader.run.iterations] + [(m.rank, m.path) for m in reader.run.memory]
        for rank, log in seen:
            if rank is not None and rank_logs.setdefault(rank, log) != log:
                clashes.add((rank_logs[rank], log))
    runs = group_runs(identities, clashes)
    as_given = [set(run.paths) for run in runs] == [{s.name for s in by_path[p]} for p in readers]
    named = {source.name: source for sources in by_path.values() for source in sources}
    result = []
    for run in runs:
        given = list(dict.fromkeys(owner[name] for name in run.paths))
        whole = [p for p in given if {s.name for s in by_path[p]} <= set(run.paths)]
        name = " + ".join(given) if whole == given else ", ".join(run.paths)
        result.append(RunLogs(name, [named[n] for n in run.paths], given, run))
    if not as_given and any(source.path == "-" for run in result for source in run.sources) and len(result) > 1:
        raise UserError(
            "standard input and the other logs are not one run each as given, and standard input cannot be read "
            "twice: save it to a file"
        )
    return result, (readers if as_given else {})
