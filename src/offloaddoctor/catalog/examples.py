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


@dataclass
class ExampleRun:
    outcomes: list[ExampleOutcome] = field(default_factory=list)

    def by_signature(self) -> dict[str, Confusion]:
        table: dict[str, Confusion] = {}
        for outcome in self.outcomes:
            cell = table.setdefault(outcome.signature_id, Confusion())
            if outcome.expect == "match":
                if outcome.passed:
                    cell.true_positive += 1
                else:
                    cell.false_negative += 1
            elif outcome.passed:
                cell.true_negative += 1
            else:
                cell.false_positive += 1
        return table

    def total(self) -> Confusion:
        cells = self.by_signature().values()
        return Confusion(
            *(
                sum(getattr(c, name) for c in cells)
                for name in ("true_positive", "false_negative", "true_negative", "false_positive")
            )
        )

    @property
    def failures(self) -> list[ExampleOutcome]:
        return [o for o in self.outcomes if not o.passed]


def judge_example(signature: Signature, index: int, example: Example, findings) -> ExampleOutcome:
    """The outcome of one example, given the findings diagnosing its log gave (api.run_example runs it)."""
    finding = next((f for f in findings if f.id == signature.id), None)
    verdict = finding.config.verdict if finding else None
    if example.expect == "match":
        if finding is None:
            fired = [f.id for f in findings]
            return ExampleOutcome(
                signature.id,
                index,
                example.name,
                "match",
                False,
                None,
                False,
                f"did not fire (fired: {', '.join(fired) or 'nothing'})",
            )
        if example.verdict and verdict != example.verdict:
            return ExampleOutcome(
                signature.id,
                index,
                example.name,
                "match",
                True,
                verdict,
                False,
                f"verdict {verdict}, expected {example.verdict}",
            )
        return ExampleOutcome(signature.id, index, example.name, "match", True, verdict, True)
    if finding is not None:
        return ExampleOutcome(
            signature.id, index, example.name, "no_match", True, verdict, False, "fired on a no-match example"
        )
    return ExampleOutcome(signature.id, index, example.name, "no_match", False, None, True)
