#!/usr/bin/env python3
"""Is `estimate`'s advice true on a real GPU? Plan the runs here, record them on the device, report here.

    python benchmarks/advice_on_gpu.py plan [BASE...]  # writes benchmarks/advice_runs.json: every advised change
    device: python3 tools/record_offload_sweep.py $OUT advice   (reads benchmarks/advice_runs.json)
    python benchmarks/advice_on_gpu.py report [--markdown]     # outcome of each advised change vs its prediction

Each base config below does not fit one H100 80GB (or is tight) as `estimate` judges it from its Megatron-LM
launch flags. `plan` asks `estimate` for its advice (the changes it says fit), applies each change to the launch
flags and names the run `a-<base>-<n>`. `report` reads fixtures/offload-sweep/a-*.log.gz (recorded with these
flags, one run alone on each GPU) and prints, per advised change: ran / OOM / crash, the measured peak
(`max allocated`), the prediction and its error.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import shlex
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tools"))

from record_memory_calibration import COMMON, DISTOPT, LLAMA, OFFLOAD, SELECTIVE  # noqa: E402

from offloaddoctor.api import estimate, load_catalog  # noqa: E402

PLAN = ROOT / "benchmarks" / "advice_runs.json"
GPT_3B = (
    "--num-layers 16 --hidden-size 4096 --ffn-hidden-size 16384 --num-attention-heads 32 --seq-length 2048 "
    f"--max-position-embeddings 2048 --vocab-size 32000 --bf16 {DISTOPT}"
)
# Base configs, chosen after the model was committed; none was used to set a constant.
BASES = {
    # The GPT at micro-batch 2 (88 GB without changes).
    "gpt3b-mbs2": f"{GPT_3B} --micro-batch-size 2 --global-batch-size 4",
    # Llama-shaped 5.1B with selective recompute and offload 0.3: does not fit.
    "llama5b-f030": (
        "--num-layers 24 --hidden-size 4096 --ffn-hidden-size 11008 --num-attention-heads 32 --seq-length 2048 "
        f"--max-position-embeddings 2048 --vocab-size 32000 --bf16 {DISTOPT} {LLAMA} "
        f"--untie-embeddings-and-output-weights {SELECTIVE} --micro-batch-size 1 --global-batch-size 2 {OFFLOAD} 0.3"
    ),
    # A new GPT shape: 2.7B, 24 layers of 3072, sequence 4096 at micro-batch 1.
    "gpt27b-s4096": (
        "--num-layers 24 --hidden-size 3072 --ffn-hidden-size 12288 --num-attention-heads 24 --seq-length 4096 "
        f"--max-position-embeddings 4096 --vocab-size 50304 --bf16 {DISTOPT} --micro-batch-size 1 --global-batch-size 2"
    ),
    # Llama-shaped 4.3B with GQA, 128k vocabulary, micro-batch 4, already offloading at 0.5 without --manual-gc.
    "llama4b-gqa-f050": (
        "--num-layers 20 --hidden-size 4096 --ffn-hidden-size 11008 --num-attention-heads 32 --group-query-attention "
        f"--num-query-groups 8 --seq-length 2048 --max-position-embeddings 2048 --vocab-size 128256 --bf16 {DISTOPT} "
        f"{LLAMA} --untie-embeddings-and-output-weights --micro-batch-size 2 --global-batch-size 4 {OFFLOAD} 0.5"
    ),
    # Added in the second recording, planned with the model as committed before it (none set a constant):
    # a 6.9B GPT already offloading its whole optimizer, micro-batch 2.
    "gpt7b-f100-mbs2": (
        "--num-layers 32 --hidden-size 4096 --ffn-hidden-size 16384 --num-attention-heads 32 --seq-length 2048 "
        f"--max-position-embeddings 2048 --vocab-size 50304 --bf16 {DISTOPT} --micro-batch-size 2 "
        f"--global-batch-size 4 {OFFLOAD} 1.0"
    ),
    # Llama-shaped 2.9B with GQA and a long sequence (4096) at micro-batch 1: the unfused attention core.
    "llama3b-gqa-s4096": (
        "--num-layers 20 --hidden-size 3072 --ffn-hidden-size 8192 --num-attention-heads 24 --group-query-attention "
        f"--num-query-groups 8 --seq-length 4096 --max-position-embeddings 4096 --vocab-size 128256 --bf16 {DISTOPT} "
        f"{LLAMA} --untie-embeddings-and-output-weights --micro-batch-size 1 --global-batch-size 2"
    ),
    # A 2.6B GPT at micro-batch 2, already offloading 0.2 of its optimizer without --manual-gc.
    "gpt26b-mbs2-f020": (
        "--num-layers 32 --hidden-size 2560 --ffn-hidden-size 10240 --num-attention-heads 32 --seq-length 2048 "
        f"--max-position-embeddings 2048 --vocab-size 50304 --bf16 {DISTOPT} --micro-batch-size 2 "
        f"--global-batch-size 4 {OFFLOAD} 0.2"
    ),
}
PER_BASE = 4  # the cheapest advised changes of each base that are run

# Canonical key -> Megatron-LM flag (value None: a switch).
FLAGS = {
    "model.recompute_granularity": "--recompute-granularity",
    "model.recompute_method": "--recompute-method",
    "model.recompute_num_layers": "--recompute-num-layers",
    "train.micro_batch_size": "--micro-batch-size",
    "optimizer.optimizer_cpu_offload": "--optimizer-cpu-offload",
    "optimizer.optimizer_offload_fraction": "--optimizer-offload-fraction",
    "optimizer.use_precision_aware_optimizer": "--use-precision-aware-optimizer",
    "optimizer.use_distributed_optimizer": "--use-distributed-optimizer",
    "train.manual_gc": "--manual-gc",
    "train.manual_gc_interval": "--manual-gc-interval",
    "model.pipeline_model_parallel_size": "--pipeline-model-parallel-size",
    "model.tensor_model_parallel_size": "--tensor-model-parallel-size",
}
SWITCHES = {"--optimizer-cpu-offload", "--use-precision-aware-optimizer", "--use-distributed-optimizer", "--manual-gc"}


def apply(args: str, overrides: tuple[str, ...]) -> str:
    """The launch flags with the advised overrides applied (replacing a flag already there)."""
    tokens = shlex.split(args)
    for override in overrides:
        key, value = override.split("=", 1)
        if key == "model.recompute_modules":
            continue  # [core_attn] is selective recompute's default
        flag = FLAGS[key]
        if flag in tokens:
            at = tokens.index(flag)
            del tokens[at : at + (1 if flag in SWITCHES else 2)]
        if flag in SWITCHES:
            if value.lower() == "true":
                tokens.append(flag)
        else:
            tokens += [flag, value]
    return " ".join(tokens)


def estimate_launch(args: str, gpus: int = 1, catalog=None, gpu: str = "H100-80GB", env: dict | None = None):
    """`estimate` on `gpu` of the recordings' launch command (torchrun on `gpus` GPUs) with `args`, after
    `export`s of `env`. ODR_PRECISION_AWARE_OFF (the launcher clears --use-precision-aware-optimizer after
    Megatron-LM's check, before the arguments are printed and used) is said as the run has it."""
    overrides = ["optimizer.use_precision_aware_optimizer=False"] if (env or {}).get("ODR_PRECISION_AWARE_OFF") else []
    with tempfile.NamedTemporaryFile("w", suffix=".sh") as script:
        script.writelines(f"export {name}={value}\n" for name, value in (env or {}).items())
        script.write(f"torchrun --nproc-per-node {gpus} pretrain_gpt.py {COMMON} {args}\n")
        script.flush()
        return estimate([script.name], overrides, gpu=gpu, catalog=catalog or load_catalog())


def plan(only: list[str]) -> None:
    """Plan the named bases (all when none is named); the plans of the others, perhaps recorded, are kept."""
    runs = json.loads(PLAN.read_text()) if only and PLAN.exists() else {}
    for base, args in BASES.items():
        if only and base not in only:
            continue
        runs = {name: run for name, run in runs.items() if not name.startswith(f"a-{base}-")}
        report = estimate_launch(args)
        # Transformer Engine does not install on the GPU machine: a change that needs it cannot be run there.
        fitting = [s for s in report.suggestions if s.fits and not _needs_te(s.overrides)][:PER_BASE]
        print(f"{base}: {report.estimate.peak_allocated_bytes / 2**20:,.0f} MiB, {len(fitting)} advised changes")
        runs[f"a-{base}-0"] = {
            "args": args,
            "change": "as given",
            "predicted_mib": report.estimate.peak_allocated_bytes / 2**20,
        }
        for n, suggestion in enumerate(fitting, 1):
            runs[f"a-{base}-{n}"] = {
                "args": apply(args, suggestion.overrides),
                "change": suggestion.change,
                "overrides": list(suggestion.overrides),
                "predicted_mib": suggestion.peak_allocated_bytes / 2**20,
            }
            print(f"  {n}. {suggestion.change}: {suggestion.peak_allocated_bytes / 2**20:,.0f} MiB")
    PLAN.write_text(json.dumps(runs, indent=1) + "\n")


def _needs_te(overrides) -> bool:
    return any(o.startswith(("model.transformer_impl=transformer_engine", "model.cpu_offloading")) for o in overrides)


MAX_ALLOCATED = re.compile(r"max allocated: ([\d.]+)")


def report(markdown: bool) -> None:
    runs = json.loads(PLAN.read_text())
    rows = []
    for name, run in runs.items():
        path = ROOT / "fixtures" / "offload-sweep" / f"{name}.log.gz"
        if not path.exists():
            rows.append((name, run["change"], "not run", None, run["predicted_mib"], None, None))
            continue
        with gzip.open(path, "rt", errors="replace") as handle:
            text = handle.read()
        peaks = [float(x) for x in MAX_ALLOCATED.findall(text)]
        if "(after 3 iterations) memory (MB)" in text:
            outcome = "ran"
        elif "OutOfMemoryError" in text:
            outcome = "OOM"
        else:
            outcome = "crash"
        measured = max(peaks) if peaks and outcome == "ran" else None
        error = (run["predicted_mib"] / measured - 1) * 100 if measured else None
        # The model as it is now, from the recorded log's own arguments block.
        now = estimate([str(path)]).estimate.peak_allocated_bytes / 2**20
        now_error = (now / measured - 1) * 100 if measured else None
        rows.append((name, run["change"], outcome, measured, run["predicted_mib"], error, now_error))
    header = ("run", "change", "outcome", "measured MiB", "predicted MiB", "error", "error now")
    if markdown:
        print("| " + " | ".join(header) + " |\n|---|---|---|---:|---:|---:|---:|")
    for name, change, outcome, measured, predicted, error, now_error in rows:
        cells = (
            name,
            change,
            outcome,
            f"{measured:,.0f}" if measured else "-",
            f"{predicted:,.0f}",
            f"{error:+.1f} %" if error is not None else "-",
            f"{now_error:+.1f} %" if now_error is not None else "-",
        )
        print(("| " + " | ".join(cells) + " |") if markdown else "  ".join(cells))
    advised = [r for r in rows if not r[0].endswith("-0") and r[2] != "not run"]
    ran = [r for r in advised if r[2] == "ran"]
    within = [r for r in ran if r[5] is not None and abs(r[5]) <= 5]
    within_now = [r for r in ran if r[6] is not None and abs(r[6]) <= 5]
    print(
        f"\nadvised changes run: {len(advised)}; ran and fit: {len(ran)}; predicted within ±5 %: {len(within)} "
        f"as planned, {len(within_now)} with the model now"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=("plan", "report"))
    parser.add_argument("bases", nargs="*", help=f"plan only these (default: all): {', '.join(BASES)}")
    parser.add_argument("--markdown", action="store_true")
    options = parser.parse_args()
    if unknown := set(options.bases) - set(BASES):
        parser.error(f"unknown base: {', '.join(sorted(unknown))}")
    plan(options.bases) if options.step == "plan" else report(options.markdown)


if __name__ == "__main__":
    main()
