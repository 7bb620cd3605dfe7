#!/usr/bin/env python3
"""Write a large realistic multi-rank Megatron-LM log: the real H100 start-up once, then per log interval
and rank the real iteration and memory-report lines (iteration numbers advanced) with NCCL_DEBUG=INFO
style chatter, and at the end a fragmentation OOM on one rank followed by NCCL timeouts on the others.
The `nccl-info` log of benchmarks/make_matrix.py, at any size and rank count.

usage: python3 benchmarks/make_log.py OUT.log SIZE_MB [RANKS]
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_matrix import chunks_nccl_info, write_log


def main() -> int:
    out, size_mb = Path(sys.argv[1]), float(sys.argv[2])
    ranks = int(sys.argv[3]) if len(sys.argv) > 3 else 8
    write_log(out, "nccl-info", int(size_mb * 1024 * 1024), functools.partial(chunks_nccl_info, ranks=ranks))
    print(f"wrote {out} ({out.stat().st_size / 1e6:.0f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
