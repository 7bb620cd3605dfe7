"""The signature catalogue: schema, loading and validation, compiled matchers."""

from __future__ import annotations

from offloaddoctor.lazy_exports import lazy_exports

TYPE_CHECKING = False
if TYPE_CHECKING:  # for type checkers; at run time each name loads its module on first use
    from offloaddoctor.catalog.examples import ExampleOutcome, ExampleRun, judge_example
    from offloaddoctor.catalog.loader import Vocabulary, load_catalog
    from offloaddoctor.catalog.model import Catalog, Example, Signature
    from offloaddoctor.catalog.predicates import names_in

# What `api` uses, and the module that defines each: imported on first use, for start-up time.
_HOMES = {
    "ExampleOutcome": "examples",
    "ExampleRun": "examples",
    "judge_example": "examples",
    "Vocabulary": "loader",
    "load_catalog": "loader",
    "Catalog": "model",
    "Example": "model",
    "Signature": "model",
    "names_in": "predicates",
}

__all__ = [
    "Catalog",
    "Example",
    "ExampleOutcome",
    "ExampleRun",
    "Signature",
    "Vocabulary",
    "judge_example",
    "load_catalog",
    "names_in",
]


__getattr__ = lazy_exports(__name__, _HOMES, globals())
