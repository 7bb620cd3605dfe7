#!/usr/bin/env python3
"""Print logs/literal_trie.py's COMMON_BYTES: the bytes of real training logs, most common first.

Read from the logs recorded on an H100 that the repo bundles (fixtures/*/SOURCE.md says how each was made):
clean-baseline, clean-opt050, compare-family and memory-calibration. The finder anchors each literal at its
least common byte by this order; the order only makes the search faster or slower, never its result.

python3 tools/gen_byte_ranks.py   # paste the printed line into src/offloaddoctor/logs/literal_trie.py
"""

from __future__ import annotations

import gzip
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECORDED = ("clean-baseline", "clean-opt050", "compare-family", "memory-calibration")


def main() -> None:
    counts: Counter[int] = Counter()
    for name in RECORDED:
        for path in sorted((ROOT / "fixtures" / name).iterdir()):
            if path.name.endswith(".log"):
                counts.update(path.read_bytes())
            elif path.name.endswith(".log.gz"):
                counts.update(gzip.decompress(path.read_bytes()))
    ordered = bytes(byte for byte, _ in sorted(counts.items(), key=lambda item: (-item[1], item[0])) if byte != 0x0A)
    print(f"COMMON_BYTES = {ordered!r}")


if __name__ == "__main__":
    main()
