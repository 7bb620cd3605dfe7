"""`offloaddoctor signatures` and `offloaddoctor explain ID`."""

from __future__ import annotations

import json
import textwrap
from dataclasses import asdict

from offloaddoctor.catalog.model import Catalog, Signature, reference_text
from offloaddoctor.catalog.predicates import describe


def render_catalog(catalog: Catalog) -> str:
    rows = [("ID", "SEVERITY", "PRIORITY", "PREFLIGHT", "TITLE")]
    for s in sorted(catalog.signatures, key=lambda s: s.id):
        rows.append((s.id, s.severity, str(s.priority), "yes" if s.preflight else "", s.title))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:4])) + "  " + row[4] for row in rows]
    return "\n".join(line.rstrip() for line in lines) + f"\n\n{len(catalog.signatures)} signatures\n"


def render_catalog_json(catalog: Catalog) -> str:
    items = [
        {"id": s.id, "severity": s.severity, "priority": s.priority, "preflight": s.preflight, "title": s.title}
        for s in sorted(catalog.signatures, key=lambda s: s.id)
    ]
    return json.dumps({"schema_version": 1, "signatures": items}, indent=2) + "\n"


def render_explain(signature: Signature) -> str:
    out = [
        f"{signature.id}: {signature.title}",
        f"severity {signature.severity}, priority {signature.priority}"
        + (", preflight constraint" if signature.preflight else ""),
        "",
    ]

    def section(title: str, body: list[str]) -> None:
        out.append(title)
        out.extend("  " + line for line in body)
        out.append("")

    section("Symptom", _wrap(signature.symptom))
    section("Likely cause", _wrap(signature.cause))
    if signature.match:
        section(
            "Matches log lines containing",
            [repr(x) for x in signature.match.literals]
            + ["and one of the patterns:"]
            + [f"  {p}" for p in signature.match.pattern_sources],
        )
    if signature.shares_match_of:
        section(
            "Matches",
            [f"the same lines as {signature.shares_match_of}; this signature takes them when its condition holds"],
        )
    if signature.when:
        section("Fires when", _wrap(describe(signature.when)))
    if signature.config:
        section("Config confirms it when", _wrap(describe(signature.config)))
    section("How to confirm", [f"- {step}" for step in signature.confirm])
    section("Fix", _wrap(signature.fix.summary) + [f"  {line}" for line in signature.fix.overrides])
    for instead in signature.fix.instead:
        section(
            "Fix instead",
            _wrap(f"where {describe(instead.when)}:")
            + _wrap(instead.note)
            + [f"  {line}" for line in instead.overrides],
        )
    if signature.fix.tried:
        runs = [_wrap(run) for run in signature.fix.tried]
        section(
            "Where this fix was run", [f"{'  ' if n else '- '}{line}" for run in runs for n, line in enumerate(run)]
        )
    if signature.known_issues:
        section(
            "Known upstream bugs",
            [
                line
                for issue in signature.known_issues
                for line in (
                    f"{issue.id}: {issue.title}",
                    f"  {issue.package} {', '.join(issue.versions)}; {issue.link}"
                    + (f"; fixed by {issue.fixed_by}" if issue.fixed_by else ""),
                    f"  config shape: {describe(issue.when)}",
                )
            ],
        )
    section("References", [reference_text(ref) for ref in signature.references])
    matches = sum(e.expect == "match" for e in signature.examples)
    section(
        "Examples", [f"{matches} matching and {len(signature.examples) - matches} non-matching, in {signature.path}"]
    )
    return "\n".join(out).rstrip() + "\n"


def _wrap(text: str) -> list[str]:
    # never inside a word: a file name with hyphens stays whole, to be copied
    return textwrap.wrap(" ".join(text.split()), width=96, break_on_hyphens=False, break_long_words=False) or [""]


def render_confusion(run) -> str:
    """Per signature: true/false positives/negatives of its examples, then every wrong outcome."""
    table = run.by_signature()
    rows = [("SIGNATURE", "TP", "FN", "TN", "FP")]
    for signature_id, cell in [*sorted(table.items()), ("total", run.total())]:
        counts = [cell.true_positive, cell.false_negative, cell.true_negative, cell.false_positive]
        rows.append((signature_id, *map(str, counts)))
    width = max(len(r[0]) for r in rows)
    lines = [r[0].ljust(width) + "".join(c.rjust(5) for c in r[1:]) for r in rows]
    for outcome in run.failures:
        label = outcome.name or f"example {outcome.index}"
        lines.append(f"FAIL {outcome.signature_id} [{outcome.index}] {label}: {outcome.problem}")
    lines.append(f"{len(run.outcomes)} examples, {len(run.failures)} wrong")
    return "\n".join(lines) + "\n"


def render_confusion_json(run) -> str:
    return (
        json.dumps(
            {
                "schema_version": 1,
                "signatures": {k: asdict(v) for k, v in sorted(run.by_signature().items())},
                "total": asdict(run.total()),
                "failures": [
                    {"id": o.signature_id, "index": o.index, "name": o.name, "expect": o.expect, "problem": o.problem}
                    for o in run.failures
                ],
                "examples": len(run.outcomes),
            },
            indent=2,
        )
        + "\n"
    )
