#!/usr/bin/env python3
"""Record real megatron-core tracebacks and compose Megatron-LM job logs under fixtures/<case>/.

Needs an interpreter with torch and megatron-core (CI never runs it). Each case runs a tiny launcher
once per rank in a real gloo process group, so the traceback and torch's `[rankN]: ` excepthook prefix
are real; job.log wraps them in the real baseline start-up.

    python3 tools/record_fixtures.py [--python PY] [--shared DIR] [CASE...]   # (re)write fixtures
    python3 tools/record_fixtures.py --check                                  # exit 1 if any would change

--python (or $MCORE_PYTHON; default: the interpreter running this script) runs the launchers: the one
with torch and megatron-core, e.g. a venv made with `pip install torch==2.13.0+cpu megatron-core==0.16.1`.
--shared (or $OFFLOADDOCTOR_SHARED; default: ../shared next to the repository) is the folder holding
logs/megatron-lm-h100-baseline-10iter.log; --baseline names that log directly.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
SHARED = Path(os.environ.get("OFFLOADDOCTOR_SHARED") or ROOT.parent / "shared")
BASELINE_NAME = "megatron-lm-h100-baseline-10iter.log"
BASELINE = SHARED / "logs" / BASELINE_NAME
MCORE_PYTHON = os.environ.get("MCORE_PYTHON") or sys.executable
SHOWN_SITE = "/usr/local/lib/python3.12/dist-packages/"
LAUNCHER = "launch_pretrain_gpt.py"
SHOWN_LAUNCHER = "/workspace/Megatron-LM/" + LAUNCHER
REGENERATE = "python3 tools/record_fixtures.py"
TRACEBACK_START = re.compile(r"^(\[rank\d+\]: )?Traceback \(most recent call last\):")
ARGS_BEGIN, ARGS_END = "---- arguments ----", "-" * 20 + " end of arguments " + "-" * 21
STARTUP_END = "time to initialize megatron"
PREAMBLE = [
    "import torch",
    "import torch.distributed as dist",
    "from megatron.core import parallel_state",
    "from megatron.core.distributed import DistributedDataParallelConfig",
    "from megatron.core.optimizer import OptimizerConfig, get_megatron_optimizer",
    "from megatron.core.transformer import TransformerConfig",
    "from megatron.core.transformer.module import MegatronModule",
    "",
    'dist.init_process_group("gloo")  # rank/world size from env, as under torchrun',
]


class Code(str):
    def __repr__(self) -> str:  # written into the launcher as an expression, not a string
        return str(self)


def call(cls: str, **kwargs) -> str:
    return f"{cls}({', '.join(f'{k}={v!r}' for k, v in kwargs.items())})"


MODEL = {"num_layers": 8, "hidden_size": 2048, "num_attention_heads": 16, "bf16": True}  # baseline
PP4 = {"pipeline_model_parallel_size": 4, "pipeline_dtype": Code("torch.bfloat16")}
ACT = {"cpu_offloading": True, "cpu_offloading_num_layers": 2}
OPT = {"optimizer_cpu_offload": True, "optimizer_offload_fraction": 0.5, "use_precision_aware_optimizer": True}


def tc(**kwargs) -> str:
    return call("TransformerConfig", **{**MODEL, **kwargs})


# MCore's DistributedDataParallel allocates its buffers on CUDA; get_megatron_optimizer reads
# only the parameters and the ddp_config of each model chunk.
TINY_MODEL = (
    "parallel_state.initialize_model_parallel()",
    f"model = MegatronModule({tc()})",
    "model.proj = torch.nn.Linear(8, 8)",
    "model.ddp_config = DistributedDataParallelConfig(use_distributed_optimizer=True)",
)
VPP_NOTE = (
    "megatron-core 0.16.1 runs these VPP checks only for uneven pipelines "
    "(`num_layers_in_first/last_pipeline_stage`, Megatron-LM's "
    "`--decoder-first/last-pipeline-num-layers`); an even split raises nothing in "
    "TransformerConfig. The missing spaces are in the real message."
)
DECOUPLED_NOTE = (
    "The call leaves `use_precision_aware_optimizer` False: without Transformer Engine "
    "`OptimizerConfig.__post_init__` stops earlier (TypeError in `is_te_min_version`). The args "
    "keep it True, as Megatron-LM requires with `--optimizer-cpu-offload`; the assert is the same. "
    "Megatron-LM 0.19 prints no `decoupled_weight_decay` (MCore default True): that line is "
    "inserted. `model` is a bare MegatronModule with a `ddp_config`, standing in for the DDP "
    "wrapper, which needs CUDA."
)


@dataclass(frozen=True)
class Case:
    name: str
    call: str  # the statement that raises: the launcher's last line
    expect: str  # exact final exception line; recording fails otherwise
    args: dict  # Megatron-LM argument overrides, printed with str()
    sig: str = ""  # signature id, when it differs from the case name
    ranks: int = 1
    setup: tuple = ()
    env: dict = field(default_factory=dict)  # set for the ranks and dumped at the top of the log
    interleave: str = "lines"  # "lines": line by line; "blocks": whole per-rank tracebacks
    note: str = ""
    also: tuple = ()  # other findings the log's config gives (the recording had no Transformer Engine)

    @property
    def signature(self) -> str:
        return self.sig or self.name


CASES = [
    Case(
        "pp-cpu-offload",
        tc(**PP4, **ACT),
        "ValueError: Currently there is no support for Pipeline parallelism with CPU offloading",
        {
            "pipeline_model_parallel_size": 4,
            "cpu_offloading_num_layers": 2,
            "world_size": 8,
            "data_parallel_size": 2,
            "transformer_impl": "transformer_engine",
        },
        ranks=8,
    ),
    Case(
        "recompute-cpu-offload",
        tc(**ACT, recompute_granularity="selective"),
        "ValueError: CPU offloading does not work when activation recomputation is enabled",
        {
            "cpu_offloading_num_layers": 2,
            "recompute_granularity": "selective",
            "transformer_impl": "transformer_engine",
        },
    ),
    Case(
        "recompute-cpu-offload-full",
        tc(**ACT, recompute_granularity="full", recompute_method="uniform", recompute_num_layers=1),
        "ValueError: CPU offloading does not work when activation recomputation is enabled",
        {
            "cpu_offloading_num_layers": 2,
            "recompute_granularity": "full",
            "recompute_method": "uniform",
            "recompute_num_layers": 1,
            "transformer_impl": "transformer_engine",
        },
        sig="recompute-cpu-offload",
    ),
    Case(
        "cuda-graph-cpu-offload",
        tc(**ACT, cuda_graph_impl="transformer_engine"),
        "ValueError: CUDA graphs not supported with CPU offloading.",
        {
            "cpu_offloading_num_layers": 2,
            "cuda_graph_impl": "transformer_engine",
            "transformer_impl": "transformer_engine",
        },
        # the recording's megatron-core had no Transformer Engine (its log says so), which TE's graphs need
        also=("cuda-graph-requires-te",),
    ),
    Case(
        "fine-grained-cpu-offload",
        tc(**ACT, fine_grained_activation_offloading=True, offload_modules=["core_attn"]),
        "AssertionError: fine_grained_activation_offloading cannot be enabled with cpu_offloading.",
        {
            "cpu_offloading_num_layers": 2,
            "fine_grained_activation_offloading": True,
            "offload_modules": ["core_attn"],
            "transformer_impl": "transformer_engine",
        },
    ),
    Case(
        "fine-grained-offload-modules",
        tc(fine_grained_activation_offloading=True),
        "AssertionError",
        {"fine_grained_activation_offloading": True, "offload_modules": [], "transformer_impl": "transformer_engine"},
        note=(
            "`--fine-grained-activation-offloading` without `--offload-modules`: the list is megatron-core's default, "
            "empty, and `__post_init__` stops on a bare `assert` (no message: the statement is the traceback's "
            "line above it)."
        ),
    ),
    Case(
        "cpu-offload-num-layers",
        tc(cpu_offloading=True, cpu_offloading_num_layers=8),
        "ValueError: CPU offloading can be done only for layers less than 8",
        {"cpu_offloading_num_layers": 8, "transformer_impl": "transformer_engine"},
    ),
    Case(
        "vpp-layer-divisibility",
        tc(
            num_layers=12,
            **PP4,
            virtual_pipeline_model_parallel_size=2,
            num_layers_in_first_pipeline_stage=2,
            num_layers_in_last_pipeline_stage=4,
        ),
        "ValueError: number of layers on each middle pipeline rank:3 must be divisible by "
        "virtualpipeline parallel degree 2",
        {
            "num_layers": 12,
            "pipeline_model_parallel_size": 4,
            "world_size": 4,
            "virtual_pipeline_model_parallel_size": 2,
            "decoder_first_pipeline_num_layers": 2,
            "decoder_last_pipeline_num_layers": 4,
        },
        ranks=4,
        interleave="blocks",
        note=VPP_NOTE,
    ),
    Case(
        "vpp-layer-divisibility-first-stage",
        tc(num_layers=12, **PP4, virtual_pipeline_model_parallel_size=2, num_layers_in_first_pipeline_stage=3),
        "ValueError: number of layers at first stage: 3must be divisible by virtual pipelineparallel degree 2",
        {
            "num_layers": 12,
            "pipeline_model_parallel_size": 4,
            "world_size": 4,
            "virtual_pipeline_model_parallel_size": 2,
            "decoder_first_pipeline_num_layers": 3,
        },
        sig="vpp-layer-divisibility",
        ranks=4,
        interleave="blocks",
        note=VPP_NOTE,
    ),
    Case(
        "vpp-layer-divisibility-even-split",
        "get_num_layers_to_build(config, vp_stage=0)",
        "AssertionError: num_layers_per_pipeline_rank 20             should be divisible by vp_size 12",
        {
            "num_layers": 40,
            "pipeline_model_parallel_size": 2,
            "world_size": 2,
            "virtual_pipeline_model_parallel_size": 12,
        },
        sig="vpp-layer-divisibility",
        ranks=2,
        setup=(
            "parallel_state.initialize_model_parallel(pipeline_model_parallel_size=2)",
            "from megatron.core.transformer.transformer_block import get_num_layers_to_build",
            f"config = {tc(num_layers=40, pipeline_model_parallel_size=2, pipeline_dtype=Code('torch.bfloat16'), virtual_pipeline_model_parallel_size=12)}",
        ),
        interleave="blocks",
        note=(
            "An even split passes TransformerConfig (see the uneven cases) and fails when the model is built: "
            "`get_num_layers_to_build` asserts, its f-string's line continuation keeping 13 spaces before "
            "`should`. Megatron-Bridge PR #5893 met it at 40 layers, PP 2, VP 12 "
            "(https://github.com/NVIDIA-NeMo/Megatron-Bridge/pull/5893); the same shape here."
        ),
    ),
    Case(
        "nccl-ub-expandable-segments",
        call("DistributedDataParallelConfig", nccl_ub=True),
        "ValueError: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True is currently not supported "
        "with nccl_ub due to compatibility issue with torch.cuda.MemPool API.",
        {"nccl_ub": True, "world_size": 4, "data_parallel_size": 4},
        ranks=4,
        env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"},
    ),
    Case(
        "optimizer-offload-precision-aware",
        call("OptimizerConfig", **OPT, optimizer="sgd", use_distributed_optimizer=True),
        "AssertionError: --use-precision-aware-optimizer only supported with adam",
        {**OPT, "optimizer": "sgd"},
    ),
    Case(
        "optimizer-offload-requires-distributed-optimizer",
        call("OptimizerConfig", **OPT, use_distributed_optimizer=False),
        "AssertionError: --use-precision-aware-optimizer only supported with distributed optimizer",
        {**OPT, "use_distributed_optimizer": False},
    ),
    Case(
        "optimizer-offload-decoupled-weight-decay",
        "get_megatron_optimizer("
        + call(
            "OptimizerConfig",
            optimizer_cpu_offload=True,
            optimizer_offload_fraction=0.5,
            use_distributed_optimizer=True,
            decoupled_weight_decay=False,
        )
        + ", [model])",
        "AssertionError: CPU offloading only supported with decoupled_weight_decay enabled (AdamW mode).",
        {**OPT, "decoupled_weight_decay": False},
        setup=TINY_MODEL,
        note=DECOUPLED_NOTE,
    ),
    Case(
        "local-impl-sequence-parallel",
        call(
            "WrappedTorchNorm", config=Code(tc(tensor_model_parallel_size=2, sequence_parallel=True)), hidden_size=2048
        ),
        "AssertionError: sequence parallel not supported by torch LayerNorm",
        {
            "tensor_model_parallel_size": 2,
            "sequence_parallel": True,
            "world_size": 2,
            "data_parallel_size": 1,
            "transformer_impl": "local",
        },
        ranks=2,
        setup=("from megatron.core.transformer.torch_norm import WrappedTorchNorm",),
        note=(
            "The local implementation builds every norm through WrappedTorchNorm (its layer spec's LNImpl); the "
            "launcher builds one with the run's config, as the first layer does."
        ),
    ),
    Case(
        "expert-grid-divides-world",
        "parallel_state.initialize_model_parallel(expert_model_parallel_size=8)",
        "RuntimeError: world_size (4) is not divisible by expert_tensor_model_pipeline_parallel size (8)",
        {
            "num_experts": 8,
            "expert_model_parallel_size": 8,
            "world_size": 4,
            "data_parallel_size": 4,
            "transformer_impl": "transformer_engine",
        },
        ranks=4,
        note=(
            "initialize_model_parallel raises it after building the dense grid (TP x PP x CP x DP = 4 divides the "
            "world): expert TP (TP when unset) x EP x PP = 1 x 8 x 1 does not."
        ),
    ),
    Case(
        "moe-pad-requires-capacity-factor",
        tc(num_moe_experts=8, moe_pad_expert_input_to_capacity=True),
        "ValueError: moe_expert_capacity_factor must be set to use moe_pad_expert_input_to_capacity",
        {"num_experts": 8, "moe_pad_expert_input_to_capacity": True, "transformer_impl": "transformer_engine"},
        note=(
            "TransformerConfig.__post_init__ raises it whatever num_moe_experts is, and for a negative factor too "
            "(set to None, dropless, a few lines earlier)."
        ),
    ),
    Case(
        "moe-capacity-factor-load-balancing",
        tc(num_moe_experts=8, moe_expert_capacity_factor=1.0, moe_router_load_balancing_type="sinkhorn"),
        "ValueError: moe_expert_capacity_factor only works with aux_loss, seq_aux_loss, global_aux_loss or none "
        "load balancing",
        {
            "num_experts": 8,
            "moe_expert_capacity_factor": 1.0,
            "moe_router_load_balancing_type": "sinkhorn",
            "transformer_impl": "transformer_engine",
        },
        note=(
            "The check runs for any factor that is not None, a negative one too (set to None in the same block, "
            "before the check), and for a list of types when any element is outside the four."
        ),
    ),
]


def launcher_source(case: Case) -> str:
    return "\n".join(PREAMBLE + list(case.setup) + [case.call, ""])


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def record(case: Case, python: str, site: str) -> list[list[str]]:
    """Run the launcher once per rank; return each rank's traceback lines, paths rewritten."""
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / LAUNCHER
        script.write_text(launcher_source(case), encoding="utf-8")
        env = {k: v for k, v in os.environ.items() if k != "PYTORCH_CUDA_ALLOC_CONF"}
        env.update(
            case.env,
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=str(free_port()),
            WORLD_SIZE=str(case.ranks),
            PYTHONDONTWRITEBYTECODE="1",
        )
        procs = [
            subprocess.Popen(
                [python, str(script)],
                cwd=tmp,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
                env={**env, "RANK": str(r), "LOCAL_RANK": str(r)},
            )
            for r in range(case.ranks)
        ]
        outputs = [(p.communicate(timeout=600)[1], p.returncode) for p in procs]
    tracebacks = []
    for rank, (stderr, code) in enumerate(outputs):
        lines = stderr.splitlines()
        start = next((i for i, line in enumerate(lines) if TRACEBACK_START.match(line)), None)
        if code != 1 or start is None:
            sys.exit(f"{case.name}: rank {rank} exited {code} without a traceback:\n{stderr}")
        tb = [line.replace(site, SHOWN_SITE).replace(str(script), SHOWN_LAUNCHER) for line in lines[start:]]
        if tb[-1] != f"[rank{rank}]: {case.expect}":
            sys.exit(f"{case.name}: rank {rank} raised {tb[-1]!r}, expected {case.expect!r}")
        tracebacks.append(tb)
    return tracebacks


