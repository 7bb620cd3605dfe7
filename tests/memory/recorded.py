"""The recorded runs of fixtures/memory-calibration as the tests read them."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

CALIBRATION = Path(__file__).resolve().parents[2] / "fixtures" / "memory-calibration"
# Each run's launch command, less the rendezvous port (each run has its own): those that trained, ran out of memory or
# were refused.
LAUNCHES = {
    row.split("\t")[0]: re.sub(r"--master-port \d+ ", "", row.split("\t")[-1])
    for table in (
        CALIBRATION / "runs.tsv",
        CALIBRATION / "out-of-memory" / "runs.tsv",
        CALIBRATION / "refused" / "runs.tsv",
    )
    for row in table.read_text().splitlines()[1:]
}


def trained(run: str, iterations: int = 3) -> bool:
    """The run's log reports memory after its last iteration."""
    with gzip.open(CALIBRATION / f"{run}.log.gz", "rt") as log:
        return f"(after {iterations} iterations) memory (MB)" in log.read()
