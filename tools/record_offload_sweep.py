#!/usr/bin/env python3
"""Record real Megatron-LM runs near the 80 GB limit of an H100: partial optimizer offload, recompute,
expandable segments, and the changes `offloaddoctor estimate` advises (fixtures/offload-sweep/).

Each measured run is alone on its GPU (two jobs sharing one corrupt OOM outcomes): with two GPUs, two
queues run side by side, one run per GPU at a time, small runs too (packed on one GPU in the first recording,
they ran each other out of memory: tools/finish_offload_sweep.py keeps none of those). Training code: the megatron-core 0.19.0 wheel,
entry script tools/compare_family_pretrain_gpt.py, as for fixtures/memory-calibration.

    device: source tools/megatron_wheel_setup.sh && python3 tools/record_offload_sweep.py $OUT SET [DEADLINE_S] [NAMES]
    here:   python3 tools/finish_offload_sweep.py <folder with the fetched archive>

SET is a key of SETS below. Runs still going at DEADLINE_S (default 540) are killed and marked so.
Writes OUTDIR/sweep-SET.tar.gz holding NAME.raw.log, NAME.cmd, NAME.env, NAME.smi, and meta-SET.txt.
"""

from __future__ import annotations

import os
import sys
import tarfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from record_memory_calibration import (
    DISTOPT,
    FULL,
    GPT_3B,
    LLAMA,
    OFFLOAD,
    SELECTIVE,
    SmiPoller,
    machine_meta,
    run_in_lanes,
    shape,
)

EXPANDABLE = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
# Llama-shaped: 5.1B, no biases, RMSNorm, SwiGLU, untied embeddings, selective recompute (the unfused
# attention's O(s^2) core would not fit otherwise).
LLAMA_5B = (
    "--num-layers 24 --hidden-size 4096 --ffn-hidden-size 11008 --num-attention-heads 32 --seq-length 2048 "
    f"--max-position-embeddings 2048 --vocab-size 32000 --bf16 {DISTOPT} {LLAMA} "
    f"--untie-embeddings-and-output-weights {SELECTIVE}"
)
SMALL = f"{shape(8, 2048, 16, 1024, 4, 32000)} --bf16 {DISTOPT}"
FRACTIONS = (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.75, 0.9, 1.0)


def _sweep(prefix: str, base: str, fractions=FRACTIONS) -> dict[str, tuple[str, dict]]:
    runs = {f"{prefix}-none": (base, {})}
    for f in fractions:
        runs[f"{prefix}-f{round(f * 100):03d}"] = (f"{base} {OFFLOAD} {f}", {})
    return runs


def _mb(base: str, mbs: int) -> str:
    return f"{base} --micro-batch-size {mbs} --global-batch-size {2 * mbs}"


