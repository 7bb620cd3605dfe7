#!/usr/bin/env python3
"""How much host memory does optimizer offloading take? Real Megatron-LM runs, each alone, traced from inside.

Each probe is one run of tools/record_memory_calibration.py's kind (megatron-core 0.19.0 wheel, its entry script,
three iterations) with ODR_HOST_TRACE set: every rank samples its own resident memory, the host's MemAvailable and
PyTorch's pinned-memory allocator every quarter second (tools/host_trace.py), so a run the kernel kills still
leaves its figures. On the GPU machine, from the repository root:

    source tools/megatron_wheel_setup.sh && DEADLINE_S=500 python3 tools/probe_host_memory.py $OUT NAME...

writes $OUT/host.tar.gz: NAME.raw.log (the run's output), NAME.cmd, NAME.env, NAME.host.RANK (the samples),
meta.txt (the machine, the host's memory before the first run, the cgroup's limit). Here, after extracting it:

    python3 tools/probe_host_memory.py --finish FOLDER/host

writes each probe's log (the install folder rewritten, as tools/finish_memory_calibration.py does) and samples,
gzipped, into fixtures/memory-calibration/host-memory.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

from finish_memory_calibration import write_fixture_log
from record_memory_calibration import GC, OFFLOAD, PRECISION_AWARE_OFF, RUNS, dense_cost, launch, machine_meta

# n16's 0.87B GPT and n134's 3.35B GPT (g1), offloading as named. "pa-off": without the precision-aware optimizer
# (as n77: megatron-core's and Bridge's default).
GPT1B = f"{dense_cost()} {OFFLOAD}".replace("--train-iters 14", "--train-iters 3")
G1 = RUNS["n134-gpt3b-f100-mbs3-precision-aware-advised"][2]
A7B = json.loads((Path(__file__).resolve().parents[1] / "benchmarks" / "advice_runs.json").read_text())[
    "a-gpt7b-f100-mbs2-3"
]["args"]
EVAL_EVERY_2 = "--train-iters 6 --eval-interval 2 --eval-iters 1 --split 98,2,0"
EVAL_CYCLIC = f"{EVAL_EVERY_2} --dataloader-type cyclic --train-iters 4"  # the step after the first evaluation is 3
TP2_HALF = G1.replace(f"{OFFLOAD} 1.0 {GC}", f"{OFFLOAD} 0.5") + " --tensor-model-parallel-size 2"
PROBES: dict[str, tuple[int, str, dict[str, str]]] = {
    "p01-gpt1b-f100": (1, f"{GPT1B} 1.0", {}),
    "p02-gpt1b-f100-gc": (1, f"{GPT1B} 1.0 {GC}", {}),
    "p03-gpt1b-f050-gc": (1, f"{GPT1B} 0.5 {GC}", {}),
    "p04-gpt1b-f100-gc-pa-off": (1, f"{GPT1B} 1.0 {GC}", PRECISION_AWARE_OFF),
    "p05-gpt3b-f100-mbs3-gc": (1, G1, {}),
    # Data parallel 2: Megatron's first HybridDeviceOptimizer is built over the model's own parameters, unsharded.
    "p06-gpt3b-dp2-f100-mbs3-gc": (2, G1, {}),
    "p07-gpt1b-dp2-f050-gc": (2, f"{GPT1B} 0.5 {GC}", {}),
    # Held out (benchmarks/host_plan.json, planned before it ran): n136's 5.1B Llama offloading 0.75, which trained.
    "p08-llama5b-f075": (1, RUNS["n136-llama5b-f075-host-advised"][2], {}),
    # Held out, data parallel 2 (planned with the unsharded first build and the several-GPU process figure fitted
    # on p06/p07): l1's 5.1B Llama offloading half, and the 0.87B GPT without the precision-aware optimizer.
    "p09-llama5b-dp2-f050": (
        2,
        RUNS["n136-llama5b-f075-host-advised"][2].replace(f"{OFFLOAD} 0.75", f"{OFFLOAD} 0.5"),
        {},
    ),
    "p10-gpt1b-dp2-f100-gc-pa-off": (2, f"{GPT1B} 1.0 {GC}", PRECISION_AWARE_OFF),
    # The host-aware advice, run as printed: `estimate` of n135's log (l1's 5.1B Llama offloading all of it, killed by
    # its 125 GiB host) with --host-memory 124GiB: TIGHT on the host; the change that fits the GPU and the host,
    # optimizer offloading at 0.45 with --manual-gc (planned in benchmarks/host_plan.json: expected to train).
    "p11-llama5b-f045-gc-host-advised": (
        1,
        RUNS["n135-llama5b-f100-host"][2].replace(f"{OFFLOAD} 1.0", f"{OFFLOAD} 0.45 {GC}"),
        {},
    ),
    # Held out, other layouts (planned in benchmarks/host_plan.json before they ran): pipeline parallel 2 (each stage
    # its own share), tensor parallel 2 without --manual-gc, no distributed optimizer (one build: Float16Optimizer
    # wraps it; n76's launch), and a MoE whose parameters are mostly its 40 experts' (e58's launch).
    "p12-gpt3b-pp2-f100-gc": (2, f"{G1} --pipeline-model-parallel-size 2", {}),
    "p13-gpt3b-tp2-f050": (2, TP2_HALF, {}),
    "p14-gpt1b-f050-no-distopt-pa-off": (1, RUNS["n76-gpt1b-f050-precision-aware-off"][2], PRECISION_AWARE_OFF),
    "p15-moe40-dp2-f050-gc": (2, RUNS["e58-moe40-offload050-h200"][2].replace("--train-iters 12", ""), {}),
    # Is three iterations long enough for the host to settle? p13 and p02 again, ten iterations each.
    "p16-gpt3b-tp2-f050-10it": (2, f"{TP2_HALF} --train-iters 10", {}),
    "p17-gpt1b-f100-gc-10it": (1, f"{GPT1B} 1.0 {GC} --train-iters 10", {}),
    # Tensor parallel 2 was 14 % over (p13, p16): with --manual-gc, and offloading all of it.
    "p18-gpt3b-tp2-f050-gc": (2, f"{TP2_HALF} {GC}", {}),
    # The host-aware advice again, run as printed: `estimate --gpu H100-80GB --host-memory 124GiB` of a7b's log (the
    # 6.66B GPT offloading all of it, killed three times on its 125 GiB host, and at 0.8) prints offloading 0.65 with
    # --manual-gc first (planned in benchmarks/host_plan.json: 68,414 MiB, host 102 GiB; expected to train).
    "p20-gpt7b-f065-gc-host-advised": (1, A7B.replace(f"{OFFLOAD} 1.0", f"{OFFLOAD} 0.65 {GC}"), {}),
    "p19-gpt3b-tp2-f100-gc": (2, f"{TP2_HALF.replace(f'{OFFLOAD} 0.5', f'{OFFLOAD} 1.0')} {GC}", {}),
    # Tensor parallel 2 was 14-24 % under the model (p13, p16, p18, p19): does the model stay on the safe side at tensor
    # parallel 4, and with data parallel beside it (planned in benchmarks/host_plan.json before they ran)?
    "p21-gpt3b-tp4-f100-gc": (4, f"{G1} --tensor-model-parallel-size 4", {}),
    "p22-gpt3b-tp2-dp2-f100-gc": (4, f"{G1} --tensor-model-parallel-size 2", {}),
    # Why tensor parallel keeps less: Megatron builds data loaders on tensor-parallel rank 0 only (of the first and
    # last stages), and each forks --num-workers (default 2) workers that keep the parent's pages as they were; the
    # parent's later frees (the first build's fp32 copies, at the collection before training) and writes (the fp32
    # parameters its CPU Adam updates) then cost the host once more. Without workers (planned before they ran): p05,
    # and a7b (killed at 1.0 with and without workers, each time without --manual-gc).
    "p23-gpt3b-f100-mbs3-gc-w0": (1, f"{G1} --num-workers 0", {}),
    "p24-gpt7b-f100-gc-w0": (1, f"{A7B} {GC} --num-workers 0", {}),
    # What no workers costs a step: p05 and p23 again, ten iterations each, one after the other on one H100.
    "p25-gpt3b-f100-mbs3-gc-10it": (1, f"{G1} --train-iters 10", {}),
    "p26-gpt3b-f100-mbs3-gc-w0-10it": (1, f"{G1} --num-workers 0 --train-iters 10", {}),
    # The change without workers on another model, run as `estimate --host-memory 124GiB` prints it for n135's log (l1's
    # 5.1B Llama offloading all of it, killed by its host), and without the precision-aware optimizer (p04 without
    # workers: its offloaded fp32 parameters are pinned, so only the first build's copy is the workers').
    "p27-llama5b-f100-gc-w0-host-advised": (
        1,
        f"{RUNS['n135-llama5b-f100-host'][2]} {GC} --num-workers 0",
        {},
    ),
    "p28-gpt1b-f100-gc-pa-off-w0": (1, f"{GPT1B} 1.0 {GC} --num-workers 0", PRECISION_AWARE_OFF),
    # Without workers and without --manual-gc (a7b-w0 was killed so): does the first build's copy stay in the rank, as
    # the figure counts it? And tensor parallel 2 without workers: neither rank keeps the workers' share.
    "p29-gpt3b-f100-mbs3-w0": (1, G1.replace(f" {GC}", "") + " --num-workers 0", {}),
    "p30-gpt3b-tp2-f100-gc-w0": (2, f"{TP2_HALF.replace(f'{OFFLOAD} 0.5', f'{OFFLOAD} 1.0')} {GC} --num-workers 0", {}),
    # Data parallel 2 without workers: the first build's copy beyond each rank's shard goes with the rest (p06 without).
    "p31-gpt3b-dp2-f100-mbs3-gc-w0": (2, f"{G1} --num-workers 0", {}),
    # More workers than the two measured (Bridge's default is 8): each forked worker keeps pages of its own, while the
    # pages the parent frees or writes after the fork are copied once whatever the count (planned before they ran).
    "p32-gpt3b-f100-mbs3-gc-w8": (1, f"{G1} --num-workers 8", {}),
    "p33-gpt3b-f100-mbs3-gc-w4": (1, f"{G1} --num-workers 4", {}),
    # Evaluation during training. Megatron-LM's default loader forks the validation loader's workers at start-up, with
    # the training loader's (p34); a cyclic one forks them at the first evaluation, after the optimizer's moments exist,
    # so Adam's later writes of its fp32 parameters and both moments cost the host once more. Bridge's pretraining
    # always iterates validation so (data/loaders.py: "cyclic" for a GPTDatasetConfig); --dataloader-type cyclic here
    # (p35), and the cyclic training loader alone, forked at the first step after the collection (p36).
    "p34-gpt1b-f100-gc-eval2": (1, f"{GPT1B} 1.0 {GC} {EVAL_EVERY_2}", {}),
    "p35-gpt1b-f100-gc-eval2-cyclic": (1, f"{GPT1B} 1.0 {GC} {EVAL_EVERY_2} --dataloader-type cyclic", {}),
    "p36-gpt1b-f100-gc-cyclic": (1, f"{GPT1B} 1.0 {GC} --train-iters 6 --dataloader-type cyclic", {}),
    # The verdict and the advice with a cyclic validation loader, run as `estimate --gpu H100-80GB --host-memory 124GiB`
    # of the launch prints them (planned before they ran): p20's launch (the 6.66B GPT offloading 0.65, which trained at
    # 103.2 GiB) evaluating every 2 iterations: DOES NOT FIT the host, 136 GiB (the model before p35 said 102); the
    # change printed, no data-loader workers: 69 GiB. And p05's launch so: fits, 105 GiB (the model before p35: 79.5).
    "p37-gpt7b-f065-gc-eval2-cyclic": (1, f"{A7B.replace(f'{OFFLOAD} 1.0', f'{OFFLOAD} 0.65 {GC}')} {EVAL_CYCLIC}", {}),
    "p38-gpt7b-f065-gc-eval2-cyclic-w0-host-advised": (
        1,
        f"{A7B.replace(f'{OFFLOAD} 1.0', f'{OFFLOAD} 0.65 {GC}')} {EVAL_CYCLIC} --num-workers 0",
        {},
    ),
    "p39-gpt3b-f100-mbs3-gc-eval2-cyclic": (1, f"{G1} {EVAL_CYCLIC}", {}),
    # Megatron-LM's --full-validation iterates validation cyclically whatever --dataloader-type says (training.py).
    "p40-gpt1b-f100-gc-eval2-full-validation": (1, f"{GPT1B} 1.0 {GC} {EVAL_EVERY_2} --full-validation", {}),
    # p35 with Bridge's 8 workers a loader: do late-forked workers' own pages cost what p23's start-up ones did?
    "p41-gpt1b-f100-gc-eval2-cyclic-w8": (
        1,
        f"{GPT1B} 1.0 {GC} {EVAL_EVERY_2} --dataloader-type cyclic --num-workers 8",
        {},
    ),
    # Why p41's late-forked workers kept less: forked after Megatron's gc.disable() (--manual-gc), they never collect?
    # p41 without --manual-gc (workers forked late, collecting), and the 3.35B GPT as p41 (planned before they ran).
    "p42-gpt1b-f100-eval2-cyclic-w8": (1, f"{GPT1B} 1.0 {EVAL_EVERY_2} --dataloader-type cyclic --num-workers 8", {}),
    "p43-gpt3b-f100-mbs3-gc-eval2-cyclic-w8": (1, f"{G1} {EVAL_CYCLIC} --num-workers 8", {}),
    # Tensor parallel 2 evaluating so: only tensor-parallel rank 0 builds the loaders, so only it keeps the validation
    # workers' copies (planned before it ran).
    "p44-gpt3b-tp2-f100-gc-eval2-cyclic": (
        2,
        f"{TP2_HALF.replace(f'{OFFLOAD} 0.5', f'{OFFLOAD} 1.0')} {GC} {EVAL_CYCLIC}",
        {},
    ),
}


FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "memory-calibration" / "host-memory"


def finish(folder: Path) -> None:
    for raw in sorted(folder.glob("*.raw.log")):
        name = raw.name.removesuffix(".raw.log")
        write_fixture_log(raw, FIXTURES / f"{name}.log.gz")
        for trace in sorted(folder.glob(f"{name}.host.*")):  # the same fixed-timestamp gzip, nothing to rewrite
            write_fixture_log(trace, FIXTURES / f"{trace.name}.gz")
        print(name)


def main() -> None:
    if sys.argv[1] == "--finish":
        finish(Path(sys.argv[2]))
        return
    out = Path(sys.argv[1])
    names = sys.argv[2:] or list(PROBES)
    work = out / "host"
    work.mkdir(parents=True, exist_ok=True)
    limits = "; ".join(
        f"{p}={Path(p).read_text().strip()}"
        for p in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current", "/proc/sys/vm/overcommit_memory")
        if Path(p).exists()
    )
    (work / "meta.txt").write_text(f"{machine_meta()}{limits}\n")
    deadline = time.time() + float(os.environ.get("DEADLINE_S", "1e9"))
    for port, name in enumerate(names, start=29700):
        gpus, args, env = PROBES[name]
        if deadline - time.time() < 90:
            print(f"{name}: not started (deadline)")
            continue
        child = launch(name, gpus, args, port, work, env_extra={**env, "ODR_HOST_TRACE": str(work / f"{name}.host")})
        try:
            rc = child.wait(timeout=max(1.0, deadline - time.time()))
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, 9)
            rc = "timeout"
        with open(work / f"{name}.raw.log", "a") as log:
            log.write(f"rc={rc}\n")
        print(f"{name}: rc={rc}", flush=True)
    with tarfile.open(out / "host.tar.gz", "w:gz") as tar:
        tar.add(work, arcname="host")


if __name__ == "__main__":
    main()