def interleave(case: Case, tracebacks: list[list[str]]) -> list[str]:
    """Merge per-rank outputs deterministically, keeping each rank's own line order."""
    rng = random.Random(case.name)
    if case.interleave == "blocks":
        return [line for rank in rng.sample(range(len(tracebacks)), len(tracebacks)) for line in tracebacks[rank]]
    queues, merged = [list(tb) for tb in tracebacks], []
    while any(queues):
        merged.append(rng.choice([q for q in queues if q]).pop(0))
    return merged


def format_arg(name: str, value: object) -> str:
    return "  {} {} {}".format(name, "." * (48 - len(name)), value)  # Megatron-LM's print_args


def rewrite_args(block: list[str], overrides: dict) -> tuple[list[str], dict, list[str]]:
    """Return the rewritten block, the effective values, and the changes in words."""
    lines = {line.split()[0]: line for line in block}
    values = {name: line[len(format_arg(name, "")) :] for name, line in lines.items()}
    changes = []
    for name, value in overrides.items():
        was = f"`{values[name]}`" if name in values else "no line in the real block, inserted"
        changes.append(f"`{name}`: {was} → `{value}`")
        values[name], lines[name] = str(value), format_arg(name, value)
    return [lines[name] for name in sorted(lines)], values, changes


def rewrite_startup(line: str, values: dict) -> str:
    """Keep the start-up lines that Megatron-LM derives from the arguments consistent."""
    dp, pp = values["data_parallel_size"], values["pipeline_model_parallel_size"]
    microbatches = int(values["global_batch_size"]) // (int(values["micro_batch_size"]) * int(dp))
    for pattern, value in [
        (r"^(using world size: )\d+", values["world_size"]),
        (r"(data-parallel size: )\d+", dp),
        (r"(pipeline-model-parallel size: )\d+", pp),
        (r"^(Number of virtual stages per pipeline stage: ).*", values["virtual_pipeline_model_parallel_size"]),
        (r"(setting number of microbatches to constant )\d+", microbatches),
        (r"^(> initialized pipeline model parallel with size )\d+", pp),
    ]:
        line = re.sub(pattern, lambda m: f"{m.group(1)}{value}", line)  # noqa: B023 - called before the loop moves on
    return line


