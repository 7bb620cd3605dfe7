"""Framework defaults for keys a config leaves out, used by `check` (a launch sees these values).

The one table of Megatron-Core defaults, read from the dataclass fields of megatron-core 0.19.0 (`TransformerConfig`,
`ModelParallelConfig`, `OptimizerConfig`, `DistributedDataParallelConfig`), the release the memory model was
calibrated on and the recordings ran (memory/calibration.py); every value here is the same in 0.16.1, the release
Bridge 0.3.1's start-up summary compares against (config/bridge_summary.py reads this table too).
`offload_optimizer_states` is in neither release and defaults to off in Megatron-LM PR 2811. `diagnose` does not use them: a log without an arguments block says
nothing about the run's values, so there an unset key stays unknown.
"""

from __future__ import annotations

from offloaddoctor.config.values import ConfigStore, Resolved, Source

MCORE_VERSION = "0.19.0"

DEFAULTS: dict[str, tuple[object, str]] = {
    "model.cpu_offloading": (False, "TransformerConfig"),
    "model.cpu_offloading_num_layers": (0, "TransformerConfig"),
    "model.cpu_offloading_activations": (True, "ModelParallelConfig"),
    "model.cpu_offloading_weights": (False, "ModelParallelConfig"),
    "model.fine_grained_activation_offloading": (False, "TransformerConfig"),
    "model.tensor_model_parallel_size": (1, "ModelParallelConfig"),
    "model.sequence_parallel": (False, "ModelParallelConfig"),
    "model.pipeline_model_parallel_size": (1, "TransformerConfig"),
    "model.num_moe_experts": (None, "TransformerConfig"),
    "model.moe_expert_capacity_factor": (None, "TransformerConfig"),
    "model.moe_pad_expert_input_to_capacity": (False, "TransformerConfig"),
    "model.moe_router_load_balancing_type": ("aux_loss", "TransformerConfig"),
    "model.virtual_pipeline_model_parallel_size": (None, "TransformerConfig"),
    "model.num_layers_in_first_pipeline_stage": (None, "TransformerConfig"),
    "model.num_layers_in_last_pipeline_stage": (None, "TransformerConfig"),
    "model.recompute_granularity": (None, "TransformerConfig"),
    "model.cuda_graph_impl": ("none", "TransformerConfig"),
    "model.transformer_impl": ("transformer_engine", "TransformerConfig"),
    "model.enable_cuda_graph": (False, "TransformerConfig"),
    "model.external_cuda_graph": (False, "TransformerConfig"),
    "optimizer.optimizer": ("adam", "OptimizerConfig"),
    "optimizer.optimizer_cpu_offload": (False, "OptimizerConfig"),
    "optimizer.optimizer_offload_fraction": (0.0, "OptimizerConfig"),
    "optimizer.use_distributed_optimizer": (False, "OptimizerConfig"),
    "optimizer.decoupled_weight_decay": (True, "OptimizerConfig"),
    "optimizer.use_precision_aware_optimizer": (False, "OptimizerConfig"),
    "optimizer.clip_grad": (1.0, "OptimizerConfig"),
    "optimizer.overlap_cpu_optimizer_d2h_h2d": (False, "OptimizerConfig"),
    "optimizer.offload_optimizer_states": (False, "Megatron-LM PR 2811"),
    "ddp.nccl_ub": (False, "DistributedDataParallelConfig"),
}


def add_defaults(store: ConfigStore) -> None:
    """Fill only keys nothing else set (explicit, log or derived values always win)."""
    for key, (value, owner) in DEFAULTS.items():
        if store.resolve(key) is None:
            source = Source(f"default ({owner}, megatron-core {MCORE_VERSION})")
            store.set_derived(Resolved(key, value, source, "default"))
