"""JUnit XML: one test case per catalogue signature, so CI dashboards track each failure kind over time.

A finding that fails the run (per --fail-on) is a <failure> carrying its evidence; a finding below the
threshold passes with its text in <system-out>; a suppressed signature is <skipped> with its reason.
Follows the common (Jenkins/Surefire) schema: testsuites > testsuite > testcase > failure|skipped|system-out.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from offloaddoctor.report import Finding, Report
from offloaddoctor.catalog.model import Catalog
from offloaddoctor.render.plain import finding_block, run_heading
from offloaddoctor.text_safety import safe_lines

_NOT_XML = re.compile("[\ud800-\udfff\ufffe\uffff]")


def _xml_text(text: str) -> str:
    return _NOT_XML.sub("\ufffd", safe_lines(text))


def render_junit(report: Report, catalog: Catalog, failing: set[str]) -> str:
    """`failing`: ids of findings that fail the run; a suppressed one is skipped with its reason. Logs of several
    runs give a test suite per run, named after it."""
    suites = []
    if report.runs:
        for index, run in enumerate(report.runs, start=1):
            name = f"offloaddoctor {run_heading(index, run, len(report.runs))}"
            suites.append(_suite(run, catalog, failing, name))
    else:
        suites.append(_suite(report, catalog, failing, "offloaddoctor"))
    totals = {name: sum(int(suite.get(name, "0")) for suite in suites) for name in ("tests", "failures", "skipped")}
    root = ET.Element(
        "testsuites",
        name="offloaddoctor",
        tests=str(totals["tests"]),
        failures=str(totals["failures"]),
        errors="0",
        skipped=str(totals["skipped"]),
        time="0",
    )
    root.extend(suites)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _suite(report: Report, catalog: Catalog, failing: set[str], name: str) -> ET.Element:
    found = {f.id: f for f in report.findings}
    suite = ET.Element("testsuite", name=_xml_text(name))
    counts = {"tests": 0, "failures": 0, "skipped": 0}
    for signature in catalog.signatures:
        counts["tests"] += 1
        case = ET.SubElement(
            suite, "testcase", classname=f"offloaddoctor.{signature.severity}", name=signature.id, time="0"
        )
        if signature.id in report.suppressed:
            counts["skipped"] += 1
            by = report.suppressed_by.get(signature.id, "--ignore")
            reason = report.suppressed[signature.id] + ("" if by == "--ignore" else f" (ignored in {by})")
            ET.SubElement(case, "skipped", message=_xml_text(reason))
            continue
        finding = found.get(signature.id)
        if finding is None:
            continue
        body = _xml_text("\n".join(finding_block(1, finding)))
        if finding.id in failing:
            counts["failures"] += 1
            failure = ET.SubElement(case, "failure", message=_xml_text(_message(finding)), type=signature.severity)
            failure.text = body
        else:
            ET.SubElement(case, "system-out").text = body
    for key, value in counts.items():
        suite.set(key, str(value))
    suite.set("errors", "0")
    suite.set("time", "0")
    return suite


def _message(finding: Finding) -> str:
    where = f" ({finding.occurrences} occurrences)" if finding.occurrences > 1 else ""
    return f"{finding.signature.title}{where}"