def recorded_header(line: str, versions: str) -> str:
    """The baseline's `> PyTorch version` / `> Megatron-Core version` lines with the releases that recorded the
    traceback (`versions`: probe_versions' line), so a log's releases are the ones that raised its error."""
    found = re.match(r"megatron-core (\S+) with torch (\S+) on Python", versions)
    if found is None:
        return line
    for label, release in (("PyTorch", found.group(2)), ("Megatron-Core", found.group(1))):
        line = re.sub(rf"^(> {label} version \.+ )\S+$", lambda m: f"{m.group(1)}{release}", line)  # noqa: B023
    return line


def compose_log(case: Case, baseline: list[str], traceback: list[str], versions: str = "") -> tuple[str, list[str]]:
    begin = next(i for i, line in enumerate(baseline) if ARGS_BEGIN in line)
    end = baseline.index(ARGS_END)
    stop = next(i for i, line in enumerate(baseline) if line.startswith(STARTUP_END))
    block, values, changes = rewrite_args(baseline[begin + 1 : end], case.args)
    startup = [recorded_header(rewrite_startup(line, values), versions) for line in baseline[: begin + 1]]
    after = [rewrite_startup(line, values) for line in baseline[end : stop + 1]]
    env_dump = [f"{k}={v}" for k, v in case.env.items()]
    return "\n".join(env_dump + startup + block + after + traceback) + "\n", changes


