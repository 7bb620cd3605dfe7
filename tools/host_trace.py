"""Sample this process's host memory every quarter second while Megatron-LM runs (tools/probe_host_memory.py).

ODR_HOST_TRACE=PATH makes tools/compare_family_pretrain_gpt.py start it: each rank appends to PATH.RANK one line a
sample, flushed as written (the kernel's SIGKILL leaves no other record): the time, /proc/self/status's resident
figures (kB), /proc/meminfo's MemAvailable (kB, the whole host) and torch.cuda.host_memory_stats()'s current
figures (bytes; PyTorch's pinned-memory allocator, which rounds each block up to a power of two).
"""

from __future__ import annotations

import os
import threading
import time

STATUS_FIELDS = ("VmRSS", "VmHWM", "RssAnon", "RssFile", "RssShmem", "VmPin", "VmLck")


def _status() -> dict[str, int]:
    found = {}
    with open("/proc/self/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in STATUS_FIELDS:
                found[key] = int(value.split()[0])
    return found


def _available_kb() -> int:
    with open("/proc/meminfo") as meminfo:
        for line in meminfo:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1])
    return -1


def _pinned() -> dict[str, int]:
    import torch

    try:
        stats = torch.cuda.host_memory_stats()
    except Exception:  # an older PyTorch: no figures
        return {}
    return {key: value for key, value in stats.items() if key.endswith(".current") and "bytes" in key}


def _sample(path: str) -> None:
    with open(path, "a", buffering=1) as out:
        while True:
            fields = {**_status(), "MemAvailable": _available_kb(), **_pinned()}
            out.write(f"{time.time():.2f}\t" + "\t".join(f"{k}={v}" for k, v in fields.items()) + "\n")
            time.sleep(0.25)


def start(path: str) -> threading.Thread:
    thread = threading.Thread(target=_sample, args=(f"{path}.{os.environ.get('RANK', '0')}",), daemon=True)
    thread.start()
    return thread
