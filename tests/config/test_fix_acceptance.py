"""The fixes `check` prints for the catalogue's confirmed refusals, applied to the real megatron-core 0.16.1 config
classes (fixtures/fix-acceptance/megatron-core-0.16.1.txt, recorded by tools/check_config_fixes.py on CPU): each
refusal those classes make is gone with its fix, and the fixes recorded are the ones `check` prints today."""

from __future__ import annotations

import pytest

from offloaddoctor.api import check
from offloaddoctor.config.keys import canonical_key

from tests.conftest import FIXTURES, builtin_catalog

RECORD = FIXTURES / "fix-acceptance" / "megatron-core-0.16.1.txt"


def _rows() -> list[dict[str, str]]:
    rows = []
    for line in RECORD.read_text().splitlines():
        if line.startswith("#"):
            continue
        signature_id, example, *fields = line.split(" | ")
        rows.append({"signature": signature_id, "example": example} | dict(f.split(": ", 1) for f in fields))
    return rows


def _printed(value) -> str:
    if isinstance(value, list):
        return "[" + ",".join(map(str, value)) + "]"
    return "null" if value is None else str(value)


def test_every_refusal_the_config_classes_make_is_gone_with_the_printed_fix():
    refused = [row for row in _rows() if row["before"].startswith("refused")]
    assert len(refused) >= 15
    assert [row for row in refused if row["after"] != "accepted"] == [
        row
        for row in refused
        if row["signature"] == "pp-cpu-offload"  # its optimizer alternative needs TE
    ]
    assert all(row["after"].startswith("needs Transformer Engine") for row in refused if row["after"] != "accepted")


@pytest.mark.parametrize("row", _rows(), ids=lambda row: f"{row['signature']}:{row['example']}")
def test_the_recorded_fix_is_the_one_check_prints_today(row):
    [signature] = [s for s in builtin_catalog().signatures if s.id == row["signature"]]
    [example] = [e for e in signature.examples if e.name == row["example"]]
    context = [] if row["context"] == "-" else row["context"].split("; ")
    settings = [f"{canonical_key(key)}={_printed(value)}" for key, value in example.config.items()]
    [violation] = [v for v in check([], [*context, *settings]).violations if v.id == row["signature"]]
    assert "; ".join(violation.overrides) == row["fix"]