def expected_yaml(case: Case) -> str:
    lines = [
        "# what `offloaddoctor diagnose job.log` must report",
        f"first: {{id: {case.signature}, verdict: confirmed}}   # verdict: confirmed | contradicted | unknown",
        f"ids: [{', '.join((case.signature, *case.also))}]        # all finding ids expected, most relevant first",
    ]
    if case.ranks > 1:
        lines.append(
            f'ranks: "0-{case.ranks - 1}"                 # compact rank set of the first finding, when multi-rank'
        )
    return "\n".join(lines + ["exit_code: 1", ""])


def source_md(case: Case, versions: str, changes: list[str], log_lines: int) -> str:
    procs = f"{case.ranks} processes (ranks 0-{case.ranks - 1})" if case.ranks > 1 else "one process"
    merge = (
        "line by line (seeded random choice of the next rank, seed = case name)"
        if case.interleave == "lines"
        else "as whole per-rank tracebacks (seeded rank order)"
    )
    env = " ".join(f"{k}={v}" for k, v in case.env.items())
    return "\n".join(
        [
            f"# {case.name}",
            "",
            f"Signature `{case.signature}`. Final exception line, on every rank:",
            "",
            f"    {case.expect}",
            "",
            "## Real",
            "",
            f"- The traceback: recorded by `tools/record_fixtures.py` from {versions}, run as {procs} "
            "in a real gloo process group"
            + (f" with `{env}` set" if env else "")
            + ". The `[rankN]: ` prefixes come from the "
            "excepthook that torch's `init_process_group` installs (as in any torchrun job).",
            f"- Every other line: `{BASELINE_NAME}` (real H100 run, Megatron-LM core_v0.19.0), "
            f"its first line through `{STARTUP_END} ...`.",
            "",
            "## Rewritten",
            "",
            f"- The recording interpreter's site-packages folder → `{SHOWN_SITE}`; the launcher's temporary path → "
            f"`{SHOWN_LAUNCHER}` (a launcher, not Megatron-LM's `pretrain_gpt.py`). The `<string>` "
            "frame line numbers are Python 3.11's although the path says 3.12.",
            "- Argument lines (`print_args` padding, sorted): " + "; ".join(changes) + ".",
            "- Start-up lines derived from the arguments (world, data-parallel and pipeline sizes, "
            "virtual stages, number of microbatches) follow them.",
            "- The header's `> PyTorch version` and `> Megatron-Core version` lines: the releases that recorded the "
            "traceback (above), not the baseline's.",
            f"- Ranks merged {merge}; start-up lines appear once (rank 0 prints them)."
            if case.ranks > 1
            else "- Single rank: the traceback follows the start-up lines.",
            *(f"- Added an env dump line at the top: `{k}={v}`." for k, v in case.env.items()),
            f"- job.log has {log_lines} lines.",
            "",
            *(["## Note", "", case.note, ""] if case.note else []),
            "## The MCore call (launcher source)",
            "",
            "```python",
            launcher_source(case).rstrip("\n"),
            "```",
            "",
            "## Regenerate",
            "",
            f"    {REGENERATE} {case.name}",
            "",
        ]
    )


