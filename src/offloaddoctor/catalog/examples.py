"""Judge every signature's examples and count the outcomes: the confusion matrix of `signatures test`
(api.run_examples runs them through diagnose).

A `match` example passes when its signature fires on the example log (with the example's config) and, if the
example states a verdict, the config verdict agrees; a `no_match` example passes when it does not fire.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from offloaddoctor.catalog.model import Example, Signature


@dataclass(frozen=True)
class ExampleOutcome:
    signature_id: str
    index: int
    name: str
    expect: str  # "match" or "no_match"
    fired: bool
    verdict: str | None
    passed: bool
    problem: str = ""


@dataclass
class Confusion:
    true_positive: int = 0
    false_negative: int = 0  # a match example that did not fire (or fired with the wrong verdict)
    true_negative: int = 0
    false_positive: int = 0


# (a match example?, passed?) -> the Confusion count it adds to, in Confusion's field order.
_CELLS = {
    (True, True): "true_positive",
    (True, False): "false_negative",
    (False, True): "true_negative",
    (False, False): "false_positive",
}


@dataclass
class ExampleRun:
    outcomes: list[ExampleOutcome] = field(default_factory=list)

    def by_signature(self) -> dict[str, Confusion]:
        table: dict[str, Confusion] = {}
        for outcome in self.outcomes:
            cell = table.setdefault(outcome.signature_id, Confusion())
            name = _CELLS[outcome.expect == "match", outcome.passed]
            setattr(cell, name, getattr(cell, name) + 1)
        return table

    def total(self) -> Confusion:
        cells = self.by_signature().values()
        return Confusion(*(sum(getattr(c, name) for c in cells) for name in _CELLS.values()))

    @property
    def failures(self) -> list[ExampleOutcome]:
        return [o for o in self.outcomes if not o.passed]


def judge_example(signature: Signature, index: int, example: Example, findings) -> ExampleOutcome:
    """The outcome of one example, given the findings diagnosing its log gave (api.run_example runs it)."""
    finding = next((f for f in findings if f.id == signature.id), None)
    verdict = finding.config.verdict if finding else None
    if example.expect != "match":
        problem = "" if finding is None else "fired on a no-match example"
    elif finding is None:
        problem = f"did not fire (fired: {', '.join(f.id for f in findings) or 'nothing'})"
    elif example.verdict and verdict != example.verdict:
        problem = f"verdict {verdict}, expected {example.verdict}"
    else:
        problem = ""
    return ExampleOutcome(
        signature.id, index, example.name, example.expect, finding is not None, verdict, not problem, problem
    )
