"""Markdown pages for docs/signatures/: one per signature and an index, generated from the catalogue so the
docs cannot drift from it (tools/gen_signature_docs.py writes them; a test fails when they are stale)."""

from __future__ import annotations

from offloaddoctor.catalog.model import Catalog, Signature, reference_text
from offloaddoctor.catalog.predicates import describe
from offloaddoctor.render.markdown import fenced


def _paragraph(text: str) -> str:
    return " ".join(text.split())


def signature_page(signature: Signature) -> str:
    out = [
        f"# `{signature.id}` — {signature.title}",
        "",
        f"Severity **{signature.severity}**, priority {signature.priority}"
        + (", also checked before launch by `offloaddoctor check`." if signature.preflight else "."),
        "",
        "## Symptom",
        "",
        _paragraph(signature.symptom),
        "",
        "## Likely cause",
        "",
        _paragraph(signature.cause),
        "",
    ]
    if signature.match:
        out += [
            "## What it matches",
            "",
            "Lines containing one of: "
            + ", ".join(f"`{x}`" for x in signature.match.literals)
            + ", and matching one of these patterns:",
            "",
        ]
        out += fenced([p.pattern for p in signature.match.patterns], "text") + [""]
    if signature.shares_match_of:
        out += [
            "## What it matches",
            "",
            f"The same lines as [`{signature.shares_match_of}`]({signature.shares_match_of}.md); "
            "of the signatures sharing them, the highest-priority one whose condition holds takes the line.",
            "",
        ]
    if signature.when:
        out += ["## Fires when", "", f"`{describe(signature.when)}`", ""]
    if signature.config:
        out += ["## Config that confirms it", "", f"`{describe(signature.config)}`", ""]
    out += ["## How to confirm", ""] + [f"- {_paragraph(step)}" for step in signature.confirm] + [""]
    out += ["## Fix", "", _paragraph(signature.fix.summary), ""]
    if signature.fix.overrides:
        out += fenced(list(signature.fix.overrides), "text") + [""]
    for instead in signature.fix.instead:
        out += [f"Instead, where `{describe(instead.when)}`: {_paragraph(instead.note)}", ""]
        out += fenced(list(instead.overrides), "text") + [""] if instead.overrides else []
    if signature.fix.tried:
        out += ["Where this fix was run:", ""] + [f"- {_paragraph(run)}" for run in signature.fix.tried] + [""]
    if signature.known_issues:
        out += [
            "## Known upstream bugs",
            "",
            "Shown on the finding when the run's config has the bug's shape (the verdict then "
            "says the config contradicts the error) or the log prints an affected version.",
            "",
        ]
        for issue in signature.known_issues:
            out.append(
                f"- [{issue.id}]({issue.link}): {_paragraph(issue.title)}. Affects {issue.package} "
                f"{', '.join(issue.versions)}"
                + (f"; fixed by {issue.fixed_by}" if issue.fixed_by else "")
                + f". Config shape: `{describe(issue.when)}`."
            )
        out.append("")
    out += ["## References", ""] + [f"- {reference_text(ref)}" for ref in signature.references]
    out += ["", "## Examples", ""]
    for example in signature.examples:
        label = "matches" if example.expect == "match" else "does not match"
        config = f" with config `{example.config}`" if example.config else ""
        out += [f"{example.name or 'Example'} — {label}{config}:", ""] + fenced(example.log.splitlines(), "text") + [""]
    return "\n".join(out).rstrip() + "\n"


def index_page(catalog: Catalog) -> str:
    out = [
        "# Signature catalogue",
        "",
        "Generated from `signatures/*.yaml` by `tools/gen_signature_docs.py`. *Fix run*: the fix as printed was run on",
        "a GPU and did what the finding says (trained, served the request, stepped faster); the signature's page names",
        "the logs.",
        "",
        "| id | severity | priority | preflight | fix run | title |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for s in sorted(catalog.signatures, key=lambda s: s.id):
        out.append(
            f"| [`{s.id}`]({s.id}.md) | {s.severity} | {s.priority} | {'yes' if s.preflight else ''} "
            f"| {'yes' if s.fix.tried else ''} | {s.title} |"
        )
    return "\n".join(out) + "\n"


def pages(catalog: Catalog) -> dict[str, str]:
    """File name -> content for docs/signatures/."""
    result = {f"{s.id}.md": signature_page(s) for s in catalog.signatures}
    result["README.md"] = index_page(catalog)
    return result
