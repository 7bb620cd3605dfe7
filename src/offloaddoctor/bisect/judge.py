"""Good or bad for one config: the same check that `offloaddoctor check` runs."""

from __future__ import annotations

from collections.abc import Sequence

from offloaddoctor.report import check_store
from offloaddoctor.bisect.search import BAD, GOOD, Outcome
from offloaddoctor.catalog.model import Catalog
from offloaddoctor.config.defaults import add_defaults
from offloaddoctor.config.loading import build_store
from offloaddoctor.config.values import ConfigValue


class ConfigJudge:
    """Bad when SIGNATURE's constraint is violated, or (no signature) any error-severity constraint."""

    def __init__(self, catalog: Catalog, signature_id: str | None = None) -> None:
        self.catalog = catalog
        self.signature_id = signature_id
        self.only: Sequence[str] = [signature_id] if signature_id else ()
        self.target = f"constraint {signature_id}" if signature_id else "any error-severity constraint"
        check_store(catalog, build_store(), only=self.only)  # an unknown id fails here, before any work

    def judge(self, values: Sequence[ConfigValue]) -> Outcome:
        store = build_store(values)
        add_defaults(store)
        report = check_store(self.catalog, store, only=self.only)
        failing = tuple(
            v.id
            for v in report.violations
            if (v.id == self.signature_id if self.signature_id else v.signature.severity == "error")
        )
        if failing:
            return Outcome(BAD, f"violates {', '.join(failing)}", failing)
        return Outcome(GOOD, "passes the check")