def probe_versions(python: str) -> tuple[str, str]:
    """(versions line for SOURCE.md, the interpreter's site-packages folder with a trailing slash)."""
    code = (
        "import sys, sysconfig, torch, megatron.core as m; print(f'megatron-core {m.__version__} with "
        "torch {torch.__version__} on Python {sys.version.split()[0]}'); print(sysconfig.get_paths()['purelib'])"
    )
    try:
        result = subprocess.run([python, "-W", "ignore", "-c", code], capture_output=True, text=True, check=False)
    except OSError as exc:
        sys.exit(f"--python {python}: cannot run it: {exc}")
    if result.returncode != 0:
        sys.exit(
            f"--python {python}: needs torch and megatron-core (set --python or MCORE_PYTHON): "
            f"{(result.stderr.strip().splitlines() or ['exit ' + str(result.returncode)])[-1]}"
        )
    versions, site = result.stdout.strip().splitlines()[-2:]
    return versions, site.rstrip("/") + "/"


def render_case(case: Case, baseline: list[str], python: str, versions: str, site: str) -> dict[str, str]:
    log, changes = compose_log(case, baseline, interleave(case, record(case, python, site)), versions)
    return {
        "job.log": log,
        "expected.yaml": expected_yaml(case),
        "SOURCE.md": source_md(case, versions, changes, log.count("\n")),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if any fixture would change")
    parser.add_argument(
        "--python",
        default=MCORE_PYTHON,
        help="interpreter with torch and megatron-core (default: $MCORE_PYTHON, else this one)",
    )
    parser.add_argument(
        "--shared",
        type=Path,
        default=SHARED,
        help="shared reference folder (default: $OFFLOADDOCTOR_SHARED, else ../shared)",
    )
    parser.add_argument(
        "--baseline", type=Path, default=None, help=f"the baseline log (default: SHARED/logs/{BASELINE_NAME})"
    )
    parser.add_argument("cases", nargs="*", help="case names (default: all)")
    opts = parser.parse_args()
    unknown = set(opts.cases) - {c.name for c in CASES}
    if unknown:
        parser.error(f"unknown case(s): {', '.join(sorted(unknown))}")
    baseline_path = opts.baseline or opts.shared / "logs" / BASELINE_NAME
    try:
        baseline = baseline_path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        parser.error(f"cannot read the baseline log {baseline_path}: {exc.strerror or exc} (see --shared, --baseline)")
    versions, site = probe_versions(opts.python)
    stale = []
    for case in [c for c in CASES if not opts.cases or c.name in opts.cases]:
        for name, text in render_case(case, baseline, opts.python, versions, site).items():
            path = FIXTURES / case.name / name
            if path.exists() and path.read_text(encoding="utf-8") == text:
                continue
            stale.append(path.relative_to(ROOT))
            if not opts.check:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8")
        print(f"{case.name}: {case.expect}", file=sys.stderr)
    for path in stale:
        print(f"{'would change' if opts.check else 'written'}: {path}", file=sys.stderr)
    return 1 if opts.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
