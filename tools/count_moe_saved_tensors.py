"""Count the bytes megatron-core saves for backward in one layer's MLP block, MoE against dense, on CPU.

Not a test (it needs torch and megatron-core, which CI must not): the source of the COUNTED figures in
test_moe_activations.py. megatron-core 0.19.0 ships for Python 3.12 only; 0.16.1 installs on 3.11 and saves the
same tensors on these paths (memory/activations.py routed_expert_bytes says where they differ).

    python3.11 -m venv /tmp/moe-venv && /tmp/moe-venv/bin/pip install torch==2.13.0+cpu megatron-core==0.16.1
    /tmp/moe-venv/bin/python tools/count_moe_saved_tensors.py

The alltoall dispatcher makes CUDA streams when built, so it is not counted here.
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist
import torch.nn.functional as F

os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", "29555")
dist.init_process_group("gloo", rank=0, world_size=1)

from megatron.core import parallel_state  # noqa: E402

parallel_state.initialize_model_parallel(1, 1, expert_model_parallel_size=1)
torch.cuda.current_device = lambda: "cpu"  # the router moves a weight it finds on the CPU to "the GPU"

import megatron.core.transformer.moe.moe_utils as moe_utils  # noqa: E402
from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec  # noqa: E402
from megatron.core.transformer.transformer_config import TransformerConfig  # noqa: E402
from megatron.core.transformer.transformer_layer import TransformerLayer  # noqa: E402

moe_utils.te_general_gemm = None  # 0.16.1 without Transformer Engine leaves the name undefined

H, F_HIDDEN, SEQ, BATCH, EXPERTS = 256, 704, 128, 4, 8


def saved_bytes(num_experts, topk=2, swiglu=False, pre_softmax=False, shared=None, fusion=None):
    config = TransformerConfig(
        num_layers=1,
        hidden_size=H,
        num_attention_heads=4,
        ffn_hidden_size=F_HIDDEN,
        num_moe_experts=num_experts,
        moe_router_topk=topk,
        moe_ffn_hidden_size=F_HIDDEN if num_experts else None,
        moe_router_pre_softmax=pre_softmax,
        moe_shared_expert_intermediate_size=shared,
        moe_aux_loss_coeff=0.0,
        add_bias_linear=False,
        bf16=True,
        params_dtype=torch.bfloat16,
        pipeline_dtype=torch.bfloat16,
        hidden_dropout=0.0,
        attention_dropout=0.0,
        # Megatron-LM's defaults: fused SwiGLU; GELU with a probability unfused
        bias_activation_fusion=swiglu if fusion is None else fusion,
        masked_softmax_fusion=False,
        bias_dropout_fusion=False,
        persist_layer_norm=False,
        gradient_accumulation_fusion=False,
        use_cpu_initialization=True,
        gated_linear_unit=swiglu,
        activation_func=F.silu if swiglu else F.gelu,
    )
    spec = get_gpt_layer_local_spec(num_experts=num_experts, moe_grouped_gemm=False)
    layer = TransformerLayer(config, spec.submodules, layer_number=1).to(torch.bfloat16)
    x = torch.randn(SEQ, BATCH, H, dtype=torch.bfloat16, requires_grad=True)
    skip = {p.untyped_storage().data_ptr() for p in layer.parameters()} | {x.untyped_storage().data_ptr()}
    storages: dict[int, int] = {}

    def pack(tensor):
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in skip:
            storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        out, _ = layer.mlp(layer.pre_mlp_layernorm(x))
    out.float().sum().backward()
    return sum(storages.values())


if __name__ == "__main__":
    gelu, swiglu = saved_bytes(None), saved_bytes(None, swiglu=True)
    print("gelu top-2", saved_bytes(EXPERTS) - gelu)
    print("gelu top-4", saved_bytes(EXPERTS, topk=4) - gelu)
    print("gelu top-1 pre-softmax", saved_bytes(EXPERTS, topk=1, pre_softmax=True) - gelu)
    print("fused swiglu top-2, shared expert 512", saved_bytes(EXPERTS, swiglu=True, shared=512) - swiglu)
    print("unfused swiglu top-2", saved_bytes(EXPERTS, swiglu=True, fusion=False) - swiglu)
    print("dense swiglu, unfused less fused", saved_bytes(None, swiglu=True, fusion=False) - swiglu)
