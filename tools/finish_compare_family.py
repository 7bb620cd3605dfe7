#!/usr/bin/env python3
"""Turn the raw logs from tools/record_compare_family.sh into fixtures/compare-family/*.log.

    python3 tools/finish_compare_family.py RAW_DIR            # write the fixtures, print a summary
    python3 tools/finish_compare_family.py RAW_DIR --check    # exit 1 if a fixture would change

The only rewrite is the install folder of the megatron-core wheel on the GPU machine (--site, or $SITE as
record_compare_family.sh takes it; default `/tmp/site/`) into `/usr/local/lib/python3.12/dist-packages/`,
as in the shared logs.
Nothing else is changed. The summary (median iteration time, peak max-allocated memory, loss
agreement with the baseline) is computed from the written fixtures, for SOURCE.md.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEST = ROOT / "fixtures" / "compare-family"
RUNS = {"baseline": None, "opt025": 0.25, "opt050": 0.5, "opt100": 1.0}
SITE = os.environ.get("SITE") or "/tmp/site"  # where record_compare_family.sh installed the wheel
SHOWN_SITE = "/usr/local/lib/python3.12/dist-packages/"
ITER = re.compile(
    r"iteration +(\d+)/ *\d+ \|.*elapsed time per iteration \(ms\): ([\d.]+) \|"
    r".*throughput per GPU \(TFLOP/s/GPU\): ([\d.]+) \|.*lm loss: ([\dE+.-]+) \|"
    r".*grad norm: ([\d.]+) \|"
)
MEMORY = re.compile(
    r"\(after (\d+) iterations\) memory \(MB\) \| allocated: ([\d.]+) \| "
    r"max allocated: ([\d.]+) \| reserved: ([\d.]+) \| max reserved: ([\d.]+)"
)
WARMUP = 2  # iterations 1-2 carry allocator and CPU-optimizer warm-up


def rewrite(text: str, site: str = SITE) -> str:
    return text.replace(site.rstrip("/") + "/", SHOWN_SITE)


def series(text: str):
    iters = [(int(m[1]), float(m[2]), float(m[3]), float(m[4]), float(m[5])) for m in ITER.finditer(text)]
    mems = [tuple(float(x) for x in m.groups()) for m in MEMORY.finditer(text)]
    return iters, mems


def summary(texts: dict[str, str]) -> str:
    base_iters, _ = series(texts["baseline"])
    base_loss = {i: loss for i, _, _, loss, _ in base_iters}
    rows = [
        "| run | offload fraction | iterations | median ms/iter (iters 3-30) | median TFLOP/s/GPU "
        "(iters 3-30) | iter 1 ms | peak max allocated MB | peak max reserved MB | "
        "final lm loss | max abs loss diff vs baseline | max rel loss diff |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, fraction in RUNS.items():
        iters, mems = series(texts[name])
        steady = [it for it in iters if it[0] > WARMUP]
        diffs = [abs(loss - base_loss[i]) for i, _, _, loss, _ in iters]
        rels = [abs(loss - base_loss[i]) / base_loss[i] for i, _, _, loss, _ in iters]
        rows.append(
            f"| {name} | {'-' if fraction is None else fraction} | {len(iters)} | "
            f"{statistics.median(it[1] for it in steady):.1f} | "
            f"{statistics.median(it[2] for it in steady):.1f} | {iters[0][1]:.1f} | "
            f"{max(m[2] for m in mems):.2f} | {max(m[4] for m in mems):.2f} | "
            f"{iters[-1][3]:.6E} | {max(diffs):.3E} | {max(rels):.2%} |"
        )
    return "\n".join(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("raw_dir", type=Path)
    parser.add_argument("--check", action="store_true")
    parser.add_argument(
        "--site", default=SITE, help="the wheel's install folder on the GPU machine (default: $SITE, else /tmp/site)"
    )
    args = parser.parse_args()
    texts, changed = {}, []
    for name in RUNS:
        text = rewrite((args.raw_dir / f"{name}.raw.log").read_text(), args.site)
        if args.site.rstrip("/") + "/" in text:
            sys.exit(f"{name}: unrewritten {args.site} path")
        texts[name] = text
        target = DEST / f"{name}.log"
        if not target.exists() or target.read_text() != text:
            changed.append(target)
            if not args.check:
                DEST.mkdir(parents=True, exist_ok=True)
                target.write_text(text)
    if args.check:
        for path in changed:
            print(f"would change: {path.relative_to(ROOT)}")
        return 1 if changed else 0
    print(summary(texts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
