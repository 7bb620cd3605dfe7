"""How `diagnose` classifies real public logs it was never tuned on: fixtures/held-out/.

Each case is a verbatim paste from a public thread (its SOURCE.md), with the truth labelled from the thread
in label.yaml before diagnose ever read it. A case is:
  right       diagnose leads with the truth or a finding the label accepts (or, where no signature fits,
              claims no cause);
  not first   the truth is among the findings, but another leads;
  missed      the truth is a signature, and diagnose claims nothing;
  misleading  diagnose leads with a cause that is neither the truth nor one the label accepts.

    python benchmarks/held_out_logs.py [--json] [CASE ...]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
HELD_OUT = ROOT / "fixtures" / "held-out"
CONFIG_NAMES = ("config.yaml", "config.sh")


def cases(names: list[str] | None = None) -> list[Path]:
    found = sorted(p.parent for p in HELD_OUT.glob("*/label.yaml"))
    return [case for case in found if not names or case.name in names]


def diagnose_case(case: Path) -> dict:
    """What diagnose reports for the case, as the CLI would with the case's config (the log alone where diagnose
    refuses that config, as a user would go on): the finding ids in the report's order, the failure it shows as
    unexplained, and why it refused the config, or why it refused."""
    from offloaddoctor.api import diagnose
    from offloaddoctor.errors import UserError
    from offloaddoctor.policy import Policy

    configs = [str(case / name) for name in CONFIG_NAMES if (case / name).exists()]
    refused_config = ""
    try:
        report = diagnose([str(case / "job.log")], configs, policy=Policy())
    except UserError as error:
        if not configs:
            return {"refused": str(error)}
        # what a user does next: the log alone (a NeMo-Run launcher YAML is no run config)
        refused_config = str(error)
        try:
            report = diagnose([str(case / "job.log")], policy=Policy())
        except UserError as again:
            return {"refused": str(again)}
    unmatched = report.unmatched.text if report.unmatched is not None else ""
    return {
        "findings": [finding.signature.id for finding in report.findings],
        "unexplained": unmatched,
        "refused_config": refused_config,
    }


def outcome(label: dict, report: dict) -> str:
    if "refused" in report:
        return "refused"
    ids = report["findings"]
    truth = str(label["truth"])
    accepted = {truth, *label.get("also_ok", [])}
    if truth == "none" or truth.startswith("config-error"):
        return "right" if not ids or ids[0] in accepted else "misleading"
    if ids and ids[0] in accepted:
        return "right"
    if not ids:
        return "missed"
    return "not first" if truth in ids else "misleading"


def evaluate(names: list[str] | None = None) -> list[dict]:
    rows = []
    for case in cases(names):
        label = yaml.safe_load((case / "label.yaml").read_text())
        report = diagnose_case(case)
        rows.append(
            {
                "case": case.name,
                "truth": str(label["truth"]),
                "confidence": label.get("confidence", ""),
                "findings": report.get("findings", []),
                "unexplained": report.get("unexplained", ""),
                "refused_config": report.get("refused_config", ""),
                "outcome": outcome(label, report),
            }
        )
    return rows


def main(argv: list[str]) -> int:
    as_json = "--json" in argv
    names = [arg for arg in argv if not arg.startswith("--")]
    unknown = sorted(set(names) - {case.name for case in cases()})
    if unknown:
        print(f"held_out_logs.py: error: no case {unknown[0]!r} in {HELD_OUT}", file=sys.stderr)
        return 2
    rows = evaluate(names or None)
    if as_json:
        print(json.dumps(rows, indent=1))
        return 0
    for row in rows:
        found = ", ".join(row["findings"]) or "-"
        print(f"{row['case']:<44} {row['truth']:<34} {found:<50} {row['outcome']}")
    tally: dict[str, int] = {}
    for row in rows:
        tally[row["outcome"]] = tally.get(row["outcome"], 0) + 1
    print(f"{len(rows)} cases: " + ", ".join(f"{count} {name}" for name, count in sorted(tally.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
