#!/usr/bin/env python3
"""Generate the scan-speed matrix: one large log per real line mix, a gzip one, and directories of many small
rank logs. Every log starts with the real H100 start-up (fixtures/clean-baseline/job.log: launch line,
arguments block) and ends with the real fragmentation OOM of fixtures/oom-fragmentation-multirank, so
`diagnose` has the same finding to report on each. Files that already exist are kept (generate once, reuse).

usage: python3 benchmarks/make_matrix.py [--out DIR] [--size-mb N] [--kinds k1,k2] [--small-counts 20000,200000]
                                         [--failed-counts 20000,200000] [--last-rank-counts 20000]

DIR defaults to /tmp/offloaddoctor-bench; never inside the repository. The line mixes (see KINDS):
  nccl-info        NCCL_DEBUG=INFO chatter of 8 ranks, an iteration line per 8 ranks (make_log.py: any rank count)
  interval-1       --log-interval 1 on one node: ~half the lines are iteration lines
  py-warnings      interval-1 plus Python warnings with site-packages paths and their source lines (~14 %)
  torchrun-64      64 ranks interleaved, every line with torchrun's `[rankN]:` prefix
  slurm-label      16 tasks under `srun --label` (`N: ` prefixes), timestamps, NCCL and warnings
  tqdm             progress bars redrawn with `\\r` (long lines) between iteration lines
  bridge           Megatron-Bridge: its start-up summary, GB memory reports every step, timers
  gzip             the nccl-info log, gzip -4 (the size is the uncompressed one)
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SEED = (ROOT / "fixtures" / "clean-baseline" / "job.log").read_text().splitlines()
OOM = (ROOT / "fixtures" / "oom-fragmentation-multirank" / "job.log").read_text().splitlines()[-30:]
START = next(i for i, line in enumerate(SEED) if line.startswith("training ..."))
HEAD = SEED[: START + 1]
ITERATION = next(line for line in SEED if "elapsed time per iteration" in line and "iteration       10/" in line)
MEMORY = next(line for line in SEED if line.startswith("[Rank 0] (after 10 iterations) memory"))
BRIDGE_SUMMARY = Path("/work/shared/reference/bridge-0.3.1/startup-summary.log")

NCCL = [
    "node-{node:02d}:{pid}:{pid} [{local}] NCCL INFO Channel {channel:02d}/0 : {rank}[{local}] -> {peer}[{peer_local}] via P2P/CUMEM/read",
    "node-{node:02d}:{pid}:{pid} [{local}] NCCL INFO comm 0x5581c2a0 rank {rank} nRanks {ranks} nNodes {nodes} localRanks 8 localRank {local} MNNVL 0",
    "node-{node:02d}:{pid}:{pid} [{local}] NCCL INFO Connected all rings, use ring PXN 0 GDR 1",
    "node-{node:02d}:{pid}:{pid} [{local}] NCCL INFO AllReduce: opCount {op:x} sendbuff 0x7f3a2c000000 recvbuff 0x7f3a2c000000 count 262144 datatype 7 op 0 root 0 comm 0x5581c2a0 [nranks={ranks}] stream 0x55820b90",
]
# Printed on every step in recompute runs (torch.utils.checkpoint) and by data loaders: path, line, category,
# message, then the source line Python shows.
WARNINGS = [
    (
        "/usr/local/lib/python3.12/dist-packages/torch/utils/checkpoint.py:86: UserWarning: None of the inputs have "
        "requires_grad=True. Gradients will be None",
        "  warnings.warn(",
    ),
    (
        "/usr/local/lib/python3.12/dist-packages/torch/_dynamo/eval_frame.py:632: FutureWarning: "
        "`torch.cuda.amp.autocast(args...)` is deprecated. Please use `torch.amp.autocast('cuda', args...)` instead.",
        "  return fn(*args, **kwargs)",
    ),
    (
        "/usr/local/lib/python3.12/dist-packages/torch/autograd/graph.py:825: UserWarning: c10d::broadcast_: an "
        "autograd kernel was not registered to the Autograd key(s) but we are trying to backprop through it.",
        "  return Variable._execution_engine.run_backward(  # Calls into the C++ engine to run the backward pass",
    ),
]
TQDM_UNIT = "\rvalidation step: {pct:3d}%|{bar:<10}| {done}/{total} [00:{sec:02d}<00:{left:02d},  3.61it/s]"
BRIDGE_MEMORY = (
    "[Rank {rank}] (after {it} iterations) memory (GB) | mem-allocated-gigabytes: 8.6712 | "
    "mem-active-gigabytes: 8.6712 | mem-inactive-gigabytes: 0.52 | mem-reserved-gigabytes: 11.264 | "
    "mem-max-allocated-gigabytes: 14.47 | mem-max-active-gigabytes: 14.47 | mem-max-inactive-gigabytes: "
    "2.1 | mem-max-reserved-gigabytes: 15.088 | mem-alloc-retires: 0 | mem-allocated-count: 1234"
)
BRIDGE_TIMERS = [
    "Step Time : {ms:.2f}s GPU utilization: {tf:.1f}MODEL_TFLOP/s/GPU",
    "    forward-backward ...............................: ({ms:.2f}, {ms:.2f})",
    "    optimizer ......................................: (81.20, 83.04)",
]


def iteration_line(iteration: int, total: int = 1_000_000) -> str:
    ms = 400.0 + (iteration % 13)
    line = re.sub(r"iteration\s+10/\s+10", f"iteration {iteration:>8}/ {total:>7}", ITERATION)
    return re.sub(r"elapsed time per iteration \(ms\): [\d.]+", f"elapsed time per iteration (ms): {ms:.1f}", line)


def nccl(rank: int, ranks: int, step: int, which: int) -> str:
    values = {
        "node": rank // 8,
        "pid": 4000 + rank,
        "local": rank % 8,
        "rank": rank,
        "ranks": ranks,
        "nodes": max(1, ranks // 8),
        "peer": (rank + 1) % ranks,
        "peer_local": (rank + 1) % 8,
        "channel": step % 32,
        "op": step,
    }
    return NCCL[which % len(NCCL)].format(**values)


def chunks_nccl_info(step: int, ranks: int = 8) -> list[str]:
    """Per interval of 10 steps, 4 NCCL lines and a memory line per rank, the iteration line on the last."""
    lines = []
    for rank in range(ranks):
        lines += [f"[rank{rank}]:" + nccl(rank, ranks, step, k) for k in range(4)]
        if rank == ranks - 1:  # Megatron prints the iteration line on the last rank only
            lines.append(f"[rank{rank}]:" + iteration_line(step * 10))
        lines.append(
            f"[rank{rank}]:" + MEMORY.replace("[Rank 0]", f"[Rank {rank}]").replace("after 10", f"after {step * 10}")
        )
    return lines


def chunks_interval_1(step: int) -> list[str]:
    return [iteration_line(step), nccl(step % 8, 8, step, step)]


def chunks_py_warnings(step: int) -> list[str]:
    lines = chunks_interval_1(step)
    if step % 6 == 0:
        lines += list(WARNINGS[step // 6 % len(WARNINGS)])
    return lines


def chunks_torchrun_64(step: int) -> list[str]:
    lines = []
    for rank in range(64):
        lines.append(f"[rank{rank}]:" + nccl(rank, 64, step, rank + step))
        if rank % 16 == 0:
            lines += [f"[rank{rank}]:" + text for text in WARNINGS[step % len(WARNINGS)]]
    lines.append("[rank63]:" + iteration_line(step))
    return lines


def chunks_slurm_label(step: int) -> list[str]:
    stamp = f"[2026-11-22 10:{step // 60 % 60:02d}:{step % 60:02d}.{step % 1000:03d}]"
    lines = [f"{task}: {stamp} " + nccl(task, 16, step, step + task) for task in range(16)]
    lines += [f"{step % 16}: {text}" for text in WARNINGS[step % len(WARNINGS)]]
    lines.append(f"15: {iteration_line(step)}")
    return lines


def chunks_tqdm(step: int) -> list[str]:
    total = 40
    updates = "".join(
        TQDM_UNIT.format(
            pct=100 * done // total,
            bar="#" * (10 * done // total),
            done=done,
            total=total,
            sec=done % 60,
            left=(total - done) % 60,
        )
        for done in range(total + 1)
    )
    return [iteration_line(step), updates, nccl(0, 8, step, step)]


def chunks_bridge(step: int) -> list[str]:
    ms = 0.4 + (step % 13) / 1000
    lines = [iteration_line(step), BRIDGE_MEMORY.format(rank=0, it=step)]
    lines += [template.format(ms=ms, tf=250.0 + step % 7) for template in BRIDGE_TIMERS]
    return lines


KINDS = {
    "nccl-info": (chunks_nccl_info, HEAD),
    "interval-1": (chunks_interval_1, HEAD),
    "py-warnings": (chunks_py_warnings, HEAD),
    "torchrun-64": (chunks_torchrun_64, [f"[rank0]:{line}" for line in HEAD]),
    "slurm-label": (chunks_slurm_label, [f"0: {line}" for line in HEAD]),
    "tqdm": (chunks_tqdm, HEAD),
    "bridge": (chunks_bridge, (BRIDGE_SUMMARY.read_text().splitlines() if BRIDGE_SUMMARY.exists() else []) + HEAD),
}


def write_log(path: Path, kind: str, size_bytes: int, make=None) -> None:
    """`make(step)`: the lines of one step, instead of the kind's own (make_log.py: another rank count)."""
    make, head = make or KINDS[kind][0], KINDS[kind][1]
    partial = path.with_suffix(path.suffix + ".partial")
    with partial.open("w", buffering=1 << 22) as handle:
        handle.write("\n".join(head) + "\n")
        written = 0
        batch: list[str] = []
        for step in itertools.count(1):
            batch += make(step)
            if len(batch) >= 4096:
                text = "\n".join(batch) + "\n"
                handle.write(text)
                written += len(text)
                batch = []
                if written >= size_bytes:
                    break
        handle.write("\n".join(OOM) + "\n")
    partial.rename(path)


