"""Which logs belong to one job: the rule `diagnose`, `metrics` and `compare` share (docs/runs.md).

A log identifies its run by the config it prints about itself (the arguments block, Megatron-Bridge's
summary, the `OptimizerConfig(...)` lines, package versions: world size, model shape, parallelism, offload
settings) and by the ranks its lines carry. Two logs are of different runs when
- both print a value of the same identifying key and the values differ, or
- the same rank appears in both with different content (two attempts, or two jobs of one config); a log of a
  job of one process (world_size 1) is rank 0 throughout, whether its lines say so or not.
A log that prints no identifying value (an excerpt, the log of a rank other than 0) joins the run it cannot
be told apart from only when that is unambiguous: when all the other logs are one run. Where the logs hold
several runs it is reported on its own. Pure: the readers hand over what they saw of each log.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from offloaddoctor.config.values import ConfigValue, format_value

# Where a log prints its own config once per job (not per line, not per process).
_IDENTIFYING_DETAILS = ("arguments block", "Bridge summary", "OptimizerConfig", "DistributedDataParallelConfig")
_IDENTIFYING_PREFIXES = ("runtime.megatron_",)  # package versions
# Megatron-LM's `> Megatron-Core version …` start-up line: many runs print the same one, so it does not tie a log to
# a run as a pasted pip list does (config/from_log.py reads it with this detail).
START_UP_LINE = "start-up line"
# Printed in the arguments block but different on every process of one job.
_PER_PROCESS_KEYS = frozenset({"rank", "local_rank", "node_rank", "global_rank"})
# Shown first when saying what tells runs apart: what a person recognises a run by.
SHOWN_FIRST = (
    "world_size",
    "model.num_layers",
    "model.hidden_size",
    "model.tensor_model_parallel_size",
    "model.pipeline_model_parallel_size",
    "data_parallel_size",
    "model.seq_length",
)


@dataclass
class LogIdentity:
    """What one log says about the run it belongs to."""

    path: str
    values: dict[str, tuple] = field(default_factory=dict)  # identifying key -> the values printed, in order
    lines: int = 0

    @property
    def anchored(self) -> bool:
        return bool(self.values)


@dataclass
class Run:
    """One run's logs, in the order given, and what tells it apart from the others (empty when alone)."""

    paths: list[str]
    differs_in: list[str] = field(default_factory=list)  # "model.num_layers 24" …
    placed: bool = True  # False: a log with no identifying value, alone because several runs were given


def identifying(key: str, detail: str) -> bool:
    if key in _PER_PROCESS_KEYS or key.rsplit(".", 1)[-1] in _PER_PROCESS_KEYS:
        return False
    return detail.startswith(_IDENTIFYING_DETAILS) or (
        key.startswith(_IDENTIFYING_PREFIXES) and detail != START_UP_LINE
    )


def log_identity(path: str, values: Iterable[ConfigValue], lines: int = 0) -> LogIdentity:
    """The identifying values among those a log printed (a restarted job's later segments add theirs)."""
    seen: dict[str, list] = {}
    for value in values:
        if value.origin == "log" and identifying(value.key, value.source.detail):
            printed = seen.setdefault(value.key, [])
            if not printed or printed[-1] != value.value:
                printed.append(value.value)
    return LogIdentity(path, {key: tuple(found) for key, found in seen.items()}, lines)


def _copies(a: LogIdentity, b: LogIdentity) -> bool:
    """The same log twice (a copy, a .gz of it): its rank clash is no second run."""
    return a.lines == b.lines and a.values == b.values


def _single_process(log: LogIdentity) -> bool:
    """A job of one process is all rank 0, prefixed or not: two such logs that differ are two runs."""
    return log.values.get("world_size") == (1,)


class _Group:
    """Logs found to be one run so far; checks a new log against all of them at once (200,000 rank logs)."""

    def __init__(self, log: LogIdentity):
        self.members = [log]
        self.paths = {log.path}
        self.values = dict(log.values)  # members agree on every key: the union is every member's view
        self.single = log if _single_process(log) else None

    def fits(self, log: LogIdentity, clashing: dict[str, set[str]]) -> bool:
        if any(key in self.values and self.values[key] != value for key, value in log.values.items()):
            return False
        if any(path in self.paths and not _copies(log, self.by_path(path)) for path in clashing.get(log.path, ())):
            return False
        return not (self.single is not None and _single_process(log) and not _copies(log, self.single))

    def by_path(self, path: str) -> LogIdentity:
        return next(m for m in self.members if m.path == path)

    def add(self, log: LogIdentity) -> None:
        self.members.append(log)
        self.paths.add(log.path)
        for key, value in log.values.items():
            self.values.setdefault(key, value)
        if self.single is None and _single_process(log):
            self.single = log


def group_runs(logs: Sequence[LogIdentity], rank_clashes: Iterable[tuple[str, str]] = ()) -> list[Run]:
    """The runs among `logs`, each log in exactly one; a single run when nothing tells them apart.
    `rank_clashes`: pairs of logs in which the same rank appears."""
    clashing: dict[str, set[str]] = {}
    for a, b in rank_clashes:
        clashing.setdefault(a, set()).add(b)
        clashing.setdefault(b, set()).add(a)
    anchored: list[_Group] = []
    for log in logs:
        if log.anchored:
            _join_or_start(anchored, log, clashing)
    unplaced: list[_Group] = []
    for log in logs:
        if log.anchored:
            continue
        if len(anchored) == 1 and anchored[0].fits(log, clashing):
            anchored[0].add(log)
        elif len(anchored) <= 1:
            _join_or_start(unplaced, log, clashing)  # no run printed config, or it clashes with the one that did
        else:
            unplaced.append(_Group(log))  # several runs, nothing says which: its own report
    if len(anchored) + len(unplaced) <= 1:
        return [Run([log.path for log in logs])]
    order = {log.path: index for index, log in enumerate(logs)}
    groups = sorted(
        [(g, True) for g in anchored] + [(g, False) for g in unplaced], key=lambda g: order[g[0].members[0].path]
    )
    varied = _keys_with_several_values([g for g, _ in groups])
    return [
        Run(sorted(group.paths, key=order.__getitem__), _differences(group, varied), is_anchored)
        for group, is_anchored in groups
    ]


def _join_or_start(groups: list[_Group], log: LogIdentity, clashing: dict[str, set[str]]) -> None:
    for group in groups:
        if group.fits(log, clashing):
            group.add(log)
            return
    groups.append(_Group(log))


def _keys_with_several_values(groups: list[_Group]) -> set[str]:
    """The keys on which some two runs differ: a run differs from another on each of these that it prints.
    Values are compared with `==` (lists are not hashable), once per distinct value: linear in the runs."""
    distinct: dict[str, list] = {}
    for group in groups:
        for key, value in group.values.items():
            values = distinct.setdefault(key, [])
            if value not in values:
                values.append(value)
    return {key for key, values in distinct.items() if len(values) > 1}


def _differences(group: _Group, varied: set[str]) -> list[str]:
    """`key value` for the identifying keys on which this run differs from another, well-known keys first."""
    mine = group.values
    ordered = sorted(
        (key for key in mine if key in varied),
        key=lambda k: (SHOWN_FIRST.index(k) if k in SHOWN_FIRST else len(SHOWN_FIRST), k),
    )
    return [f"{key} {' then '.join(format_value(v) for v in mine[key])}" for key in ordered]
