#!/usr/bin/env python3
"""Where is a real run's peak? Run Megatron-LM's training code with the CUDA allocator's trace on, and at exit
print the moment of the peak: the live allocations grouped by their Python frames, and the events before it.

    device: source tools/megatron_wheel_setup.sh && PROBE_OUT=$OUT/NAME.peak.txt \
        python3 -m torch.distributed.run --nproc-per-node 1 tools/record_peak_trace.py <Megatron-LM flags>

Wraps tools/compare_family_pretrain_gpt.py unchanged (the trace does not change what is allocated: the
6.66B GPT of benchmarks/advice_runs.json `a-gpt7b-f100-mbs2-3` peaked at 50,802.06 MiB with and without it).
It found the model set-up peak of memory/model.py `_set_up_bytes` (fixtures/offload-sweep/g1-full-f100).
"""

import atexit
import collections
import os
import runpy
import sys

import torch

torch.cuda.memory._record_memory_history(max_entries=2_000_000)


def _where(event) -> str:
    frames = [f for f in event.get("frames", []) if f["filename"].endswith(".py")]
    return " < ".join(f"{os.path.basename(f['filename'])}:{f['line']}:{f['name']}" for f in frames[:4])


def report() -> None:
    trace = torch.cuda.memory._snapshot()["device_traces"][torch.cuda.current_device()]
    live, total, peak, at_peak, peak_index = {}, 0, 0, {}, 0
    for index, event in enumerate(trace):
        if event["action"] == "alloc":
            live[event["addr"]] = event
            total += event["size"]
        elif event["action"] == "free_completed" and event["addr"] in live:
            total -= live.pop(event["addr"])["size"]
        if total > peak:
            peak, peak_index, at_peak = total, index, dict(live)
    groups = collections.Counter()
    for event in at_peak.values():
        groups[_where(event)] += event["size"]
    lines = [
        f"events={len(trace)} peak_index={peak_index} traced_peak_mib={peak / 2**20:.0f} "
        f"max_allocated_mib={torch.cuda.max_memory_allocated() / 2**20:.0f}"
    ]
    lines += [f"{size / 2**20:10.0f} MiB  {where}" for where, size in groups.most_common(25)]
    lines += [
        f"  {e['action']:14s} {e['size'] / 2**20:9.1f} MiB {_where(e)}"
        for e in trace[max(0, peak_index - 12) : peak_index + 1]
    ]
    with open(os.environ["PROBE_OUT"], "w") as handle:
        handle.write("\n".join(lines) + "\n")


atexit.register(report)
sys.argv = ["tools/compare_family_pretrain_gpt.py", *sys.argv[1:]]
runpy.run_path("tools/compare_family_pretrain_gpt.py", run_name="__main__")