def write_gzip(path: Path, source: Path) -> None:
    partial = path.with_suffix(".partial")
    if shutil.which("gzip"):
        with partial.open("wb") as out:
            subprocess.run(["gzip", "-4", "-c", str(source)], stdout=out, check=True)
    else:  # pragma: no cover
        with source.open("rb") as raw, gzip.open(partial, "wb", compresslevel=4) as out:
            shutil.copyfileobj(raw, out, 1 << 22)
    partial.rename(path)


def write_small_files(directory: Path, count: int) -> None:
    partial = directory.with_name(directory.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    failing = count * 3 // 7
    for rank in range(count):
        lines = [f"[rank{rank}]: " + nccl(rank % 8, count, 1, 1), f"[rank{rank}]: " + nccl(rank % 8, count, 1, 2)]
        if rank == failing:
            lines.append(
                f"[rank{rank}]: " + next(line for line in OOM if "CUDA out of memory" in line).split(":", 1)[1].lstrip()
            )
        else:
            lines.append(f"[rank{rank}]: " + iteration_line(1))
        (partial / f"rank{rank:06d}.log").write_text("\n".join(lines) + "\n")
    partial.rename(directory)


def write_failed_rank_files(directory: Path, count: int, iterations_everywhere: bool = True) -> None:
    """The common shape of a failed large job: one rank's OOM traceback, and in every other rank's log the
    NCCL watchdog timeout it ends with (the real lines of fixtures/oom-fragmentation-multirank), after its
    start-up chatter and a few iteration lines: every file is a hit, one finding spans all of them.
    With `iterations_everywhere` off, only the last rank's log has the iteration lines, as Megatron-LM and
    Megatron-Bridge print them (`print_rank_last`: Bridge 0.3.1 training/utils/train_utils.py:735)."""
    partial = directory.with_name(directory.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    failing = count * 3 // 7
    traceback = [line.removeprefix("[rank5]:") for line in OOM if line.startswith("[rank5]:")]
    timeout = next(line for line in OOM if "Watchdog caught" in line).removeprefix("[rank0]:")
    for rank in range(count):
        lines = [" " + nccl(rank % 8, count, 1, which) for which in (1, 2)]
        if iterations_everywhere or rank == count - 1:
            lines += [" " + iteration_line(step) for step in (10, 20, 30)]
        if rank == failing:
            lines += traceback
        else:
            lines.append(timeout.replace("[Rank 0]", f"[Rank {rank}]"))  # torchrun's prefix, no space: `[rank7]:[E…`
        (partial / f"rank{rank:06d}.log").write_text("".join(f"[rank{rank}]:{line}\n" for line in lines))
    partial.rename(directory)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("/tmp/offloaddoctor-bench"))
    parser.add_argument("--size-mb", type=int, default=512)
    parser.add_argument("--kinds", default=",".join([*KINDS, "gzip"]))
    parser.add_argument("--small-counts", default="20000,200000")
    parser.add_argument("--failed-counts", default="20000,200000")
    parser.add_argument("--last-rank-counts", default="20000")  # failed, iteration lines on the last rank only
    args = parser.parse_args()
    out = args.out.resolve()
    if ROOT in out.parents or out == ROOT:
        parser.error("generate outside the repository (logs of 500 MB do not belong in git)")
    out.mkdir(parents=True, exist_ok=True)
    size = args.size_mb * 1024 * 1024
    for kind in [k for k in args.kinds.split(",") if k]:
        if kind == "gzip":
            source = out / "nccl-info.log"
            if not source.exists():
                write_log(source, "nccl-info", size)
            target = out / "nccl-info.log.gz"
            if not target.exists():
                write_gzip(target, source)
            print(f"{target} ({target.stat().st_size / 1e6:.0f} MB compressed)")
            continue
        target = out / f"{kind}.log"
        if not target.exists():
            write_log(target, kind, size)
        print(f"{target} ({target.stat().st_size / 1e6:.0f} MB)")
    for count in [int(c) for c in args.small_counts.split(",") if c]:
        target = out / f"ranks-{count}"
        if not target.exists():
            write_small_files(target, count)
        print(f"{target} ({count} files)")
    for count in [int(c) for c in args.failed_counts.split(",") if c]:
        target = out / f"failed-ranks-{count}"
        if not target.exists():
            write_failed_rank_files(target, count)
        print(f"{target} ({count} files)")
    for count in [int(c) for c in args.last_rank_counts.split(",") if c]:
        target = out / f"failed-last-rank-iterations-{count}"
        if not target.exists():
            write_failed_rank_files(target, count, iterations_everywhere=False)
        print(f"{target} ({count} files)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
