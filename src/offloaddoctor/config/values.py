"""Config values with provenance, and the store that resolves them by precedence."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: typing costs start-up time
    from typing import Any

# Higher wins. Within one level the value read later wins (a later --set, the last arguments block).
PRECEDENCE = {"log": 1, "config": 2, "set": 3, "derived": 0, "default": -1}
_GIVEN = ("config", "set")  # what the user gave: config files and --set


# tuples (small, and cheap to make): a log's arguments block is ~900 values, and 400 rank logs print one each.
class Source(NamedTuple):
    path: str
    line: int | None = None
    detail: str = ""

    def __str__(self) -> str:
        location = self.path if self.line is None else f"{self.path}:{self.line}"
        return f"{location} ({self.detail})" if self.detail else location


class ConfigValue(NamedTuple):
    key: str
    value: Any
    source: Source
    origin: str  # one of PRECEDENCE
    # the key as a config file or override wrote it, where that is a dotted path other than `key`
    # (FlagScale's `train.system.recompute_granularity`: config/dialect.py prints its fixes there)
    written: str = ""


@dataclass
class Resolved:
    key: str
    value: Any
    source: Source
    origin: str
    overridden: list[ConfigValue] = field(default_factory=list)  # other values that disagree

    @property
    def disagreement(self) -> str | None:
        if not self.overridden:
            return None
        others = "; ".join(f"{format_value(v.value)} at {v.source}" for v in self.overridden)
        return f"{self.key} = {format_value(self.value)} at {self.source} wins over {others}"


def format_value(value: Any) -> str:
    if value is None:
        return "None"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, str):
        return value if value.strip() == value and value else repr(value)
    return str(value)


class ConfigStore:
    """Every value seen for every key, resolved on demand: explicit config beats the log."""

    def __init__(self) -> None:
        self._values: dict[str, list[ConfigValue]] = {}
        self._derived: dict[str, Resolved] = {}
        self._given: list[ConfigValue] = []  # from config files and --set: a few, beside 900 a rank log's block prints
        # Every argument name a complete Megatron-LM arguments block printed (the flags the run's Megatron-LM has), or
        # None where no log printed one (config/from_log.py)
        self.printed_arguments: frozenset[str] | None = None

    def add(self, value: ConfigValue) -> None:
        self._values.setdefault(value.key, []).append(value)
        if value.origin in _GIVEN:
            self._given.append(value)

    def extend(self, values) -> None:
        for value in values:
            self.add(value)

    def all_values(self) -> list[ConfigValue]:
        return [value for values in self._values.values() for value in values]

    def given_values(self) -> list[ConfigValue]:
        """The values config files and --set gave, in the order added."""
        return list(self._given)

    def keys(self) -> list[str]:
        return sorted(set(self._values) | set(self._derived))

    def resolve(self, key: str) -> Resolved | None:
        values = self._values.get(key)
        if not values:
            return self._derived.get(key)
        best_index = max(range(len(values)), key=lambda i: (PRECEDENCE[values[i].origin], i))
        best = values[best_index]
        others = [v for v in values if not same_value(v.value, best.value)]
        # Keep one disagreeing value per source so a repeated log block does not flood the report.
        unique = list({(str(v.source.path), v.origin, repr(v.value)): v for v in others}.values())
        return Resolved(key, best.value, best.source, best.origin, unique)

    def value(self, key: str) -> Any:
        """The winning value of `key`; None where nothing sets it (or it is set to None)."""
        resolved = self.resolve(key)
        return None if resolved is None else resolved.value

    def holds(self, predicate, changes: dict[str, Any] | None = None):
        """A config predicate (catalog/predicates.py) on this config's keys, with `changes` (canonical key -> value)
        applied over them: True, False or None (unknown)."""
        from offloaddoctor.catalog.predicates import evaluate, missing

        def lookup(kind: str, name: str) -> Any:
            if kind == "key" and changes and name in changes:
                return changes[name]
            resolved = self.resolve(name) if kind == "key" else None
            return missing() if resolved is None else resolved.value

        return evaluate(predicate, lookup)

    def with_changes(self, changes, source: str) -> ConfigStore:
        """A copy with (canonical key, value) changes set over every value (as --set would), from `source`."""
        changed = ConfigStore()
        changed._values = {key: list(values) for key, values in self._values.items()}
        changed._derived = dict(self._derived)
        changed._given = list(self._given)
        changed.extend(ConfigValue(key, value, Source(source), "set") for key, value in changes)
        return changed

    def set_derived(self, resolved: Resolved) -> None:
        """A derived value only fills a gap: a key given anywhere explicitly is never replaced."""
        if not self._values.get(resolved.key):
            self._derived[resolved.key] = resolved

    def disagreements(self) -> list[str]:
        return [note for _, note in self.keyed_disagreements()]

    def keyed_disagreements(self) -> list[tuple[str, str]]:
        """(key, note) for every key whose winning value disagrees with one from another origin."""
        notes = []
        for key in sorted(self._values):
            values = self._values[key]
            if all(v.origin == values[0].origin for v in values):  # one origin: nothing from another to disagree
                continue
            resolved = self.resolve(key)
            note = resolved.disagreement if resolved else None
            if resolved and note and any(v.origin != resolved.origin for v in resolved.overridden):
                notes.append((key, note))
        return notes


def same_value(left: Any, right: Any) -> bool:
    """Equal as printed, ignoring case (`True` in a log, `true` in a YAML file), or as numbers (`0` on a command line,
    `0.0` in the arguments block)."""
    if _number(left) and _number(right):
        return bool(left == right)
    return format_value(left).lower() == format_value(right).lower()


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
