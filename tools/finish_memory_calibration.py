#!/usr/bin/env python3
"""Turn the raw logs from tools/record_memory_calibration.py into fixtures/memory-calibration/.

    python3 tools/finish_memory_calibration.py RAW_DIR [RAW_DIR...]   # later folders win for a run name

Each RAW_DIR holds NAME.raw.log, NAME.cmd, NAME.smi and meta-GROUP.txt. Writes NAME.log.gz (gzip with a fixed
timestamp, so re-running gives the same bytes) and runs.tsv: one line per run with its launch command, the
machine, the peak nvidia-smi reading, and whether it is held out of calibration (names starting with "h",
"n", "e" or "t": recorded after the model was frozen; "e" are MoE, "t" two and four GPUs). Rows of runs already
in runs.tsv and not in the folders given are kept. A run that ran out of memory (a run planned to: e11) goes to
out-of-memory/ beside them, with its own runs.tsv (name, machine, command); one that Megatron refused with an
error (e30: MoE with TP and no sequence parallelism) to refused/, the same way.
The only rewrite is the wheel's install folder on the GPU machine ($SITE as megatron_wheel_setup.sh takes it,
default `/tmp/site/`) into
`/usr/local/lib/python3.12/dist-packages/`, as in fixtures/compare-family. Runs that did not finish are skipped.
"""

from __future__ import annotations

import gzip
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEST = ROOT / "fixtures" / "memory-calibration"
REWRITES = [((os.environ.get("SITE") or "/tmp/site").rstrip("/") + "/", "/usr/local/lib/python3.12/dist-packages/")]
HELD_OUT = "hnetb"  # name prefixes recorded after the model was frozen: "e" MoE, "t" the issue-25 multi-GPU set, "b" build OOMs
FINISHED = re.compile(r"\(after 3 iterations\) memory \(MB\)")
# PyTorch's allocator, or NCCL's own allocation once PyTorch's cache has taken the GPU (e76: "Failed to CUDA calloc
# async 4 bytes" in an all_reduce after the first step), or the host's: the kernel's OOM killer ends the rank with
# SIGKILL, torchrun's summary the only trace (n132, offloading an 8.27B GPT's optimizer to a 125 GiB host).
OUT_OF_MEMORY = re.compile(
    r"torch\.OutOfMemoryError: CUDA out of memory|CUDA error: out of memory|Failed to CUDA calloc|Signal 9 \(SIGKILL\)"
)
# An exception line, with torch's rank prefix or without (validate_args raises before it is installed: n125).
REFUSED = re.compile(r"^(?:\[rank\d+\]: )?\w+Error(?::| *$)", re.MULTILINE)


def write_fixture_log(raw_log: Path, dest: Path) -> str:
    """The raw log with the install folder rewritten, gzipped with a fixed timestamp (same bytes on a re-run)."""
    text = raw_log.read_text(errors="replace")
    for old, new in REWRITES:
        text = text.replace(old, new)
    with open(dest, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as out:
        out.write(text.encode())
    return text


def launch_command(folder: Path, run: str) -> str:
    """The run's command, after the environment it was given beyond the machine's (NAME.env), if any."""
    env = folder / f"{run}.env"
    assignments = env.read_text().split() if env.exists() else []
    return " ".join([*assignments, (folder / f"{run}.cmd").read_text().strip()])


def machine(folder: Path) -> str:
    for meta in folder.glob("meta*.txt"):
        for line in meta.read_text().splitlines():
            if line.startswith("gpu="):
                gpus = next((g[5:] for g in meta.read_text().splitlines() if g.startswith("gpus=")), "1")
                return f"{line[4:].split(',')[0]} ({gpus}-GPU machine)"
    return "unknown"


def main(folders: list[str]) -> int:
    runs: dict[str, tuple[Path, str]] = {}
    stopped: dict[str, dict[str, tuple[Path, str]]] = {"out-of-memory": {}, "refused": {}}
    for name in folders:
        folder = Path(name)
        where = (folder, machine(folder))
        for log in sorted(folder.glob("*.raw.log")):
            text, run = log.read_text(errors="replace"), log.name.removesuffix(".raw.log")
            if OUT_OF_MEMORY.search(text):  # b113 logged iteration 3's memory report and ran out of memory after it
                stopped["out-of-memory"][run] = where
            elif FINISHED.search(text):
                runs[run] = where
            elif REFUSED.search(text):
                stopped["refused"][run] = where
    DEST.mkdir(parents=True, exist_ok=True)
    rows = {}
    for run, (folder, where) in sorted(runs.items()):
        write_fixture_log(folder / f"{run}.raw.log", DEST / f"{run}.log.gz")
        command = launch_command(folder, run)
        smi = (folder / f"{run}.smi").read_text().strip()
        rows[run] = f"{run}\t{where}\t{'yes' if run[0] in HELD_OUT else 'no'}\t{smi}\t{command}"
    merge_table(DEST / "runs.tsv", "name\tgpus_machine\theld_out\tnvidia_smi_peak_mib\tcommand", rows)
    print(f"{len(runs)} runs written to {DEST}")
    for kind, stopped_runs in stopped.items():
        if not stopped_runs:
            continue
        dest = DEST / kind
        dest.mkdir(exist_ok=True)
        rows = {}
        for run, (folder, where) in sorted(stopped_runs.items()):
            write_fixture_log(folder / f"{run}.raw.log", dest / f"{run}.log.gz")
            rows[run] = f"{run}\t{where}\t{launch_command(folder, run)}"
        merge_table(dest / "runs.tsv", "name\tgpus_machine\tcommand", rows)
        print(f"{len(stopped_runs)} runs that stopped ({kind}) written to {dest}")
    return 0


def merge_table(table: Path, header: str, rows: dict[str, str]) -> None:
    """Rows of runs recorded earlier (whose raw folders are gone) are kept; a run recorded again is replaced."""
    kept = {row.split("\t", 1)[0]: row for row in table.read_text().splitlines()[1:]} if table.exists() else {}
    kept.update(rows)
    table.write_text("\n".join([header, *(kept[run] for run in sorted(kept))]) + "\n")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
