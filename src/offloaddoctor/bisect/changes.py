"""What differs between two configs, key by key, and which differences a failing rule reads."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple

from offloaddoctor.catalog.model import Catalog
from offloaddoctor.catalog.predicates import names_in
from offloaddoctor.config.derived import inputs_of
from offloaddoctor.config.values import ConfigValue, format_value

ABSENT = object()


class KeyChange(NamedTuple):
    key: str
    before: Any  # ABSENT when the key was added
    after: Any  # ABSENT when the key was removed
    before_source: str | None
    after_source: str | None
    read_by_failing_rule: bool

    def describe(self) -> str:
        return f"{self.key}: {_shown(self.before)} -> {_shown(self.after)}"


def _shown(value: Any) -> str:
    return "(absent)" if value is ABSENT else format_value(value)


def flatten(values: Iterable[ConfigValue]) -> dict[str, ConfigValue]:
    """One value per canonical key: the last one written (a later duplicate or --set wins)."""
    return {value.key: value for value in values}


def keys_read_by(catalog: Catalog, signature_ids: Iterable[str]) -> set[str]:
    keys: set[str] = set()
    for signature_id in signature_ids:
        signature = catalog.get(signature_id)
        if signature is not None:
            keys.update(names_in(signature.config, "key"))
    return inputs_of(keys)


def diff_configs(before: dict[str, ConfigValue], after: dict[str, ConfigValue], relevant: set[str]) -> list[KeyChange]:
    changes = []
    for key in sorted(set(before) | set(after)):
        old, new = before.get(key), after.get(key)
        if old is not None and new is not None and format_value(old.value) == format_value(new.value):
            continue
        changes.append(
            KeyChange(
                key,
                old.value if old else ABSENT,
                new.value if new else ABSENT,
                str(old.source) if old else None,
                str(new.source) if new else None,
                key in relevant,
            )
        )
    # What the failing rule reads first: that is what the user came for.
    return sorted(changes, key=lambda c: (not c.read_by_failing_rule, c.key))