# name -> (arguments, extra environment). Every run is alone on its GPU.
SETS: dict[str, dict[str, tuple[str, dict]]] = {
    "sweep": {
        **_sweep("g1", _mb(GPT_3B, 1)),
        "g1-f000": (f"{_mb(GPT_3B, 1)} {OFFLOAD} 0.0", {}),
        "g1-f010-exp": (f"{_mb(GPT_3B, 1)} {OFFLOAD} 0.1", EXPANDABLE),
        "g1-f010-gc": (f"{_mb(GPT_3B, 1)} {OFFLOAD} 0.1 --manual-gc", {}),
        "g1-f005-exp": (f"{_mb(GPT_3B, 1)} {OFFLOAD} 0.05", EXPANDABLE),
        "g2-f040": (f"{_mb(GPT_3B, 2)} {OFFLOAD} 0.4", {}),
        "g2-f040-exp": (f"{_mb(GPT_3B, 2)} {OFFLOAD} 0.4", EXPANDABLE),
        "g2-f040-gc": (f"{_mb(GPT_3B, 2)} {OFFLOAD} 0.4 --manual-gc", {}),
        "g2-sel-f040": (f"{_mb(GPT_3B, 2)} {SELECTIVE} {OFFLOAD} 0.4", {}),
        "g2-full": (f"{_mb(GPT_3B, 2)} {FULL}", {}),
        **{
            k: v
            for k, v in _sweep("l1", _mb(LLAMA_5B, 1), (0.2, 0.3, 0.4, 0.5, 0.6, 0.75, 0.9)).items()
            if k != "l1-none"
        },
        "l1-f050-exp": (f"{_mb(LLAMA_5B, 1)} {OFFLOAD} 0.5", EXPANDABLE),
        "l1-f040-gc": (f"{_mb(LLAMA_5B, 1)} {OFFLOAD} 0.4 --manual-gc", {}),
        "l1-f030-gc": (f"{_mb(LLAMA_5B, 1)} {OFFLOAD} 0.3 --manual-gc", {}),
        "g1-f005-gc": (f"{_mb(GPT_3B, 1)} {OFFLOAD} 0.05 --manual-gc", {}),
        "l1-full-f050": (
            f"{_mb(LLAMA_5B, 1).replace(SELECTIVE, '')} {FULL} {OFFLOAD} 0.5",
            {},
        ),
        **{f"s-{k}": v for k, v in _sweep("small", SMALL, (0.05, 0.1, 0.2, 0.5, 0.9)).items()},
        "s-small-f010-gc": (f"{SMALL} {OFFLOAD} 0.1 --manual-gc", {}),
    },
    # The GPT with expandable segments at every fraction (the sweep above has them at 0.05 and 0.1).
    "exp": {
        "g1-f060": (f"{_mb(GPT_3B, 1)} {OFFLOAD} 0.6", {}),
        **{
            f"{k}-exp": (args, EXPANDABLE)
            for k, (args, _) in _sweep("g1", _mb(GPT_3B, 1), (0.0, *FRACTIONS)).items()
            if k != "g1-f010"
        },
    },
    # A hold-out for the model set-up peak (memory/model.py _set_up_bytes), planned after it was committed: a
    # 9.1B GPT fully offloaded with full recompute, whose peak is DDP holding the weights twice (69,238 MiB).
    "setup": {
        "h1-gpt9b-full-f100": (
            "--num-layers 44 --hidden-size 4096 --ffn-hidden-size 16384 --num-attention-heads 32 --seq-length 2048 "
            f"--max-position-embeddings 2048 --vocab-size 50304 --bf16 {DISTOPT} --micro-batch-size 1 "
            f"--global-batch-size 2 {OFFLOAD} 1.0 {FULL}",
            {},
        )
    },
    # The advice for g1-f000 and g2-f040 once "fits" allowed for the model's error (memory/calibration.py
    # MODEL_UNDERESTIMATE): selective recompute with --manual-gc, planned before recording.
    "margin": {
        "g1-f000-sel-gc": (f"{_mb(GPT_3B, 1)} {OFFLOAD} 0.0 {SELECTIVE} --manual-gc --manual-gc-interval 100", {}),
        "g2-f040-sel-gc": (f"{_mb(GPT_3B, 2)} {OFFLOAD} 0.4 {SELECTIVE} --manual-gc --manual-gc-interval 100", {}),
    },
    # Hold-outs for the rotated Q/K term (memory/activations.py), planned before recording: Llama-shaped, RoPE,
    # selective recompute, one without GQA and one with 4 query groups at sequence 4096.
    "rope": {
        "r1-llama27b-mbs3": (
            "--num-layers 32 --hidden-size 2560 --ffn-hidden-size 6912 --num-attention-heads 32 --seq-length 2048 "
            f"--max-position-embeddings 2048 --vocab-size 32000 --bf16 {DISTOPT} {LLAMA} "
            f"--untie-embeddings-and-output-weights {SELECTIVE} --micro-batch-size 3 --global-batch-size 6",
            {},
        ),
        "r2-llama3b-gqa4-s4096-mbs2": (
            "--num-layers 24 --hidden-size 3072 --ffn-hidden-size 8192 --num-attention-heads 24 "
            "--group-query-attention --num-query-groups 4 --seq-length 4096 --max-position-embeddings 4096 "
            f"--vocab-size 32000 --bf16 {DISTOPT} {LLAMA} --untie-embeddings-and-output-weights {SELECTIVE} "
            "--micro-batch-size 2 --global-batch-size 4",
            {},
        ),
    },
}
RUN_TIMEOUT_S = 300
# Activation offloading with the local implementation: Megatron's real rejection (it needs TE).
TE_REJECT = {"te-reject": (f"{SMALL} --cpu-offloading-num-layers 1", {})}


def _advice_set() -> dict[str, tuple[str, dict]]:
    """The advised changes benchmarks/advice_on_gpu.py planned (benchmarks/advice_runs.json)."""
    import json

    plan = Path(__file__).resolve().parents[1] / "benchmarks" / "advice_runs.json"
    return {name: (run["args"], {}) for name, run in json.loads(plan.read_text()).items()}


def main() -> None:
    outdir, set_name = Path(sys.argv[1]), sys.argv[2]
    deadline = time.time() + (float(sys.argv[3]) if len(sys.argv) > 3 else 540)
    runs = {**_advice_set(), **TE_REJECT} if set_name == "advice" else SETS[set_name]
    names = list(runs)
    if len(sys.argv) > 4:
        names = [n for n in sys.argv[4].split(",") if n in runs]  # in the order given
    raw = Path(os.environ.get("SWEEP_RAW", "/tmp/sweep-raw")) / set_name  # only the archive goes to OUTDIR
    raw.mkdir(parents=True, exist_ok=True)
    poller = SmiPoller()
    poller.start()
    # One run per GPU at a time; a run is killed after RUN_TIMEOUT_S, none starts within 120 s of the deadline.
    results = run_in_lanes({n: (1, *runs[n]) for n in names}, raw, deadline, RUN_TIMEOUT_S, leave_s=120)
    poller.stop.set()
    poller.join()
    for name in names:
        (raw / f"{name}.smi").write_text(f"{poller.peak.get(name, 0)}\n")
    meta = machine_meta()
    not_run = [n for n in names if not (raw / f"{n}.raw.log").exists()]
    (raw / f"meta-{set_name}.txt").write_text(meta + "\n".join(results) + "\nnot_run=" + ",".join(not_run) + "\n")
    with tarfile.open(outdir / f"sweep-{set_name}.tar.gz", "w:gz") as tar:
        tar.add(raw, arcname=f"sweep-{set_name}")
    for name in names:
        path = raw / f"{name}.raw.log"
        if not path.exists():
            continue
        text = path.read_text(errors="replace")
        peaks = [ln.split("max allocated: ")[1].split(" ")[0] for ln in text.splitlines() if "max allocated: " in ln]
        oom = "OOM" if "OutOfMemoryError" in text or "CUDA out of memory" in text else ""
        print(f"{name}: max_alloc={peaks[-1] if peaks else None} smi={poller.peak.get(name)} {oom}")
    print("not_run=" + ",".join(not_run))


if __name__ == "__main__":
    main()
