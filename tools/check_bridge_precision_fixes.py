"""What Megatron-Bridge 0.3.1 does with the precision fixes offloaddoctor prints in its dialect, run through the
real config classes (`ConfigContainer.validate()` and `runtime_config_update`, which applies a `mixed_precision`
recipe), on tools/record_bridge_summary.py's Llama-3.2-1B config with optimizer offloading (which needs the
precision-aware optimizer). Prints one line per case: the overrides, then `refused: <message>` or the values the
model, optimizer and DDP configs end up with. Output kept as fixtures/bridge-0.3.1/precision-fixes.txt.

    /work/venv-bridge/bin/python tools/check_bridge_precision_fixes.py   # the venv of record_bridge_summary.py
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from record_bridge_summary import build, load_bridge_config

OFFLOAD = {
    "optimizer.optimizer_cpu_offload": True,
    "optimizer.optimizer_offload_fraction": 0.5,
    "optimizer.use_precision_aware_optimizer": True,
}
FP32 = {**OFFLOAD, "model.bf16": False, "optimizer.bf16": False, "ddp.grad_reduce_in_fp32": False}
# (name, the run's settings, its mixed_precision recipe, the override printed or tried)
CASES = [
    ("fp32 model, as the run had it", FP32, None, {}),
    ("fp32 model + model.bf16=True alone (printed at first)", FP32, None, {"model.bf16": True}),
    ("fp32 model + mixed_precision=bf16_mixed (printed)", FP32, "bf16_mixed", {}),
    ("fp16 recipe, as the run had it", OFFLOAD, "fp16_mixed", {}),
    (
        "fp16 recipe + ddp.grad_reduce_in_fp32=True (printed until this check)",
        OFFLOAD,
        "fp16_mixed",
        {"ddp.grad_reduce_in_fp32": True},
    ),
    (
        "fp16 recipe + mixed_precision.grad_reduce_in_fp32=True (printed)",
        OFFLOAD,
        "fp16_mixed",
        {"recipe.grad_reduce_in_fp32": True},
    ),
    (
        "bf16 recipe, offloading without the precision-aware optimizer (Bridge's default)",
        {**OFFLOAD, "optimizer.use_precision_aware_optimizer": False},
        "bf16_mixed",
        {},
    ),
    (
        "bf16 recipe + optimizer.use_precision_aware_optimizer=True (printed for offloading without it)",
        {**OFFLOAD, "optimizer.use_precision_aware_optimizer": False},
        "bf16_mixed",
        {"optimizer.use_precision_aware_optimizer": True},
    ),
    (
        "fp16 without a recipe + ddp.grad_reduce_in_fp32=True (the summary's other case)",
        {**FP32, "model.fp16": True, "optimizer.fp16": True},
        None,
        {"ddp.grad_reduce_in_fp32": True},
    ),
]


def outcome(config, llama, workdir: str, settings: dict, recipe: str | None, override: dict) -> str:
    from megatron.bridge.training.config import runtime_config_update
    from megatron.bridge.training.mixed_precision import get_mixed_precision_config

    plain = {k: v for k, v in {**settings, **override}.items() if not k.startswith("recipe.")}
    cfg = build(config, llama, workdir, {"set": plain})
    if recipe is not None:
        cfg.mixed_precision = get_mixed_precision_config(recipe)
        for key, value in override.items():
            if key.startswith("recipe."):
                setattr(cfg.mixed_precision, key.removeprefix("recipe."), value)
    try:
        runtime_config_update(cfg)
        cfg.validate()
    except (AssertionError, ValueError) as error:
        return f"refused: {type(error).__name__}: {error}"
    return (
        f"model.bf16={cfg.model.bf16} model.fp16={cfg.model.fp16} optimizer.bf16={cfg.optimizer.bf16} "
        f"optimizer.fp16={cfg.optimizer.fp16} ddp.grad_reduce_in_fp32={cfg.ddp.grad_reduce_in_fp32} "
        f"optimizer.use_precision_aware_optimizer={cfg.optimizer.use_precision_aware_optimizer}"
    )


def main() -> None:
    config, llama = load_bridge_config()
    # Transformer Engine is not installed here: megatron-core 0.16.1's OptimizerConfig.__post_init__ compares its
    # missing version (None >= Version raises) only to decide store_param_remainders, which no case reads.
    import megatron.core.optimizer.optimizer_config as optimizer_config

    optimizer_config.is_te_min_version = lambda *_: False
    with tempfile.TemporaryDirectory() as workdir:
        for name, settings, recipe, override in CASES:
            print(f"{name}: {outcome(config, llama, workdir, settings, recipe, override)}")


if __name__ == "__main__":
    main()
