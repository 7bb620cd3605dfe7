#!/usr/bin/env python3
"""Write a large realistic multi-rank Megatron log: the real H100 start-up and iteration lines, repeated
with torchrun rank prefixes and noise, ending in a fragmentation OOM on one rank and NCCL timeouts.

usage: python3 benchmarks/make_log.py OUT.log SIZE_MB [RANKS]
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SEED = ROOT / "fixtures" / "clean-baseline" / "job.log"
OOM = (ROOT / "fixtures" / "oom-fragmentation-multirank" / "job.log").read_text().splitlines()[-30:]


def main() -> int:
    out, size_mb = Path(sys.argv[1]), float(sys.argv[2])
    ranks = int(sys.argv[3]) if len(sys.argv) > 3 else 8
    seed = SEED.read_text().splitlines()
    header, body = seed[:900], seed[900:]
    target = int(size_mb * 1024 * 1024)
    written = 0
    with out.open("w") as handle:
        handle.write("\n".join(header) + "\n")
        iteration = 0
        while written < target:
            iteration += 1
            chunk = "\n".join(f"[rank{iteration % ranks}]: {line}" for line in body) + "\n"
            handle.write(chunk)
            written += len(chunk)
        handle.write("\n".join(OOM) + "\n")
    print(f"wrote {out} ({out.stat().st_size / 1e6:.0f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
