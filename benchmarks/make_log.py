#!/usr/bin/env python3
"""Write a large realistic multi-rank Megatron-LM log: the real H100 start-up once, then per log interval
and rank the real iteration and memory-report lines (iteration numbers advanced) with NCCL_DEBUG=INFO
style chatter, and at the end a fragmentation OOM on one rank followed by NCCL timeouts on the others.

usage: python3 benchmarks/make_log.py OUT.log SIZE_MB [RANKS]
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SEED = (ROOT / "fixtures" / "clean-baseline" / "job.log").read_text().splitlines()
OOM = (ROOT / "fixtures" / "oom-fragmentation-multirank" / "job.log").read_text().splitlines()[-30:]
START = next(i for i, line in enumerate(SEED) if line.startswith("training ..."))
ITERATION = next(line for line in SEED if "elapsed time per iteration" in line and "iteration       10/" in line)
MEMORY = next(line for line in SEED if line.startswith("[Rank 0] (after 10 iterations) memory"))
NCCL = [
    "node-{node:02d}:{pid}:{pid} [{local}] NCCL INFO Channel {channel:02d}/0 : {rank}[{local}] -> {peer}[{peer_local}] via P2P/CUMEM/read",
    "node-{node:02d}:{pid}:{pid} [{local}] NCCL INFO comm 0x5581c2a0 rank {rank} nRanks {ranks} nNodes {nodes} localRanks 8 localRank {local} MNNVL 0",
    "node-{node:02d}:{pid}:{pid} [{local}] NCCL INFO Connected all rings, use ring PXN 0 GDR 1",
    "WARNING:megatron.core.rerun_state_machine:Result validation enabled",
]


def main() -> int:
    out, size_mb = Path(sys.argv[1]), float(sys.argv[2])
    ranks = int(sys.argv[3]) if len(sys.argv) > 3 else 8
    target = int(size_mb * 1024 * 1024)
    with out.open("w") as handle:
        handle.write("\n".join(SEED[: START + 1]) + "\n")
        written, iteration = 0, 0
        while written < target:
            iteration += 10
            lines = []
            for rank in range(ranks):
                values = {
                    "node": rank // 8,
                    "pid": 4000 + rank,
                    "local": rank % 8,
                    "rank": rank,
                    "ranks": ranks,
                    "nodes": max(1, ranks // 8),
                    "peer": (rank + 1) % ranks,
                    "peer_local": (rank + 1) % 8,
                    "channel": iteration % 32,
                }
                lines += [f"[rank{rank}]:" + template.format(**values) for template in NCCL]
                if rank == ranks - 1:  # Megatron prints the iteration line on the last rank only
                    lines.append(
                        f"[rank{rank}]:"
                        + re.sub(r"iteration\s+10/\s+10", f"iteration {iteration:>8}/ 1000000", ITERATION)
                    )
                lines.append(
                    f"[rank{rank}]:"
                    + MEMORY.replace("[Rank 0]", f"[Rank {rank}]").replace("after 10", f"after {iteration}")
                )
            chunk = "\n".join(lines) + "\n"
            handle.write(chunk)
            written += len(chunk)
        handle.write("\n".join(OOM) + "\n")
    print(f"wrote {out} ({out.stat().st_size / 1e6:.0f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
