"""Canonical config keys and every spelling that maps to them.

Canonical names follow Megatron-Bridge's `ConfigContainer` (`section.field`). A Megatron-LM argument
`field` or flag `--field-name` maps to the canonical key whose field it is; a few flags have other names.
Keys we do not know are kept under the name they were given, so nothing read is dropped.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class KnownKey:
    canonical: str
    description: str
    aliases: tuple[str, ...] = ()


KNOWN_KEYS: tuple[KnownKey, ...] = (
    KnownKey("model.cpu_offloading", "activation offloading master switch",
             ("--cpu-offloading",)),
    KnownKey("model.cpu_offloading_num_layers", "transformer layers whose activations are offloaded",
             ("activation_offload_layers", "model.activation_offload_layers")),
    KnownKey("model.cpu_offloading_activations", "offload activations"),
    KnownKey("model.cpu_offloading_weights", "offload weights"),
    KnownKey("model.cpu_offloading_double_buffering", "double-buffer offloaded layers"),
    KnownKey("model.fine_grained_activation_offloading", "module-level activation offloading"),
    KnownKey("model.num_layers", "transformer layers", ("encoder_num_layers",)),
    KnownKey("model.pipeline_model_parallel_size", "pipeline-parallel size (PP)", ("--pp-size",)),
    KnownKey("model.virtual_pipeline_model_parallel_size", "virtual pipeline stages per rank (VPP)"),
    KnownKey("model.tensor_model_parallel_size", "tensor-parallel size (TP)"),
    KnownKey("model.num_layers_in_first_pipeline_stage", "layers on the first pipeline stage",
             ("decoder_first_pipeline_num_layers", "--decoder-first-pipeline-num-layers")),
    KnownKey("model.num_layers_in_last_pipeline_stage", "layers on the last pipeline stage",
             ("decoder_last_pipeline_num_layers", "--decoder-last-pipeline-num-layers")),
    KnownKey("model.recompute_granularity", "activation recompute: full, selective or None"),
    KnownKey("model.recompute_method", "activation recompute method"),
    KnownKey("model.cuda_graph_impl", "CUDA graph implementation: none, local or transformer_engine"),
    KnownKey("model.enable_cuda_graph", "CUDA graphs (older MCore releases)"),
    KnownKey("model.external_cuda_graph", "CUDA graphs captured outside MCore (older releases)"),
    KnownKey("model.transformer_impl", "transformer implementation: local or transformer_engine"),
    KnownKey("optimizer.optimizer", "optimizer name: adam, sgd …"),
    KnownKey("optimizer.optimizer_cpu_offload", "optimizer offloading master switch (HybridDeviceOptimizer)"),
    KnownKey("optimizer.optimizer_offload_fraction", "fraction of optimizer state updated on the CPU"),
    KnownKey("optimizer.overlap_cpu_optimizer_d2h_h2d", "overlap optimizer D2H/H2D copies with compute"),
    KnownKey("optimizer.use_torch_optimizer_for_cpu_offload", "torch.optim for the CPU part"),
    KnownKey("optimizer.use_precision_aware_optimizer", "precision-aware optimizer"),
    KnownKey("optimizer.use_distributed_optimizer", "distributed optimizer (shards optimizer state over DP)",
             ("ddp.use_distributed_optimizer",)),
    KnownKey("optimizer.decoupled_weight_decay", "AdamW-style decoupled weight decay"),
    KnownKey("optimizer.offload_optimizer_states", "optimizer-state offloading (Megatron-LM PR 2811)"),
    KnownKey("ddp.nccl_ub", "NCCL user-buffer registration", ("--use-nccl-ub", "use_nccl_ub")),
    KnownKey("env.PYTORCH_CUDA_ALLOC_CONF", "PyTorch caching-allocator settings"),
    KnownKey("env.PYTORCH_ALLOC_CONF", "PyTorch allocator settings (newer name)"),
    KnownKey("env.NCCL_GRAPH_REGISTER", "NCCL buffer registration under CUDA graphs"),
    KnownKey("runtime.te_fused_adam_available", "False when MCore logs that it fell back to torch optimizers"),
    # Derived from the keys above; see config/derived.py.
    KnownKey("allocator.expandable_segments", "expandable_segments:True in the allocator settings"),
    KnownKey("model.layers_per_pipeline_rank", "num_layers // pipeline_model_parallel_size"),
)

_BY_CANONICAL = {known.canonical: known for known in KNOWN_KEYS}


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


def is_known(canonical: str) -> bool:
    return canonical in _BY_CANONICAL


def canonical_key(name: str) -> str:
    """Map any spelling (`--optimizer-cpu-offload`, `optimizer_cpu_offload`, `ddp.use_distributed_optimizer`,
    a nested path whose last part is a known field) to its canonical key; unknown names stay as given."""
    name = name.strip().lstrip("+")
    if name in _ALIASES:
        return _ALIASES[name]
    if name.startswith("--"):
        dashed = name[2:].replace("-", "_")
        return _ALIASES.get(dashed, dashed)
    last = name.rsplit(".", 1)[-1]
    if "." in name and last in _ALIASES and not name.startswith("env."):
        return _ALIASES[last]
    return name


def describe_key(canonical: str) -> str:
    known = _BY_CANONICAL.get(canonical)
    return known.description if known else ""
