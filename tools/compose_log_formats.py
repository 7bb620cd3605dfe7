#!/usr/bin/env python3
"""Compose the issue-13 fixtures ("logs as users really have them") from real pieces.

Real pieces: Megatron-Bridge 0.3.1 output recorded by tools/record_bridge_summary.py (fixtures/bridge-0.3.1/),
the real torch 2.11 OOM wording and MCore frames already in fixtures/ (see their SOURCE.md), and the failure
wordings quoted from public Megatron-LM / Megatron-Bridge / NeMo / PyTorch threads in issue 13. What each
fixture takes from where is written to its SOURCE.md. No torch needed:

    python3 tools/compose_log_formats.py           # (re)write fixtures/<case>/job.log and SOURCE.md
    python3 tools/compose_log_formats.py --check   # exit 1 if a file would change
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
BRIDGE = FIXTURES / "bridge-0.3.1"

# torch >= 2.2 wording, real (shared/reference, torch 2.11 on an H100): the capacity form
OOM_CAPACITY_H100 = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB. GPU 0 has a total capacity of 79.18 GiB "
    "of which 680.19 MiB is free. Including non-PyTorch memory, this process has 78.51 GiB memory in use. Of the "
    "allocated memory 76.00 GiB is allocated by PyTorch, and 0 bytes is reserved by PyTorch but unallocated. If "
    "reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid "
    "fragmentation.  See documentation for Memory Management  "
    "(https://docs.pytorch.org/docs/stable/notes/cuda.html#optimizing-memory-usage-with-pytorch-cuda-alloc-conf)"
)
# The last frames of the real MCore forward pass in fixtures/oom-partial-optimizer-offload-bridge/job.log.
MLP_FRAMES = [
    '  File "/usr/local/lib/python3.12/dist-packages/megatron/core/transformer/mlp.py", line 183, in forward',
    "    intermediate_parallel, bias_parallel = self.linear_fc1(hidden_states)",
]


def ranked(rank: int, lines: list[str]) -> list[str]:
    return [f"[rank{rank}]: {line}" for line in lines]


def bridge_oom(summary: str) -> str:
    lines = (BRIDGE / summary).read_text().splitlines()
    lines += ranked(0, ["Traceback (most recent call last):", *MLP_FRAMES, OOM_CAPACITY_H100])
    return "\n".join(lines) + "\n"


def nccl_oom_every_rank() -> str:
    out = ["+ torchrun --nproc_per_node 8 pretrain_gpt.py --tensor-model-parallel-size 8 --bf16"]
    for rank in range(8):
        out.append(
            f"gpu-node-07:{2150 + rank}:{2387 + rank} [{rank}] include/alloc.h:228 NCCL WARN Cuda failure 2 'out of memory'"
        )
        out.append(
            f"gpu-node-07:{2150 + rank}:{2387 + rank} [{rank}] include/alloc.h:125 NCCL WARN Failed to CUDA calloc 6291456 bytes"
        )
    for rank in range(8):
        out += ranked(
            rank,
            [
                "torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.cpp:77, "
                "unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5",
                "ncclUnhandledCudaError: Call to CUDA function failed.",
                "Last error:",
                "Cuda failure 'out of memory'",
            ],
        )
    return "\n".join(out) + "\n"


def cuda_error_oom() -> str:
    return (
        "\n".join(
            ranked(
                1,
                [
                    "Traceback (most recent call last):",
                    *MLP_FRAMES,
                    "RuntimeError: CUDA error: out of memory",
                    "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.",
                    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
                    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
                ],
            )
        )
        + "\n"
    )


def old_oom() -> str:
    return (
        "\n".join(
            [
                "Traceback (most recent call last):",
                '  File "train.py", line 88, in <module>',
                "    loss.backward()",
                "RuntimeError: CUDA out of memory. Tried to allocate 12.50 MiB (GPU 0; 10.92 GiB total capacity; 8.57 MiB "
                "already allocated; 9.28 GiB free; 4.68 MiB cached)",
            ]
        )
        + "\n"
    )


def nccl_ub_registration() -> str:
    out = [
        "+ torchrun --nproc_per_node 8 pretrain_gpt.py --use-distributed-optimizer --overlap-grad-reduce "
        "--use-nccl-ub --bf16"
    ]
    for rank in (0, 2, 5):
        out.append(
            f"gpu-node-03:{88410 + rank}:{89118 + rank} [{rank}] misc/ibvwrap.cc:178 NCCL WARN Call to "
            "ibv_reg_mr_iova2 failed with error Bad address"
        )
    for rank in (0, 2, 5):
        out += ranked(
            rank,
            [
                "torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.cpp:77, "
                "invalid usage (run with NCCL_DEBUG=WARN for details), NCCL version 2.21.5",
                "ncclInvalidUsage: This usually reflects invalid usage of NCCL library.",
            ],
        )
    return "\n".join(out) + "\n"


def validate_args_excerpt() -> str:
    return (
        "\n".join(
            [
                "+ torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 30 --pipeline-model-parallel-size 4 "
                "--num-layers-per-virtual-pipeline-stage 2 --virtual-pipeline-model-parallel-size 2 --bf16",
                *ranked(
                    0,
                    [
                        "Traceback (most recent call last):",
                        '  File "/workspace/Megatron-LM/pretrain_gpt.py", line 331, in <module>',
                        "    pretrain(",
                        '  File "/workspace/Megatron-LM/megatron/training/training.py", line 702, in pretrain',
                        "    initialize_megatron(",
                        '  File "/workspace/Megatron-LM/megatron/training/initialize.py", line 87, in initialize_megatron',
                        "    validate_args(args, args_defaults)",
                        '  File "/workspace/Megatron-LM/megatron/training/arguments.py", line 412, in validate_args',
                        "    assert num_layers % args.transformer_pipeline_model_parallel_size == 0, \\",
                    ],
                ),
                "(the rest of the output was not pasted)",
            ]
        )
        + "\n"
    )


def device_assert() -> str:
    lines = []
    for thread in range(32, 36):
        lines.append(
            f"/pytorch/aten/src/ATen/native/cuda/IndexKernel.cu:92: operator(): block: [12,0,0], thread: [{thread},0,0] "
            'Assertion `-sizes[i] <= index && index < sizes[i] && "index out of bounds"` failed.'
        )
    return "\n".join(lines) + "\n"


def nccl_warn() -> str:
    return (
        "\n".join(
            [
                "gpu-node-11:30418:30977 [3] NCCL INFO Channel 00/0 : 3[3] -> 11[3] [send] via NET/IB/0",
                "gpu-node-11:30418:31002 [3] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer "
                "10.32.1.12<58417> with status=12 opcode=0 len=0 vendor err 129 (Recv) localGid ::ffff:10.32.1.11 remoteGids "
                "::ffff:10.32.1.12 hca mlx5_2",
                "gpu-node-11:30418:31002 [3] NCCL INFO transport/net.cc:1302 -> 6",
            ]
        )
        + "\n"
    )


def bridge_2992() -> str:
    lines = (BRIDGE / "validate-error-pp2-offload-layers-0.log").read_text().splitlines()
    return "\n".join(ranked(0, lines)) + "\n"


def close_call(capacity: str, request: str, slack: str, allocated: str, free: str, in_use: str) -> str:
    return (
        "\n".join(
            ranked(
                0,
                [
                    "Traceback (most recent call last):",
                    *MLP_FRAMES,
                    f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {request}. GPU 0 has a total capacity of "
                    f"{capacity} of which {free} is free. Including non-PyTorch memory, this process has {in_use} memory in use. "
                    f"Of the allocated memory {allocated} is allocated by PyTorch, and {slack} is reserved by PyTorch but "
                    "unallocated. If reserved but unallocated memory is large try setting "
                    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory "
                    "Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)",
                ],
            )
        )
        + "\n"
    )


@dataclass
class Case:
    name: str
    family: str
    text: str
    source: str


CASES = [
    Case(
        "bridge-summary-oom-partial-offload",
        "1 (Bridge start-up summary)",
        bridge_oom("startup-summary-optimizer-offload-050.log"),
        "The Configuration Summary block is real: Megatron-Bridge 0.3.1 `log_non_default_values()` for a "
        "Llama-3.2-1B config with optimizer offloading at 0.5 (fixtures/bridge-0.3.1/"
        "startup-summary-optimizer-offload-050.log, tools/record_bridge_summary.py). It is followed by a rank-0 "
        "traceback ending in the real torch 2.11 capacity OOM (shared/reference) with the last MCore frames of "
        "fixtures/oom-partial-optimizer-offload-bridge. Before issue 13 this was a plain capacity OOM with the "
        "config unknown; the summary says optimizer offloading is on at 0.5.",
    ),
    Case(
        "bridge-summary-no-offload-oom",
        "1 (Bridge start-up summary)",
        bridge_oom("startup-summary-no-offload.log"),
        "As bridge-summary-oom-partial-offload, with the real summary of the same config without optimizer "
        "offloading (fixtures/bridge-0.3.1/startup-summary-no-offload.log). The summary does not list "
        "optimizer_cpu_offload, so it is the Megatron-Core default (False): a capacity OOM, and no optimizer-"
        "offload finding may be made up from the defaults.",
    ),
    Case(
        "oom-nccl-alloc-every-rank",
        "2 (other failure wordings)",
        nccl_oom_every_rank(),
        "NCCL's own buffer allocation failing on every rank: `include/alloc.h:228 NCCL WARN Cuda failure 2 'out of "
        "memory'` and `Failed to CUDA calloc` (quoted in issue 13 from public threads; host:pid:tid [dev] prefix as "
        "NCCL prints it), then torch's DistBackendError `unhandled cuda error` with NCCL's `Last error:` "
        "`Cuda failure 'out of memory'` under each rank's `[rankN]:` prefix. Ranks 0-7 on one host; host names, "
        "pids and the NCCL version are illustrative.",
    ),
    Case(
        "oom-cuda-error-no-figures",
        "2 (other failure wordings)",
        cuda_error_oom(),
        "`RuntimeError: CUDA error: out of memory` as the CUDA runtime reports it through torch (the c10 CUDA error "
        "text with its three hint lines, as quoted in issue 13 and public PyTorch threads), after the real MCore "
        "frames of fixtures/oom-partial-optimizer-offload-bridge. No allocator figures: still an OOM finding, "
        "which says what to collect next time.",
    ),
    Case(
        "oom-old-cached-wording",
        "2 (other failure wordings)",
        old_oom(),
        "The oldest `RuntimeError: CUDA out of memory.` form (torch <= 1.3, `… cached)`), figures as in a widely "
        "quoted public PyTorch thread; a minimal traceback around it. 9.28 GiB was free for 12.50 MiB asked: no "
        "shortage of memory, which the report says.",
    ),
    Case(
        "nccl-ub-registration",
        "2 (other failure wordings)",
        nccl_ub_registration(),
        "NCCL user-buffer registration failing on InfiniBand with `--use-nccl-ub`: `misc/ibvwrap.cc:178 NCCL WARN "
        "Call to ibv_reg_mr_iova2 failed with error Bad address` (quoted in issue 13 from a public thread) on three "
        "ranks, then torch's DistBackendError `invalid usage` and `ncclInvalidUsage` on the same ranks. The launch "
        "line (with --use-nccl-ub) is what a Slurm `set -x` script echoes.",
    ),
    Case(
        "excerpt-megatron-validate-args",
        "3 (pasted excerpts)",
        validate_args_excerpt(),
        "A pasted excerpt that stops at the frame's source line: Megatron-LM's `validate_args` PP divisibility "
        "assertion, `assert num_layers % args.transformer_pipeline_model_parallel_size == 0, \\` (the line "
        "quoted in issue 13), with the launch line (30 layers, PP 4, VPP 2). The frames above it follow "
        "Megatron-LM's pretrain -> initialize_megatron -> validate_args path; line numbers are illustrative. "
        "It must be shown as the failure, and must not become a VPP finding: 30 layers do not split over 4 "
        "stages, which validate_args rejects before any VPP check.",
    ),
    Case(
        "excerpt-device-assert",
        "3 (pasted excerpts)",
        device_assert(),
        "CUDA device-side assertions as PyTorch kernels print them (`IndexKernel.cu:92: operator(): block: […], "
        'thread: […] Assertion `… "index out of bounds"` failed.`, the wording quoted in issue 13), four threads, '
        "pasted without the RuntimeError that follows them.",
    ),
    Case(
        "excerpt-nccl-warn",
        "3 (pasted excerpts)",
        nccl_warn(),
        "An NCCL WARN line between INFO lines as NCCL_DEBUG=INFO prints them (the IB completion error wording "
        "of NCCL's transport/net_ib.cc, as in public NCCL threads); nothing else was pasted.",
    ),
    Case(
        "bridge-2992-pp-offload-layers-0",
        "4 (known upstream bugs)",
        bridge_2992(),
        "The real traceback of Megatron-Bridge 0.3.1 `ConfigContainer.validate()` (megatron-core 0.16.1) for the "
        "model config Bridge#2992 produced: `activation_offload_layers: 0` taken as on, so cpu_offloading=True "
        "with cpu_offloading_num_layers=0 and PP 2 (fixtures/bridge-0.3.1/validate-error-pp2-offload-layers-0.log, "
        "tools/record_bridge_summary.py), under torchrun's `[rank0]:` prefix. Diagnosed with the override file "
        "the user wrote (`bridge-override-pp2-offload-layers-0.yaml`: PP 2, zero offloaded layers), whose shape "
        "contradicts the error and reveals the bug.",
    ),
    Case(
        "oom-close-call-16gb",
        "5 (fragmentation on small GPUs)",
        close_call("15.77 GiB", "546.00 MiB", "736.86 MiB", "14.04 GiB", "312.81 MiB", "15.46 GiB"),
        "A real OOM from a public thread on a 16 GB GPU: 736.86 MiB reserved but unallocated against a 546 MiB "
        "request (the two figures and the card quoted in issue 13; expandable segments were the fix there). The "
        "other figures are filled in consistently (capacity of a 16 GB card as torch prints it). Slack >= request "
        "but 4.6 % of the GPU: a close call before issue 27; by its rule (free + slack >= request) fragmentation.",
    ),
    Case(
        "oom-close-call-v100",
        "5 (fragmentation on small GPUs)",
        close_call("31.75 GiB", "786.00 MiB", "1.15 GiB", "29.87 GiB", "438.19 MiB", "31.32 GiB"),
        "A real OOM from a public thread on a 32 GB V100: 1.15 GiB reserved but unallocated against a 786 MiB "
        "request (figures quoted in issue 13); the others filled in consistently. 3.6 % of the GPU: a close call "
        "before issue 27; by its rule (free + slack >= request) fragmentation.",
    ),
]


def source_md(case: Case) -> str:
    return (
        f"# {case.name}\n\nIssue 13, family {case.family}. Composed by `tools/compose_log_formats.py`.\n\n"
        + case.source
        + "\n"
    )


def main() -> int:
    check = "--check" in sys.argv[1:]
    stale = []
    for case in CASES:
        target = FIXTURES / case.name
        for name, text in (("job.log", case.text), ("SOURCE.md", source_md(case))):
            path = target / name
            if path.exists() and path.read_text() == text:
                continue
            stale.append(str(path))
            if not check:
                target.mkdir(exist_ok=True)
                path.write_text(text)
    if check:
        print("\n".join(stale) if stale else "up to date")
        return 1 if stale else 0
    print(f"wrote {len(stale)} file(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
