#!/usr/bin/env python3
"""Record real PyTorch OOM messages on a "small GPU": the H100 capped with
torch.cuda.set_per_process_memory_fraction, memory fragmented on purpose, with and without expandable segments.

    device: python3 tools/record_small_gpu_oom.py $OUT [CASE,...]  (writes CASE.log, one per case, and summary.txt)

Each case runs in its own process (PYTORCH_CUDA_ALLOC_CONF must be set before torch starts). It fills the cap
with 1 GiB segments and frees them (the caching allocator keeps them), carves blocks of BLOCK MiB out of
those segments, frees HOLES of them that are not neighbours (so the free memory is in pieces no bigger than
one block, inside segments that still hold live blocks and so cannot be released), then asks for REQUEST
MiB: more than one hole, less than all the holes together.
The printed traceback is PyTorch's own; nothing is edited.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

EXPANDABLE = "expandable_segments:True"
# torch 2.0 and older have no expandable segments (2.1 added them; 2.0.1 refuses the option); their own setting
# against fragmentation, which their OOM message names, is max_split_size_mb (recorded 2026-11-27, after the rest).
MAX_SPLIT = "max_split_size_mb:512"
# name: (cap GiB, block MiB, holes, request MiB, PYTORCH_CUDA_ALLOC_CONF or None)
CASES = {
    # the cap is filled in 1 GiB segments: up to 1 GiB of it can stay unreserved, so requests exceed 1 GiB
    "frag-16g-close": (16, 256, 6, 1229, None),
    "frag-16g-close-expandable": (16, 256, 6, 1229, EXPANDABLE),
    "frag-16g-wide": (16, 64, 40, 1024, None),
    "frag-16g-wide-expandable": (16, 64, 40, 1024, EXPANDABLE),
    "capacity-16g": (16, 256, 0, 1024, None),
    "frag-16g-close-max-split": (16, 256, 6, 1229, MAX_SPLIT),
    "frag-16g-wide-max-split": (16, 64, 40, 1024, MAX_SPLIT),
    # 512 only delayed a real Megatron run's fragmentation OOM (fixtures/memory-calibration b113) where 128 let it
    # train (b114): the same two cases with 128, planned before they ran
    "frag-16g-close-max-split-128": (16, 256, 6, 1229, "max_split_size_mb:128"),
    "frag-16g-wide-max-split-128": (16, 64, 40, 1024, "max_split_size_mb:128"),
}

CHILD = r"""
import sys, torch
cap_gib, block_mib, holes, request_mib = (float(x) for x in sys.argv[1:5])
total = torch.cuda.get_device_properties(0).total_memory
torch.cuda.set_per_process_memory_fraction(cap_gib * 2**30 / total)
print(f"cap {cap_gib:g} GiB of {total / 2**30:.2f} GiB; blocks {block_mib:g} MiB; holes {holes:g}; "
      f"request {request_mib:g} MiB", flush=True)
segments = []
try:
    while True:
        segments.append(torch.empty(2**30, dtype=torch.uint8, device="cuda"))
except torch.OutOfMemoryError:
    pass
count = len(segments) * int(1024 // block_mib)
del segments  # cached, not released: the blocks below are carved out of these segments
blocks = [torch.empty(int(block_mib * 2**20), dtype=torch.uint8, device="cuda") for _ in range(count)]
for index in range(1, 2 * int(holes), 2):  # every other block: no two holes are neighbours
    blocks[index] = None
print(f"allocated {torch.cuda.memory_allocated() / 2**20:.0f} MiB, reserved {torch.cuda.memory_reserved() / 2**20:.0f} MiB", flush=True)
x = torch.empty(int(request_mib * 2**20), dtype=torch.uint8, device="cuda")
print("request served", flush=True)
"""


def main() -> int:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    summary = []
    only = set(sys.argv[2].split(",")) if len(sys.argv) > 2 else set(CASES)
    for name, (cap, block, holes, request, allocator) in CASES.items():
        if name not in only:
            continue
        env = dict(os.environ)
        env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
        if allocator:
            env["PYTORCH_CUDA_ALLOC_CONF"] = allocator
        done = subprocess.run(
            [sys.executable, "-c", CHILD, str(cap), str(block), str(holes), str(request)],
            capture_output=True,
            text=True,
            env=env,
        )
        setting = f"PYTORCH_CUDA_ALLOC_CONF={allocator}" if allocator else "(allocator defaults)"
        (out / f"{name}.log").write_text(f"# {setting}\n{done.stdout}{done.stderr}")
        outcome = "served" if done.returncode == 0 else "OOM"
        summary.append(f"{name}: {outcome} (rc {done.returncode})")
        print(summary[-1], flush=True)
    (out / "summary.txt").write_text("\n".join(summary) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
