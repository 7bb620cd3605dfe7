#!/usr/bin/env python3
"""Turn the archives of tools/record_offload_sweep.py into fixtures/offload-sweep/.

    python3 tools/finish_offload_sweep.py RAW_DIR [RAW_DIR...]   # later folders win for a run name

Each RAW_DIR holds NAME.raw.log, NAME.cmd, NAME.env, NAME.smi and meta-SET.txt. Every run is kept, also those
that ran out of memory or were rejected (their logs are real failures). Writes NAME.log.gz (gzip with a fixed
timestamp, so re-running gives the same bytes) and runs.tsv: per run its outcome (`ran`, `oom`, `failed`),
Megatron's largest `max allocated` and `max reserved` (MiB), PyTorch's figure at the OOM, the environment it
added, whether it is held out of calibration, the nvidia-smi peak and the launch command.

Held out (never used to set a constant of the model or of the fit verdict): the Llama-shaped runs (`l1-*`),
the micro-batch-2 GPT runs (`g2-*`), every run of the advice set (`a-*`), recorded after the model was
committed, `h1-*`, planned after the model set-up phase was committed, and `r*`, the rotated-Q/K hold-outs. Rows of runs
already in runs.tsv and not in the folders given are kept. The only rewrite is the wheel's install folder, as in tools/finish_memory_calibration.py.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from finish_memory_calibration import write_fixture_log

ROOT = Path(__file__).resolve().parents[1]
DEST = ROOT / "fixtures" / "offload-sweep"
MAX_ALLOCATED = re.compile(r"max allocated: ([\d.]+)")
MAX_RESERVED = re.compile(r"max reserved: ([\d.]+)")
OOM = re.compile(r"Of the allocated memory ([\d.]+ \w+) is allocated by PyTorch")
FINISHED = re.compile(r"\(after 3 iterations\) memory \(MB\)")
HELD_OUT = ("l1-", "g2-", "a-", "h1-", "r")
# Recorded but not kept, and why.
EXCLUDED = {
    **dict.fromkeys(
        ("s-small-f005", "s-small-f020", "s-small-f050", "s-small-f090"),
        "packed on one GPU with the other small runs, which ran each other out of memory: not a measurement",
    ),
    "s-te-reject": "--cpu-offloading is not a flag of megatron-core 0.19's arguments: rejected by argparse",
    "te-reject": "kept as fixtures/cpu-offload-requires-te/job.log",
}


def outcome(text: str) -> str:
    if FINISHED.search(text):
        return "ran"
    return "oom" if OOM.search(text) else "failed"


def main(folders: list[str]) -> int:
    runs: dict[str, Path] = {}
    for name in folders:
        for log in sorted(Path(name).glob("*.raw.log")):
            if log.name.removesuffix(".raw.log") not in EXCLUDED:
                runs[log.name.removesuffix(".raw.log")] = Path(name)
    DEST.mkdir(parents=True, exist_ok=True)
    header = (
        "name\toutcome\tmax_allocated_mib\tmax_reserved_mib\toom_allocated\tenv\theld_out\tnvidia_smi_peak_mib\tcommand"
    )
    table = DEST / "runs.tsv"
    # Rows of runs recorded earlier (whose raw folders are gone) are kept; a run recorded again is replaced.
    kept = {row.split("\t", 1)[0]: row for row in table.read_text().splitlines()[1:]} if table.exists() else {}
    for run, folder in sorted(runs.items()):
        text = write_fixture_log(folder / f"{run}.raw.log", DEST / f"{run}.log.gz")
        allocated = max((float(x) for x in MAX_ALLOCATED.findall(text)), default=0.0)
        reserved = max((float(x) for x in MAX_RESERVED.findall(text)), default=0.0)
        oom = OOM.search(text)
        env = " ".join((folder / f"{run}.env").read_text().split())
        command = (folder / f"{run}.cmd").read_text().strip()
        smi = (folder / f"{run}.smi").read_text().strip()
        kept[run] = (
            f"{run}\t{outcome(text)}\t{allocated:.2f}\t{reserved:.0f}\t{oom.group(1) if oom else ''}\t{env}\t"
            f"{'yes' if run.startswith(HELD_OUT) else 'no'}\t{smi}\t{command}"
        )
    table.write_text("\n".join([header, *(kept[run] for run in sorted(kept))]) + "\n")
    print(f"{len(runs)} runs written to {DEST}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
