#!/usr/bin/env python3
"""Compose the fixtures that cannot be recorded from the megatron-core package on a CPU: CUDA OOMs,
NCCL failures, slowdowns, and messages from code that is not released (PR 2811).

Every log starts from a real Megatron-LM H100 log in shared/logs/ (arguments block, start-up, iteration
and memory lines), with named argument values rewritten; failure text comes from shared/reference/
(real PyTorch 2.11 / MCore strings) or, where no release has the code, is marked synthetic in SOURCE.md.
Run from the repo root: `python3 tools/compose_fixtures.py [--check] [--shared DIR]` (no torch needed).
Idempotent. --shared (or $OFFLOADDOCTOR_SHARED; default: ../shared next to the repository) is the folder
holding logs/ with the real H100 logs.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED_LOGS = Path(os.environ.get("OFFLOADDOCTOR_SHARED") or ROOT.parent / "shared") / "logs"
BASELINE = "megatron-lm-h100-baseline-10iter.log"
OPT050 = "megatron-lm-h100-opt050-10iter.log"
ARG_LINE = re.compile(r"^  (\w+) (\.+ )?(.*)$")

OOM_FRAGMENTATION = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB. GPU 5 has a total capacity of 79.18 GiB "
    "of which 680.19 MiB is free. Including non-PyTorch memory, this process has 78.51 GiB memory in use. Of the "
    "allocated memory 35.10 GiB is allocated by PyTorch, and 42.90 GiB is reserved by PyTorch but unallocated. If "
    "reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid "
    "fragmentation.  See documentation for Memory Management  "
    "(https://docs.pytorch.org/docs/stable/notes/cuda.html#optimizing-memory-usage-with-pytorch-cuda-alloc-conf)"
)
OOM_CAPACITY = OOM_FRAGMENTATION.replace("GPU 5", "GPU 0").replace(
    "35.10 GiB is allocated by PyTorch, and 42.90 GiB", "76.00 GiB is allocated by PyTorch, and 0 bytes"
)
TRAINING_FRAMES = [
    '  File "/workspace/Megatron-LM/pretrain_gpt.py", line 331, in <module>',
    "    pretrain(",
    '  File "/workspace/Megatron-LM/megatron/training/training.py", line 781, in pretrain',
    "    iteration, num_floating_point_operations_so_far = train(",
    '  File "/workspace/Megatron-LM/megatron/training/training.py", line 2488, in train',
    "    ) = train_step(",
    '  File "/workspace/Megatron-LM/megatron/training/training.py", line 1434, in train_step',
    "    losses_reduced = forward_backward_func(",
]
NCCL_TIMEOUT = (
    "[E1122 10:55:41.018832107 ProcessGroupNCCL.cpp:685] [Rank {rank}] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=1213, OpType=_REDUCE_SCATTER_BASE, NumelIn=470503424, NumelOut=58812928, "
    "Timeout(ms)=600000) ran for 600043 milliseconds before timing out."
)
CHILD_FAILED = """E1122 10:55:42.112000 1817 torch/distributed/elastic/multiprocessing/api.py:882] failed (exitcode: 1) local_rank: 5 (pid: 1911) of binary: /usr/bin/python
Traceback (most recent call last):
  File "/usr/local/bin/torchrun", line 8, in <module>
    sys.exit(main())
  File "/usr/local/lib/python3.12/dist-packages/torch/distributed/run.py", line 936, in main
    run(args)
  File "/usr/local/lib/python3.12/dist-packages/torch/distributed/launcher/api.py", line 293, in launch_agent
    raise ChildFailedError(
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
pretrain_gpt.py FAILED
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-11-22_10:55:42
  host      : h100-node-001
  rank      : 5 (local_rank: 5)
  exitcode  : 1 (pid: 1911)
  error_file: <N/A>
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
============================================================"""


@dataclass
class Case:
    name: str
    base: str
    args: dict = field(default_factory=dict)
    cut_after: str | None = None  # keep the base log up to the first line containing this
    tail: list[str] = field(default_factory=list)
    head: list[str] = field(default_factory=list)
    scale_iterations: float | None = None
    prepend_log: str | None = None  # a whole real log run before this one (a restart)
    expected: str = ""
    source: str = ""
    megatron_core: str | None = None  # the release the composed error is from, where it is not the base log's


def traceback(rank: int | None, frames: list[str], exception: str) -> list[str]:
    prefix = "" if rank is None else f"[rank{rank}]: "
    return [prefix + line for line in ["Traceback (most recent call last):", *frames, exception]]


def rewrite_args(lines: list[str], values: dict) -> list[str]:
    """Set argument values, keeping the dot padding; add missing names in sorted position."""
    pending = dict(values)
    out: list[str] = []
    inside = False
    for line in lines:
        if "-- arguments --" in line:
            inside = True
        elif "-- end of arguments --" in line:
            for name in sorted(pending):
                out.append(format_arg(name, pending[name]))
            pending.clear()
            inside = False
        elif inside:
            found = ARG_LINE.match(line)
            if found:
                while pending and min(pending) < found.group(1):
                    name = min(pending)
                    out.append(format_arg(name, pending.pop(name)))
                if found.group(1) in pending:
                    line = format_arg(found.group(1), pending.pop(found.group(1)))
        out.append(line)
    return out


def format_arg(name: str, value: object) -> str:
    """Megatron pads names with dots so every value starts at column 52."""
    return f"  {name} {'.' * max(1, 48 - len(name))} {value}"


def rewrite_config_reprs(lines: list[str], values: dict) -> list[str]:
    """MCore also logs OptimizerConfig(...)/DistributedDataParallelConfig(...): keep them consistent."""

    def rewrite(line: str) -> str:
        for name, value in values.items():
            line = re.sub(rf"\b{name}=[^,()]+", f"{name}={value}", line)
        return line

    return [rewrite(line) if "Config(" in line else line for line in lines]


def scale_iteration_lines(lines: list[str], factor: float) -> list[str]:
    def scale(line: str) -> str:
        line = re.sub(
            r"(elapsed time per iteration \(ms\): )([\d.]+)",
            lambda m: f"{m.group(1)}{float(m.group(2)) * factor:.1f}",
            line,
        )
        return re.sub(r"(\(TFLOP/s/GPU\): )([\d.]+)", lambda m: f"{m.group(1)}{float(m.group(2)) / factor:.1f}", line)

    return [scale(line) if "elapsed time per iteration" in line else line for line in lines]


def compose(case: Case, logs: Path = SHARED_LOGS) -> str:
    lines = (logs / case.base).read_text().splitlines()
    if case.cut_after:
        index = next(i for i, line in enumerate(lines) if case.cut_after in line)
        lines = lines[: index + 1]
    lines = rewrite_config_reprs(rewrite_args(lines, case.args), case.args)
    if case.megatron_core:
        lines = [re.sub(r"^(> Megatron-Core version \.+ )\S+$", rf"\g<1>{case.megatron_core}", line) for line in lines]
    if case.scale_iterations:
        lines = scale_iteration_lines(lines, case.scale_iterations)
    before = (logs / case.prepend_log).read_text().splitlines() if case.prepend_log else []
    return "\n".join(before + case.head + lines + case.tail) + "\n"


OOM_FRAMES = TRAINING_FRAMES + [
    '  File "/usr/local/lib/python3.12/dist-packages/megatron/core/transformer/mlp.py", line 183, in forward',
    "    intermediate_parallel, bias_parallel = self.linear_fc1(hidden_states)",
]
CASES = [
    Case(
        "oom-fragmentation-multirank",
        BASELINE,
        cut_after="iteration        5/",
        args={"world_size": 8, "data_parallel_size": 8},
        tail=traceback(5, OOM_FRAMES, OOM_FRAGMENTATION)
        + [f"[rank{r}]:" + NCCL_TIMEOUT.format(rank=r) for r in (0, 1, 2, 3, 4, 6, 7)]
        + CHILD_FAILED.splitlines(),
        expected="first: {id: oom-fragmentation, verdict: unknown}\nids: [oom-fragmentation, nccl-collective-failure]\n"
        'ranks: "5"\nexit_code: 1\n',
        source="An OOM on rank 5 (the real torch 2.11 fragmentation message from shared/reference, GPU index set to 5) "
        "followed by NCCL watchdog timeouts on the seven other ranks (PyTorch's real watchdog wording) and "
        "torchrun's ChildFailedError summary. The OOM must lead; the NCCL errors come last.",
    ),
    Case(
        "oom-capacity-expandable",
        BASELINE,
        cut_after="iteration        5/",
        head=["PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True", "CUDA_DEVICE_MAX_CONNECTIONS=1"],
        tail=traceback(0, OOM_FRAMES, OOM_FRAGMENTATION.replace("GPU 5", "GPU 0")),
        expected="first: {id: oom-capacity, verdict: confirmed}\nids: [oom-capacity]\nexit_code: 1\n",
        source="The launcher's environment dump says expandable segments are on, so even with 42.90 GiB reserved-"
        "but-unallocated this is capacity, not fragmentation (real torch 2.11 message from shared/reference).",
    ),
    Case(
        "oom-activation-offload",
        BASELINE,
        cut_after="iteration        1/",
        args={"cpu_offloading_num_layers": 4, "transformer_impl": "transformer_engine"},
        tail=traceback(0, OOM_FRAMES, OOM_CAPACITY),
        expected="first: {id: oom-activation-offload, verdict: confirmed}\nids: [oom-activation-offload]\nexit_code: 1\n",
        source="Activation offloading on (Megatron-LM turns it on through cpu_offloading_num_layers 4) with PP 1, "
        "and the real torch 2.11 capacity OOM (76.00 GiB allocated, 0 bytes reserved-unallocated).",
    ),
    Case(
        "oom-partial-optimizer-offload-bridge",
        OPT050,
        cut_after="iteration        5/",
        tail=traceback(0, OOM_FRAMES, OOM_CAPACITY),
        expected="first: {id: oom-partial-optimizer-offload, verdict: confirmed}\nids: [oom-partial-optimizer-offload]\n"
        "exit_code: 1\nconfig: [../configs/bridge-run-config-optimizer-offload.yaml]\n"
        "overrides: [optimizer.optimizer_offload_fraction=1]\n",
        source="The real 50 % optimizer-offload log, cut after iteration 5 and ended by the real torch 2.11 capacity "
        "OOM; diagnosed together with the Bridge run_config.yaml from shared/reference (fraction 0.5), so the "
        "verdict cites file:line in the YAML and the fix steps the fraction up to 0.75.\n"
        + "\n`run_config.yaml` was the README's headline example until 2026-11-26 (now a real run, fixtures/offload-sweep g2-f040; this one stays the README's Bridge example): `fixtures/configs/bridge-run-config-optimizer-offload.yaml`\nwith every value this log prints differently set to the log's value (the model shape: `num_layers` 8,\n`transformer_impl` local, `ffn_hidden_size`, attention heads and groups, `kv_channels`; batch sizes; the settings\nof the OptimizerConfig and DistributedDataParallelConfig dumps), so that config and log belong to one run. Line\nnumbers are those of the reference file (`recompute_modules: null` keeps a comment line where the list item\nwas). `optimizer.timers` stays `null` (a config cannot hold the `Timers` object the log prints). `expected.yaml`\nstill diagnoses the log with the unchanged reference config, which disagrees on the model: the report says the\nconfig is probably from another run.",
    ),
    Case(
        "optimizer-offload-slowdown-restart",
        OPT050,
        args={"optimizer_offload_fraction": 1.0},
        scale_iterations=4.2 * 460.9 / 820.7,
        prepend_log=BASELINE,
        expected="first: {id: optimizer-offload-slowdown, verdict: confirmed}\nids: [optimizer-offload-slowdown]\nexit_code: 0\n",
        source="A restart: the real baseline log, then the real optimizer-offload log with optimizer_offload_fraction "
        "rewritten to 1.0. SYNTHETIC NUMBERS: its elapsed-time and TFLOP/s figures are scaled so the steady "
        "state is 4.2x the baseline's 460.9 ms (the guide's measurement at 100 % on Qwen3-30B-A3B); the real "
        "0.47B run at 0.5 was 1.78x, which is not an extreme slowdown (see clean-opt050).",
    ),
    Case(
        "unmatched-failure",
        BASELINE,
        cut_after="time to initialize megatron",
        tail=[
            f"{r}: " + line
            for r in (0,)
            for line in traceback(
                None,
                TRAINING_FRAMES[:2]
                + [
                    '  File "/workspace/Megatron-LM/megatron/training/training.py", line 655, in pretrain',
                    "    train_data_iterator, valid_data_iterator, test_data_iterator = build_train_valid_test_data_iterators(",
                ],
                "FileNotFoundError: [Errno 2] No such file or directory: '/data/tokens/wiki_text_document.idx'",
            )
        ],
        expected='ids: []\nunmatched: "FileNotFoundError"\nexit_code: 0\n',
        source="A failure no signature knows (a missing dataset index), with Slurm `srun --label` prefixes on the "
        "traceback. diagnose must say that nothing matched and show the FileNotFoundError line.",
    ),
    Case(
        "cuda-graph-expandable-segments",
        BASELINE,
        cut_after="time to initialize megatron",
        head=["PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"],
        args={"cuda_graph_impl": "local"},
        tail=traceback(
            0,
            TRAINING_FRAMES[:2]
            + [
                '  File "/usr/local/lib/python3.12/dist-packages/megatron/core/transformer/cuda_graphs.py", line 1414, in __init__',
                "    assert (",
            ],
            "AssertionError: Setting NCCL_GRAPH_REGISTER=0 to avoid illegal memory access when using CUDA Graph with "
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True.",
        ),
        expected="first: {id: cuda-graph-expandable-segments, verdict: confirmed}\nids: [cuda-graph-expandable-segments]\nexit_code: 1\n",
        source="The assertion text is CudaGraphManager.__init__'s in megatron-core 0.16.1 (cuda_graphs.py:1414); it "
        "only runs on a GPU (it asks torch.cuda for the device capability), so the traceback frames are "
        "composed, not recorded. 0.16.1-0.18.0 assert it for megatron-core's own graphs; 0.19.0 does not (it "
        "asserts for Transformer Engine's only), so the log says 0.16.1. The same words from 0.19.0, recorded: "
        "fixtures/memory-calibration/refused/b56-tiny-te-cuda-graph-expandable-refused.log.gz.",
        megatron_core="0.16.1",
    ),
    Case(
        "state-offload-conflict",
        BASELINE,
        cut_after="time to initialize megatron",
        args={"offload_optimizer_states": True, "optimizer_cpu_offload": True, "use_precision_aware_optimizer": True},
        tail=traceback(
            0,
            TRAINING_FRAMES[:2],
            "AssertionError: --offload-optimizer-states and --optimizer-cpu-offload cannot be used together.",
        ),
        expected="first: {id: state-offload-conflict, verdict: confirmed}\n"
        "ids: [state-offload-conflict, state-offload-requires-te-fusedadam]\nexit_code: 1\n",
        source="SYNTHETIC MESSAGE: PR 2811 (unmerged) added this assert in validate_args; its exact wording is not in "
        "any release, so this line is written from the PR discussion. The signature's pattern accepts any "
        "error naming both options. The same image has no Transformer Engine (MCore's 'Falling back to Torch "
        "optimizers' line), so state offloading could not run either: that second finding comes from the config.",
    ),
    Case(
        "state-offload-requires-te-fusedadam",
        BASELINE,
        cut_after="time to initialize megatron",
        args={"offload_optimizer_states": True},
        tail=traceback(
            0,
            TRAINING_FRAMES[:2],
            "AssertionError: --offload-optimizer-states requires TE FusedAdam "
            "(transformer_engine.pytorch.optimizers.FusedAdam).",
        ),
        expected="first: {id: state-offload-requires-te-fusedadam, verdict: confirmed}\n"
        "ids: [state-offload-requires-te-fusedadam]\nexit_code: 1\n",
        source="The real baseline log's first line is MCore's 'Transformer Engine and Apex are not installed. Falling "
        "back to Torch optimizers.' warning, which confirms the cause. SYNTHETIC MESSAGE: the final assertion "
        "wording is written from PR 2811's description (unmerged, not in any release).",
    ),
    Case(
        "optimizer-offload-fraction-range",
        BASELINE,
        args={"optimizer_cpu_offload": True, "optimizer_offload_fraction": 50.0, "use_precision_aware_optimizer": True},
        expected="first: {id: optimizer-offload-fraction-range, verdict: confirmed}\n"
        "ids: [optimizer-offload-fraction-range]\nexit_code: 1\n",
        source="The real baseline log with optimizer_offload_fraction rewritten to 50.0 (percent typed for a share). "
        "MCore 0.16.1 accepts it and training runs: only the arguments block shows the problem.",
    ),
]


def source_md(case: Case) -> str:
    return (
        f"# {case.name}\n\nComposed by `tools/compose_fixtures.py` from `shared/logs/{case.base}` (a real "
        f"Megatron-LM core_v0.19.0 log from one H100)"
        + (f", after the whole of `shared/logs/{case.prepend_log}`" if case.prepend_log else "")
        + ".\n\n"
        + (f"Rewritten arguments: {', '.join(f'`{k}` = {v}' for k, v in case.args.items())}.\n\n" if case.args else "")
        + (
            f"Rewritten start-up line: `> Megatron-Core version` {case.megatron_core}.\n\n"
            if case.megatron_core
            else ""
        )
        + case.source
        + "\n"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if any fixture would change")
    parser.add_argument(
        "--shared",
        type=Path,
        default=SHARED_LOGS.parent,
        help="shared reference folder (default: $OFFLOADDOCTOR_SHARED, else ../shared)",
    )
    args = parser.parse_args()
    check = args.check
    logs = args.shared / "logs"
    if not logs.is_dir():
        parser.error(f"{logs}: not a folder (see --shared)")
    changed = []
    for case in CASES:
        directory = ROOT / "fixtures" / case.name
        files = {
            "job.log": compose(case, logs),
            "expected.yaml": "# what `offloaddoctor diagnose` must report\n" + case.expected,
            "SOURCE.md": source_md(case),
        }
        for name, text in files.items():
            path = directory / name
            if not path.exists() or path.read_text() != text:
                changed.append(str(path.relative_to(ROOT)))
                if not check:
                    directory.mkdir(parents=True, exist_ok=True)
                    path.write_text(text)
    print(("would change: " if check else "wrote: ") + (", ".join(changed) or "nothing"))
    return 1 if check and changed else 0


if __name__ == "__main__":
    sys.exit(main())
