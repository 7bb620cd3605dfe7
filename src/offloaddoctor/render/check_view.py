"""`offloaddoctor check` output: violations as diagnose's finding blocks, then what could not be checked."""

from __future__ import annotations


from offloaddoctor import __version__
from offloaddoctor.report import CheckReport
from offloaddoctor.render.json_report import SCHEMA_VERSION, finding_to_dict
from offloaddoctor.text_safety import json_document, safe_text


def check_headline(report: CheckReport) -> str:
    checked = len(report.violations) + len(report.passed)
    count = len(report.violations)
    verdict = f"{count} violation{'s' if count != 1 else ''}" if count else "no violation"
    return (
        f"offloaddoctor {__version__}: {verdict} in {safe_text(', '.join(report.configs))} "
        f"({checked} constraints checked, {len(report.unchecked)} not checkable)"
    )


def unchecked_lines(report: CheckReport) -> list[str]:
    if not report.unchecked:
        return []
    why = "keys not set or values not valid" if any(item.invalid for item in report.unchecked) else "keys not set"
    lines = [f"Not checked ({why}, so neither confirmed nor ruled out):"]
    for item in report.unchecked:
        needs = [*item.missing, *(f"a valid {key}" for key in item.invalid)]
        lines.append(f"  {item.id}: needs {', '.join(needs) or 'more keys'}")
    return lines


def render_check_plain(report: CheckReport) -> str:
    from offloaddoctor.render.plain import finding_blocks  # textwrap and the plain renderer: not for JSON

    out = [check_headline(report), "", *finding_blocks(report.violations)]
    out.extend(unchecked_lines(report))
    out.extend(f"note: {safe_text(note)}" for note in report.notes)
    return "\n".join(out).rstrip() + "\n"


def render_check_json(report: CheckReport) -> str:
    return json_document(
        {
            "schema_version": SCHEMA_VERSION,
            "tool": {"name": "offloaddoctor", "version": __version__},
            "configs": report.configs,
            "violations": [finding_to_dict(v) for v in report.violations],
            "passed": report.passed,
            "unchecked": [
                {"id": u.id, "missing": list(u.missing), "invalid": list(u.invalid)} for u in report.unchecked
            ],
            "notes": report.notes,
        }
    )
