"""Canonical config keys and every spelling that maps to them.

Canonical names follow Megatron-Bridge's `ConfigContainer` (`section.field`). A Megatron-LM argument
`field` or flag `--field-name` maps to the canonical key whose field it is; a few flags have other names.
Keys we do not know are kept under the name they were given, so nothing read is dropped.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

from offloaddoctor.config.printed import parse_override


class KnownKey(NamedTuple):
    canonical: str
    description: str
    aliases: tuple[str, ...] = ()
    kind: str | None = None  # what its value must be (megatron-core's dataclass field): bool, int or number
    choices: tuple[str, ...] = ()  # the only values it takes (a Literal field), when it has such a list


KNOWN_KEYS: tuple[KnownKey, ...] = (
    KnownKey("model.cpu_offloading", "activation offloading master switch", ("--cpu-offloading",), kind="bool"),
    KnownKey(
        "model.cpu_offloading_num_layers",
        "transformer layers whose activations are offloaded",
        ("activation_offload_layers", "model.activation_offload_layers"),
        kind="int",
    ),
    KnownKey("model.cpu_offloading_activations", "offload activations", kind="bool"),
    KnownKey("model.cpu_offloading_weights", "offload weights", kind="bool"),
    KnownKey("model.cpu_offloading_double_buffering", "double-buffer offloaded layers", kind="bool"),
    KnownKey("model.fine_grained_activation_offloading", "module-level activation offloading", kind="bool"),
    KnownKey("model.offload_modules", "the modules whose inputs fine-grained activation offloading moves to the CPU"),
    KnownKey("model.num_layers", "transformer layers", ("encoder_num_layers",), kind="int"),
    KnownKey("model.pipeline_model_parallel_size", "pipeline-parallel size (PP)", ("--pp-size",), kind="int"),
    KnownKey(
        "model.virtual_pipeline_model_parallel_size",
        "virtual pipeline stages per rank (VPP)",
        ("num_virtual_stages_per_pipeline_rank", "--num-virtual-stages-per-pipeline-rank"),
        kind="int",
    ),
    KnownKey(
        "model.num_layers_per_virtual_pipeline_stage",
        "layers per virtual pipeline stage (Megatron-LM's other way to set VPP)",
        kind="int",
    ),
    KnownKey("model.tensor_model_parallel_size", "tensor-parallel size (TP)", kind="int"),
    KnownKey(
        "model.num_layers_in_first_pipeline_stage",
        "layers on the first pipeline stage",
        ("decoder_first_pipeline_num_layers", "--decoder-first-pipeline-num-layers"),
        kind="int",
    ),
    KnownKey(
        "model.num_layers_in_last_pipeline_stage",
        "layers on the last pipeline stage",
        ("decoder_last_pipeline_num_layers", "--decoder-last-pipeline-num-layers"),
        kind="int",
    ),
    KnownKey(
        "model.recompute_granularity",
        "activation recompute: full, selective or None",
        choices=("full", "selective"),  # Megatron-LM arguments.py, TransformerConfig (megatron-core 0.19.0)
    ),
    KnownKey("model.recompute_method", "activation recompute method", choices=("uniform", "block")),
    KnownKey(
        "model.cuda_graph_impl",
        "CUDA graph implementation: none, local or transformer_engine",
        choices=("none", "local", "transformer_engine", "full_iteration"),  # TransformerConfig, megatron-core 0.19.0
    ),
    KnownKey("model.enable_cuda_graph", "CUDA graphs (older MCore releases)", kind="bool"),
    KnownKey("model.external_cuda_graph", "CUDA graphs captured outside MCore (older releases)", kind="bool"),
    KnownKey(
        "model.transformer_impl",
        "transformer implementation: local or transformer_engine",
        choices=("local", "transformer_engine", "inference_optimized"),  # TransformerConfig, megatron-core 0.19.0
    ),
    KnownKey("optimizer.optimizer", "optimizer name: adam, sgd …"),
    KnownKey(
        "train.manual_gc",
        "garbage collection by Megatron: gc.collect() before training, then on an interval",
        kind="bool",
    ),
    KnownKey(
        "dataset.num_workers",
        "data-loader worker processes a data-loading rank forks (Megatron-LM's default 2, Bridge's 8)",
        kind="int",
    ),
    KnownKey(
        "dataset.dataloader_type",
        "how batches are drawn: single, cyclic, batch (Bridge's fine-tuning) or external",
        choices=("single", "cyclic", "batch", "external"),  # Megatron-LM arguments.py, Bridge DataloaderConfig
    ),
    KnownKey(
        "dataset.persistent_workers", "data-loader workers kept between passes (Bridge's default: not)", kind="bool"
    ),
    KnownKey("dataset.split", "train, validation and test weights of one data path, e.g. 969,30,1"),
    KnownKey("dataset.full_validation", "validate on the whole validation set (a cyclic loader)", kind="bool"),
    KnownKey("train.train_iters", "training iterations", kind="int"),
    KnownKey("train.eval_iters", "iterations of each evaluation (0: none)", kind="int"),
    KnownKey("train.eval_interval", "iterations between evaluations", kind="int"),
    KnownKey("train.skip_train", "evaluation only, no training", kind="bool"),
    KnownKey(
        "train.manual_gc_interval", "iterations between Megatron's manual garbage collections (0: never)", kind="number"
    ),
    KnownKey(
        "optimizer.optimizer_cpu_offload", "optimizer offloading master switch (HybridDeviceOptimizer)", kind="bool"
    ),
    KnownKey("optimizer.optimizer_offload_fraction", "fraction of optimizer state updated on the CPU", kind="number"),
    KnownKey("optimizer.overlap_cpu_optimizer_d2h_h2d", "overlap optimizer D2H/H2D copies with compute", kind="bool"),
    KnownKey("optimizer.use_torch_optimizer_for_cpu_offload", "torch.optim for the CPU part", kind="bool"),
    KnownKey("optimizer.use_precision_aware_optimizer", "precision-aware optimizer", kind="bool"),
    KnownKey("optimizer.clip_grad", "gradient clipping by the global norm (0: off)", kind="number"),
    KnownKey(
        "optimizer.use_distributed_optimizer",
        "distributed optimizer (shards optimizer state over DP)",
        ("ddp.use_distributed_optimizer",),
        kind="bool",
    ),
    KnownKey("optimizer.decoupled_weight_decay", "AdamW-style decoupled weight decay", kind="bool"),
    KnownKey("optimizer.offload_optimizer_states", "optimizer-state offloading (Megatron-LM PR 2811)", kind="bool"),
    KnownKey("ddp.nccl_ub", "NCCL user-buffer registration", ("--use-nccl-ub", "use_nccl_ub"), kind="bool"),
    KnownKey("env.PYTORCH_CUDA_ALLOC_CONF", "PyTorch caching-allocator settings"),
    KnownKey("env.PYTORCH_ALLOC_CONF", "PyTorch allocator settings (newer name)"),
    KnownKey("env.NCCL_GRAPH_REGISTER", "NCCL buffer registration under CUDA graphs"),
    KnownKey("env.OMP_NUM_THREADS", "OpenMP threads a process (torchrun sets 1 when it starts several)"),
    KnownKey("env.NVTE_CPU_OFFLOAD_V1", "Transformer Engine 2.10+: 1 selects its first CPU-offload implementation"),
    KnownKey(
        "runtime.megatron_bridge_version", "megatron-bridge version, from a pip list / pip freeze line in the log"
    ),
    KnownKey(
        "runtime.megatron_core_version",
        "megatron-core version, from a pip list / pip freeze line or Megatron-LM's `> Megatron-Core version` line",
    ),
    KnownKey("runtime.torch_version", "PyTorch version, from Megatron-LM's `> PyTorch version` start-up line"),
    KnownKey(
        "runtime.trained_parameter_share",
        "share of the parameters that train (a LoRA run's adapters), where a log's gradient buckets say most are frozen",
        kind="number",
    ),
    KnownKey(
        "runtime.te_fused_adam_available", "False when MCore logs that it fell back to torch optimizers", kind="bool"
    ),
    # Read by the memory model (memory/shape.py).
    KnownKey("model.hidden_size", "hidden size", kind="int"),
    KnownKey("model.num_attention_heads", "attention heads", kind="int"),
    KnownKey("model.num_query_groups", "key/value heads (grouped-query attention)", kind="int"),
    KnownKey("model.kv_channels", "attention head size", kind="int"),
    KnownKey("model.ffn_hidden_size", "MLP hidden size", kind="int"),
    KnownKey("model.seq_length", "sequence length", ("dataset.sequence_length",), kind="int"),
    KnownKey("model.max_position_embeddings", "learned position embeddings"),
    KnownKey("model.position_embedding_type", "learned_absolute, rope or none"),
    KnownKey("model.vocab_size", "vocabulary size before padding", kind="int"),
    KnownKey("model.make_vocab_size_divisible_by", "vocabulary padding multiple (times TP)"),
    KnownKey("model.gated_linear_unit", "gated MLP (SwiGLU)", ("swiglu", "--swiglu"), kind="bool"),
    KnownKey("model.normalization", "LayerNorm or RMSNorm"),
    KnownKey("model.add_bias_linear", "biases in linear layers", kind="bool"),
    KnownKey("model.share_embeddings_and_output_weights", "tied input and output embeddings", kind="bool"),
    KnownKey("model.hidden_dropout", "hidden dropout probability"),
    KnownKey("model.attention_dropout", "attention dropout probability"),
    KnownKey("model.num_moe_experts", "routed experts (MoE)", ("num_experts", "--num-experts"), kind="int"),
    KnownKey("model.moe_ffn_hidden_size", "expert MLP hidden size"),
    KnownKey("model.moe_router_topk", "experts per token", kind="int"),
    KnownKey("model.moe_shared_expert_intermediate_size", "shared-expert MLP hidden size"),
    KnownKey("model.moe_router_pre_softmax", "router softmax over every expert before top-k (MoE)", kind="bool"),
    KnownKey("model.moe_token_dispatcher_type", "MoE token dispatcher: allgather, alltoall or flex"),
    KnownKey(
        "model.moe_expert_capacity_factor",
        "tokens an expert takes, over its balanced share; the rest are dropped (MoE; None: dropless)",
        kind="number",
    ),
    KnownKey("model.moe_pad_expert_input_to_capacity", "pad every expert's tokens to its capacity (MoE)", kind="bool"),
    KnownKey(
        "model.moe_router_load_balancing_type",
        "MoE router balancing: aux_loss, seq_aux_loss, global_aux_loss, sinkhorn, none … (or a list of them)",
    ),
    KnownKey("model.bias_activation_fusion", "fused bias and activation (SwiGLU/GELU)", kind="bool"),
    KnownKey("model.moe_grouped_gemm", "experts as one grouped GEMM (MoE)", kind="bool"),
    KnownKey("model.moe_permute_fusion", "fused token permutation (MoE, Transformer Engine)", kind="bool"),
    KnownKey("model.expert_model_parallel_size", "expert-parallel size (EP)", kind="int"),
    KnownKey("model.expert_tensor_parallel_size", "tensor-parallel size inside experts"),
    KnownKey("model.context_parallel_size", "context-parallel size (CP)", kind="int"),
    KnownKey("model.sequence_parallel", "sequence parallelism (with TP)", kind="bool"),
    KnownKey("model.recompute_num_layers", "layers per recompute chunk"),
    KnownKey("model.recompute_modules", "modules selective recompute covers"),
    KnownKey("model.bf16", "bf16 mixed precision", kind="bool"),
    KnownKey("model.fp16", "fp16 mixed precision", kind="bool"),
    KnownKey(
        "mixed_precision",
        "Megatron-Bridge's precision recipe (bf16_mixed, fp16_mixed, ...; null: none), set over model.bf16/fp16 at start-up",
    ),
    KnownKey("train.micro_batch_size", "micro-batch size", kind="int"),
    KnownKey("train.global_batch_size", "global batch size", kind="int"),
    KnownKey(
        "ddp.grad_reduce_in_fp32",
        "gradients accumulated and reduced in fp32",
        ("accumulate_allreduce_grads_in_fp32", "--accumulate-allreduce-grads-in-fp32"),
        kind="bool",
    ),
    KnownKey("optimizer.main_params_dtype", "master-weight dtype (precision-aware optimizer)"),
    KnownKey("optimizer.exp_avg_dtype", "Adam first-moment dtype (precision-aware optimizer)"),
    KnownKey("optimizer.exp_avg_sq_dtype", "Adam second-moment dtype (precision-aware optimizer)"),
    # Computed by the memory model when a GPU is named (check/estimate --gpu); never read from a config.
    KnownKey("memory.fits", "the memory estimate fits the GPU (check --gpu)"),
    KnownKey("memory.host_fits", "optimizer offloading's host memory fits the node (check --host-memory)"),
    # Derived from the keys above; see config/derived.py.
    KnownKey("allocator.expandable_segments", "expandable_segments:True in the allocator settings", kind="bool"),
    KnownKey("model.layers_per_pipeline_rank", "num_layers // pipeline_model_parallel_size"),
    KnownKey(
        "parallel.run_world_size",
        "the run's GPUs: world_size, or DP x TP x PP x CP, or the launch command's process count",
        kind="int",
    ),
    KnownKey(
        "parallel.expert_grid_size", "expert TP (TP when unset) x EP x PP, which must divide the world", kind="int"
    ),
    KnownKey(
        "model.offload_modules_refused",
        "fine-grained activation offloading's module list is one megatron-core refuses",
        kind="bool",
    ),
    # Megatron-Bridge's ConfigContainer.peft; FlagScale's model.peft_type, ms-swift's train_type, LLaMA-Factory's
    # finetuning_type: `lora` and the like train adapters over a frozen model
    KnownKey(
        "peft", "parameter-efficient fine-tuning (LoRA, adapters)", ("peft_type", "train_type", "finetuning_type")
    ),
    KnownKey("launcher.flagscale", "the run is launched through FlagScale's runner (config/derived.py)", kind="bool"),
)
# Keys whose value is a list of names: one name after the flag is a list of one.
LIST_KEYS = frozenset({"model.recompute_modules", "model.offload_modules"})

_BY_CANONICAL = {known.canonical: known for known in KNOWN_KEYS}

# The type a known key's value must have; None (`null`) is always allowed.
VALUE_KINDS: dict[str, str] = {known.canonical: known.kind for known in KNOWN_KEYS if known.kind}
VALUE_CHOICES: dict[str, tuple[str, ...]] = {known.canonical: known.choices for known in KNOWN_KEYS if known.choices}


# Megatron-Bridge (0.3.1, training/config.py and setup.py) keeps two values the memory model reads outside
# `model:` too. `ConfigContainer.validate` asserts that `model.seq_length` equals the dataset's: a
# GPTDatasetConfig writes it as MCore's `sequence_length`, a FinetuningDatasetConfig as `seq_length`. A
# `model.vocab_size` of null means the tokenizer's (`_validate_and_set_vocab_size`). So these paths stand in
# for their model key: a value under `model:` wins over them, and a null one there yields to them.
BRIDGE_FALLBACKS = {
    "dataset.sequence_length": "model.seq_length",
    "dataset.seq_length": "model.seq_length",
    "tokenizer.vocab_size": "model.vocab_size",
}


def _build_aliases() -> dict[str, str]:
    aliases: dict[str, str] = {}
    for known in KNOWN_KEYS:
        section, _, field = known.canonical.partition(".")
        spellings = [known.canonical, *known.aliases]
        if section != "env":
            spellings += [field, "--" + field.replace("_", "-")]
        else:
            spellings.append(field)
        for spelling in spellings:
            aliases.setdefault(spelling, known.canonical)
    return aliases


_ALIASES = _build_aliases()


# Megatron-LM's settings before recompute_granularity (2022): `--checkpoint-activations` recomputed every layer in
# full (its successor, `--recompute-activations`, means selective). Read as the setting that replaced them.
_LEGACY = {"checkpoint_activations": ("model.recompute_granularity", {True: "full", False: None})}


def legacy_setting(name: str, value: object) -> tuple[str, object] | None:
    """A retired setting's (canonical key, value) in today's terms; None for every other name, or a value it never
    took."""
    found = _legacy_entry(name) if isinstance(value, bool) else None
    if found is None:
        return None
    key, values = found
    return key, values[value]


@functools.lru_cache(maxsize=8192)
def _legacy_entry(name: str) -> tuple[str, dict] | None:
    return _LEGACY.get(name.lstrip("-").replace("-", "_"))


def legacy_name(canonical: str) -> str:
    """How a source note names the retired setting read as `canonical`."""
    return next(f"{old} (Megatron-LM before 2022)" for old, (key, _) in _LEGACY.items() if key == canonical)


def is_known(canonical: str) -> bool:
    return canonical in _BY_CANONICAL


FLAGSCALE_ENVS = "experiment.envs."  # FlagScale's runner exports these on every node
_FLAGSCALE_RUNNER = {f"experiment.runner.{name}": name for name in ("nproc_per_node", "nnodes")}


@functools.lru_cache(maxsize=8192)  # a rank log's arguments block names ~900 settings, each rank log the same ones
def canonical_key(name: str) -> str:
    """Map any spelling (`--optimizer-cpu-offload`, `optimizer_cpu_offload`, `ddp.use_distributed_optimizer`,
    a nested path whose last part is a known field) to its canonical key; unknown names stay as given."""
    name = name.strip().lstrip("+")
    if name in _ALIASES:
        return _ALIASES[name]
    if name.startswith("--"):
        dashed = name[2:].replace("-", "_")
        return _ALIASES.get(dashed, dashed)
    if name.startswith(FLAGSCALE_ENVS):  # FlagScale's environment: `experiment.envs.NAME`
        return "env." + name[len(FLAGSCALE_ENVS) :]
    if name in _FLAGSCALE_RUNNER:  # the job geometry FlagScale's runner gives torchrun
        return _FLAGSCALE_RUNNER[name]
    last = name.rsplit(".", 1)[-1]
    if "." in name and last in _ALIASES and not name.startswith("env."):
        return _ALIASES[last]
    return name


def known_spellings() -> list[str]:
    """Every canonical key and alias (for "did you mean")."""
    return sorted(set(_ALIASES) | set(_BY_CANONICAL))


def parse_value(key: str, raw: str) -> object:
    """An override's value for a canonical key: a word among the key's choices stays that word (`none` is a
    cuda_graph_impl, which megatron-core asserts is a string, not null); anything else as parse_override reads it."""
    text = raw.strip()
    return text if text in VALUE_CHOICES.get(key, ()) else parse_override(raw)
