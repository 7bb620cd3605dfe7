"""`check`: the preflight signatures' `config` predicates evaluated on a config alone.

`diagnose` reports the same predicates as config-only findings (engine.condition_finding), so every
constraint is written once, in the signature that also matches its error message.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from offloaddoctor.report.engine import condition_finding, config_lookup
from offloaddoctor.report.findings import Finding
from offloaddoctor.scanning import RunFacts
from offloaddoctor.catalog.model import Catalog, Signature
from offloaddoctor.catalog.predicates import evaluate, names_in, unreadable_values
from offloaddoctor.config.values import ConfigStore
from offloaddoctor.errors import UserError


class Unchecked(NamedTuple):
    """A constraint that could be neither confirmed nor ruled out: the keys it needs are not set, or a value
    set is not valid for its key (`maybe` for a true/false key)."""

    id: str
    missing: tuple[str, ...]
    invalid: tuple[str, ...] = ()


@dataclass
class CheckReport:
    configs: list[str]
    violations: list[Finding]
    passed: list[str]
    unchecked: list[Unchecked]
    notes: list[str] = field(default_factory=list)

    @property
    def has_errors(self) -> bool:
        return any(v.signature.severity == "error" for v in self.violations)


def preflight_signatures(catalog: Catalog, only: Sequence[str] = ()) -> list[Signature]:
    checkable = [s for s in catalog.signatures if s.preflight and s.config is not None]
    if not only:
        return checkable
    by_id = {s.id: s for s in checkable}
    unknown = [i for i in only if i not in by_id]
    if unknown:
        known = ", ".join(sorted(by_id))
        raise UserError(f"not a config-checkable signature id: {', '.join(unknown)} (checkable: {known})")
    return [by_id[i] for i in only]


# Constraints on values only the memory model computes: checked when `check --gpu` made the estimate.
MEMORY_KEYS = ("memory.fits", "memory.host_fits")


def check_store(
    catalog: Catalog, store: ConfigStore, configs: Sequence[str] = (), only: Sequence[str] = ()
) -> CheckReport:
    report = CheckReport(list(configs), [], [], [], store.disagreements())
    no_numbers = RunFacts()
    estimated = {key for key in MEMORY_KEYS if store.resolve(key) is not None}
    for signature in preflight_signatures(catalog, only):
        constraint = signature.config
        if constraint is None:  # preflight_signatures keeps only signatures with one
            continue
        # a memory constraint only where the memory model made its value (check --gpu, --host-memory)
        if any(key in MEMORY_KEYS and key not in estimated for key in names_in(constraint, "key")):
            continue
        finding = condition_finding(signature, constraint, store, no_numbers, trigger="config")
        if finding is not None:
            report.violations.append(finding)
            continue
        lookup = config_lookup(store, {})
        outcome = evaluate(constraint, lookup)
        if outcome is False:
            report.passed.append(signature.id)
        else:
            keys = dict.fromkeys(names_in(constraint, "key", needed_only=True))  # not those a default stands in for
            invalid = dict(unreadable_values(constraint, lookup))  # key -> value (the same value per key)
            report.unchecked.append(
                Unchecked(signature.id, tuple(k for k in keys if store.resolve(k) is None), tuple(invalid))
            )
            for key, value in invalid.items():
                note = f"{key} = {value!r} at {_where(store, key)} is not a valid value for this key, so {signature.id} is not checkable"
                if note not in report.notes:
                    report.notes.append(note)
    report.violations.sort(key=lambda f: f.sort_key)
    return report


def _where(store: ConfigStore, key: str) -> str:
    resolved = store.resolve(key)
    return "not set" if resolved is None else str(resolved.source)
