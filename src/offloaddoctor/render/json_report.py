"""`--format json`: the versioned, documented schema (docs/json-output.md)."""

from __future__ import annotations

import json

from offloaddoctor.render.text_safety import inert_json
from dataclasses import asdict

from offloaddoctor import __version__
from offloaddoctor.analysis.findings import Finding, Report
from offloaddoctor.analysis.ranks import format_ranks
from offloaddoctor.analysis.evidence import Evidence  # not the scanner's re-export: `check` never loads the scanner

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: typing costs start-up time
    from typing import Any

SCHEMA_VERSION = 1


def report_to_dict(report: Report) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "offloaddoctor", "version": __version__},
        "sources": [
            {"path": s.path, "lines": s.lines, "findings": [f.id for f in report.findings if s.path in f.files]}
            for s in report.sources
        ],
        "findings": [finding_to_dict(f) for f in report.findings],
        "unmatched": _evidence(report.unmatched) if report.unmatched else None,
        "run": dict(report.run_facts),
        "notes": list(report.notes),
        "suppressed": [{"id": k, "reason": v} for k, v in report.suppressed.items()],
    }


def _evidence(evidence: Evidence) -> dict[str, Any]:
    return asdict(evidence)


def finding_to_dict(finding: Finding) -> dict[str, Any]:
    signature = finding.signature
    entry = {
        "id": finding.id,
        "severity": signature.severity,
        "title": signature.title,
        "priority": signature.priority,
        "trigger": finding.trigger,
        "symptom": signature.symptom,
        "cause": signature.cause,
        "evidence": [_evidence(e) for e in finding.evidence],
        "occurrences": finding.occurrences,
        "ranks": finding.ranks,
        "ranks_compact": format_ranks(finding.ranks),
        "files": list(finding.files),
        "facts": finding.facts,
        "config": {
            "verdict": finding.config.verdict,
            "explanation": finding.config.explanation,
            "values": [
                {
                    "key": v.key,
                    "known": v.known,
                    "value": v.value,
                    "source": v.source,
                    "overridden": list(v.overridden),
                }
                for v in finding.config.values
            ],
        },
        "confirm": list(signature.confirm),
        "fix": {"summary": signature.fix.summary, "overrides": list(finding.overrides),
                **({"note": finding.fix_note} if finding.fix_note else {})},
        "references": [dict(r) for r in signature.references],
    }
    if finding.known_issues:  # only when there is one: most findings never have any
        entry["known_issues"] = [
            {"id": k.issue.id, "title": k.issue.title, "link": k.issue.link, "package": k.issue.package,
             "versions": list(k.issue.versions), "fixed_by": k.issue.fixed_by,
             "matched_by": (["config"] if k.by_config else []) + ([f"version {k.version}"] if k.version else [])}
            for k in finding.known_issues
        ]
    return entry


def render_json(report: Report) -> str:
    return inert_json(json.dumps(report_to_dict(report), indent=2, ensure_ascii=False, default=str)) + "\n"
