"""`signatures lint`: what the loader accepts but a reviewer should still hear about.

Errors (exit 1): everything the loader refuses (schema, compilation, catastrophic patterns such as `(a+)+` or
`(a|aa)+`, a log signature
without both a `match` and a `no_match` example — reported all at once), a pattern no example exercises, a
match example whose line carries none of the literals (the prefilter would hide it).
Warnings: patterns that start with `.*`/`.+` (every search scans the line twice), an unbounded repeat inside a
bounded one such as `(.*a){3}` (polynomial backtracking), literals shorter than 4 characters (they let
through most lines and slow every scan).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from offloaddoctor.catalog.loader import CatalogError, Vocabulary, load_catalog
from offloaddoctor.catalog.model import Signature
from offloaddoctor.catalog.regex_safety import polynomial, slow_start

ERROR, WARNING = "error", "warning"
SHORT_LITERAL = 4


@dataclass(frozen=True)
class LintMessage:
    level: str
    where: str  # file path
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.level}: {self.where}: {self.field}: {self.message}"


def lint(vocabulary: Vocabulary, dirs: Sequence[Path]) -> list[LintMessage]:
    try:
        catalog = load_catalog(vocabulary, dirs)
    except CatalogError as exc:
        return [LintMessage(ERROR, p.path, p.field, p.reason) for p in exc.problems]
    own = {str(Path(d).resolve()) for d in dirs}
    messages: list[LintMessage] = []
    for signature in catalog.signatures:
        if dirs and str(Path(signature.path).resolve().parent) not in own:
            continue  # lint what was asked for; the built-ins are linted by their own tests
        messages.extend(_lint_signature(signature))
    return messages


def _lint_signature(signature: Signature) -> list[LintMessage]:
    out: list[LintMessage] = []

    def say(level: str, field: str, message: str) -> None:
        out.append(LintMessage(level, signature.path, field, message))

    if signature.match is None:
        return out
    matching = [e for e in signature.examples if e.expect == "match"]  # the loader requires both kinds
    lines = [line for e in matching for line in e.log.splitlines()]
    for index, pattern in enumerate(signature.match.patterns):
        hits = [line for line in lines if pattern.search(line)]
        if matching and not hits:
            say(ERROR, f"match.patterns[{index}]", "no example line matches it")
        for line in hits:
            if not any(literal in line for literal in signature.match.literals):
                say(
                    ERROR,
                    f"match.patterns[{index}]",
                    f"matches {line[:60]!r} but no literal is in that line: the prefilter hides it",
                )
                break
        if slow_start(pattern.pattern):
            say(WARNING, f"match.patterns[{index}]", "starts with .* or .+: drop it, search() already scans the line")
        slow = polynomial(pattern.pattern)
        if slow:
            say(WARNING, f"match.patterns[{index}]", slow)
    for literal in signature.match.literals:
        if len(literal) < SHORT_LITERAL:
            say(WARNING, "match.literals", f"{literal!r} is short: most lines pass the prefilter")
    return out
